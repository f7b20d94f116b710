package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// rpdBinary is the rpd built once by TestMain for the end-to-end tests,
// which run it as a user would.
var rpdBinary string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "rpd-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	rpdBinary = filepath.Join(dir, "rpd")
	build := exec.Command("go", "build", "-o", rpdBinary, ".")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go build ./cmd/rpd: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// workdir is a directory holding a configuration, in which the rpd binary
// runs with the given extra environment.
type workdir struct {
	t   *testing.T
	dir string
	env []string
}

func newWorkdir(t *testing.T, env ...string) *workdir {
	return &workdir{t: t, dir: t.TempDir(), env: env}
}

// write writes main.hcl (or name) in the directory.
func (w *workdir) write(name, content string) {
	w.t.Helper()
	if err := os.WriteFile(filepath.Join(w.dir, name), []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

// result is one run of the binary.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s\n--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// cmd prepares rpd ARGS in the directory, bounded to a minute.
func (w *workdir) cmd(ctx context.Context, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	c := exec.CommandContext(ctx, rpdBinary, args...)
	c.Dir = w.dir
	c.Env = append(cleanEnv(), w.env...)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	c.WaitDelay = 5 * time.Second
	return c, &stdout, &stderr
}

// rpd runs rpd ARGS in the directory and returns its exit code and output.
func (w *workdir) rpd(args ...string) result {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, stdout, stderr := w.cmd(ctx, args...)
	err := c.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		w.t.Fatalf("rpd %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// must runs rpd ARGS and fails the test unless it exits with code.
func (w *workdir) must(code int, args ...string) result {
	w.t.Helper()
	r := w.rpd(args...)
	if r.code != code {
		w.t.Fatalf("rpd %s: want exit %d, got %s", strings.Join(args, " "), code, r)
	}
	return r
}

// cleanEnv is the test's environment without what would change rpd's
// behaviour (AWS settings, NO_COLOR, RPD_VAR_*).
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "AWS_") || strings.HasPrefix(kv, "RPD_") || strings.HasPrefix(kv, "NO_COLOR=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func contains(t *testing.T, r result, where, want string) {
	t.Helper()
	s := r.stdout
	if where == "stderr" {
		s = r.stderr
	}
	if !strings.Contains(s, want) {
		t.Fatalf("%s lacks %q:\n%s", where, want, r)
	}
}
