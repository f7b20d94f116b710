package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rpdhq/rpd/internal/buildinfo"
)

// runT runs the CLI in-process and returns the exit code and both outputs.
func runT(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func runEnvT(t *testing.T, e *env, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	e.stdout, e.stderr = &out, &errb
	if e.stdin == nil {
		e.stdin = strings.NewReader("")
	}
	code := runEnv(context.Background(), e, args)
	return code, out.String(), errb.String()
}

func write(t *testing.T, name, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

func TestNoArgsAndUnknown(t *testing.T) {
	code, out, errs := runT(t)
	if code != 1 || out != "" || !strings.Contains(errs, "validate") {
		t.Errorf("no args: code %d, stdout %q, stderr %q", code, out, errs)
	}
	code, _, errs = runT(t, "valdate")
	if code != 1 || !strings.Contains(errs, `unknown command "valdate"`) || !strings.Contains(errs, `Did you mean "validate"?`) {
		t.Errorf("unknown command: code %d, stderr %q", code, errs)
	}
	code, _, errs = runT(t, "help", "nope")
	if code != 1 || !strings.Contains(errs, "unknown command") {
		t.Errorf("help nope: %d %q", code, errs)
	}
}

// TestHelpListsEveryFlag: "rpd help" and "rpd CMD -h" show every command's
// every flag, and every command honours -h (printHelp relies on it).
func TestHelpListsEveryFlag(t *testing.T) {
	code, all, _ := runT(t, "help")
	if code != 0 {
		t.Fatalf("rpd help: exit %d", code)
	}
	for _, c := range commands {
		for _, args := range [][]string{{c.name, "-h"}, {c.name, "--help"}, {"help", c.name}} {
			code, out, errs := runT(t, args...)
			if code != 0 || errs != "" || !strings.HasPrefix(out, "Usage: rpd "+c.name) {
				t.Errorf("rpd %v: code %d, stdout %q, stderr %q", args, code, out, errs)
			}
		}
		if !strings.Contains(all, c.name) || !strings.Contains(all, c.synopsis) {
			t.Errorf("rpd help lacks %s", c.name)
		}
	}
	for _, flag := range []string{"-var", "-var-file", "-no-color", "-json", "-check", "-diff", "-recursive", "-list", "-write"} {
		if !strings.Contains(all, "  "+flag+" ") && !strings.Contains(all, "  "+flag+"\n") {
			t.Errorf("rpd help does not list %s", flag)
		}
	}
}

func TestBadFlag(t *testing.T) {
	code, out, errs := runT(t, "validate", "-nope")
	if code != 1 || out != "" || !strings.Contains(errs, "flag provided but not defined: -nope") || !strings.Contains(errs, "Usage: rpd validate") {
		t.Errorf("code %d stdout %q stderr %q", code, out, errs)
	}
	code, _, errs = runT(t, "validate", "a", "b")
	if code != 1 || !strings.Contains(errs, "expected one configuration") {
		t.Errorf("two args: %d %q", code, errs)
	}
}

const badConfig = "pool \"p\" {\n  slots = -1\n}\nbudget \"b\" {\n  scan_ring = \"lots\"\n}\n"

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	good := write(t, filepath.Join(dir, "good", "main.hcl"), "pool \"p\" {\n  slots = 2\n}\n")
	code, out, errs := runT(t, "validate", good)
	if code != 0 || out != "Success! The configuration is valid.\n" || errs != "" {
		t.Errorf("good file: %d %q %q", code, out, errs)
	}
	code, _, _ = runT(t, "validate", "--no-color", filepath.Dir(good))
	if code != 0 {
		t.Errorf("good dir: %d", code)
	}

	bad := write(t, filepath.Join(dir, "bad", "bad.hcl"), badConfig)
	code, out, errs = runT(t, "validate", filepath.Dir(bad))
	if code != 1 || out != "" {
		t.Errorf("bad: code %d stdout %q", code, out)
	}
	for _, want := range []string{
		"Error: Invalid value for \"slots\"", bad + " line 2, in pool \"p\":", "   2:   slots = -1",
		"Error: Invalid size", bad + " line 5, in budget \"b\":", "\"lots\" is not a size",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("diagnostics lack %q:\n%s", want, errs)
		}
	}
	if strings.Contains(errs, "\x1b[") {
		t.Errorf("colour without a terminal:\n%s", errs)
	}
	if strings.Index(errs, "line 2") > strings.Index(errs, "line 5") {
		t.Errorf("diagnostics out of order:\n%s", errs)
	}
}

func TestValidateColour(t *testing.T) {
	bad := write(t, filepath.Join(t.TempDir(), "bad.hcl"), badConfig)
	tty := func(io.Writer) bool { return true }
	_, _, errs := runEnvT(t, &env{isTerminal: tty}, "validate", bad)
	if !strings.Contains(errs, "\x1b[") {
		t.Errorf("no colour on a terminal:\n%q", errs)
	}
	for _, e := range []*env{{isTerminal: tty, environ: []string{"NO_COLOR=1"}}, {isTerminal: tty}} {
		args := []string{"validate", bad}
		if e.environ == nil {
			args = []string{"validate", "-no-color", bad}
		}
		_, _, errs = runEnvT(t, e, args...)
		if strings.Contains(errs, "\x1b[") {
			t.Errorf("colour despite %v %v:\n%q", e.environ, args, errs)
		}
	}
}

func TestValidateJSON(t *testing.T) {
	bad := write(t, filepath.Join(t.TempDir(), "bad.hcl"), badConfig)
	code, out, errs := runT(t, "validate", "-json", bad)
	if code != 1 || errs != "" {
		t.Errorf("code %d stderr %q", code, errs)
	}
	var res jsonResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.Valid || res.ErrorCount != 2 || res.WarningCount != 0 || len(res.Diagnostics) != 2 {
		t.Fatalf("result %+v", res)
	}
	d := res.Diagnostics[0]
	if d.Severity != "error" || d.Summary != `Invalid value for "slots"` || d.Range == nil ||
		d.Range.Filename != bad || d.Range.Start != (jsonPos{2, 11, 21}) || d.Range.End != (jsonPos{2, 13, 23}) {
		t.Errorf("first diagnostic %+v %+v", d, d.Range)
	}
	good := write(t, filepath.Join(t.TempDir(), "good.hcl"), "")
	code, out, _ = runT(t, "validate", "-json", good)
	if code != 0 || !strings.Contains(out, `"valid": true`) || !strings.Contains(out, `"diagnostics": []`) {
		t.Errorf("good: %d %s", code, out)
	}
}

func TestValidateVars(t *testing.T) {
	dir := t.TempDir()
	cfg := write(t, filepath.Join(dir, "main.hcl"), "variable \"n\" { type = number }\npool \"p\" { slots = var.n }\n")
	vf := write(t, filepath.Join(dir, "vars", "prod.hcl"), "n = 0\n")
	if code, _, errs := runT(t, "validate", cfg); code != 1 || !strings.Contains(errs, "No value for required variable") {
		t.Errorf("missing var: %d %q", code, errs)
	}
	if code, _, errs := runT(t, "validate", "-var", "n=3", cfg); code != 0 {
		t.Errorf("-var: %d %q", code, errs)
	}
	if code, _, errs := runT(t, "validate", "-var-file", vf, cfg); code != 1 || !strings.Contains(errs, "slots must be between 1") {
		t.Errorf("-var-file n=0: %d %q", code, errs)
	}
	if code, _, errs := runT(t, "validate", "-var-file", vf, "-var", "n=2", cfg); code != 0 {
		t.Errorf("-var overrides -var-file: %d %q", code, errs)
	}
	if code, _, errs := runEnvT(t, &env{environ: []string{"RPD_VAR_n=4"}}, "validate", cfg); code != 0 {
		t.Errorf("env: %d %q", code, errs)
	}
	if code, _, errs := runT(t, "validate", "-var", "x=1", cfg); code != 1 || !strings.Contains(errs, "Value for undeclared variable") {
		t.Errorf("undeclared -var: %d %q", code, errs)
	}
	if code, _, errs := runT(t, "validate", filepath.Join(dir, "missing")); code != 1 || !strings.Contains(errs, "Cannot read configuration") {
		t.Errorf("missing path: %d %q", code, errs)
	}
}

func TestValidateExamples(t *testing.T) {
	files, _ := filepath.Glob("../../examples/*.hcl")
	if len(files) < 3 {
		t.Fatalf("found %d examples", len(files))
	}
	for _, f := range files {
		if code, _, errs := runT(t, "validate", f); code != 0 {
			t.Errorf("%s: %d %s", f, code, errs)
		}
	}
	if code, out, errs := runT(t, "fmt", "-check", "../../examples"); code != 0 {
		t.Errorf("examples are not formatted: %d %s %s", code, out, errs)
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := runT(t, "version")
	if code != 0 || !strings.HasPrefix(out, "rpd dev\ngo") {
		t.Errorf("version: %d %q", code, out)
	}
	code, out, _ = runT(t, "-version")
	if code != 0 || !strings.HasPrefix(out, "rpd ") {
		t.Errorf("-version: %d %q", code, out)
	}
	code, out, _ = runT(t, "version", "-json")
	var bi buildinfo.Info
	if code != 0 || json.Unmarshal([]byte(out), &bi) != nil || bi.Version != "dev" || bi.GoVersion == "" {
		t.Errorf("version -json: %d %q", code, out)
	}
	if code, _, _ := runT(t, "version", "extra"); code != 1 {
		t.Errorf("version extra: %d", code)
	}
}

// TestConfigFlagsLoad covers the helper every configuration-reading command
// (plan, apply, watch, …) is built on.
func TestConfigFlagsLoad(t *testing.T) {
	dir := t.TempDir()
	cfgFile := write(t, filepath.Join(dir, "main.hcl"), "variable \"n\" { type = number }\npool \"p\" { slots = var.n }\n")
	load := func(args ...string) (int, string, bool) {
		var cf configFlags
		var errb bytes.Buffer
		e := &env{stderr: &errb, environ: []string{"RPD_VAR_n=2"}, isTerminal: func(io.Writer) bool { return false }}
		fs := newFlagSet("test", "[options] [DIR|FILE]", "help")
		cf.register(fs)
		if code, ok := parseFlags(e, fs, args); !ok {
			t.Fatalf("parse %v: %d", args, code)
		}
		path, code, ok := configPath(e, fs)
		if !ok {
			return code, errb.String(), false
		}
		cfg, code := cf.load(e, path)
		if cfg != nil && cfg.Pools[1].Slots != 2 && cfg.Pools[1].Slots != 5 {
			t.Errorf("slots = %d", cfg.Pools[1].Slots)
		}
		return code, errb.String(), cfg != nil
	}
	if code, errs, ok := load(cfgFile); code != 0 || !ok || errs != "" {
		t.Errorf("env var: %d %v %q", code, ok, errs)
	}
	if code, _, ok := load("-var", "n=5", "--no-color", dir); code != 0 || !ok {
		t.Errorf("-var: %d %v", code, ok)
	}
	if code, errs, ok := load("-var", "n=0", cfgFile); code != 1 || ok || !strings.Contains(errs, cfgFile+" line 2") {
		t.Errorf("invalid: %d %v %q", code, ok, errs)
	}
	if code, errs, ok := load(cfgFile, cfgFile); code != 1 || ok || !strings.Contains(errs, "expected one configuration") {
		t.Errorf("two paths: %d %v %q", code, ok, errs)
	}
}
