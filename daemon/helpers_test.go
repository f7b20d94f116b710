package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rpdhq/rpd/client"
	"github.com/rpdhq/rpd/internal/clocktest"
	"github.com/rpdhq/rpd/internal/waitfor"
	"github.com/rpdhq/rpd/runtime/pools"
)

// testDaemon is a daemon running in-process on a 127.0.0.1 port.
type testDaemon struct {
	d     *Daemon
	c     *client.Client
	dir   string // the configuration directory
	state string // the directory of the SQLite file
	addr  string
	stop  func() error
}

// rpdBlock points the stack at a SQLite file under state.
func rpdBlock(state string) string {
	return fmt.Sprintf("rpd {\n  stack = \"t\"\n  backend \"local\" { path = %q }\n}\n", filepath.Join(state, "state.db"))
}

// startDaemon runs a watch-mode daemon on a directory holding rpd.hcl (the
// rpd block) and main.hcl (body). The watcher only polls once an hour, so
// tests reload explicitly (ManualReload); pass mods to change that.
func startDaemon(t testing.TB, body string, mods ...func(*Options)) *testDaemon {
	t.Helper()
	dir, state := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(dir, "rpd.hcl"), rpdBlock(state))
	writeFile(t, filepath.Join(dir, "main.hcl"), body)
	return startDaemonIn(t, dir, state, mods...)
}

func startDaemonIn(t testing.TB, dir, state string, mods ...func(*Options)) *testDaemon {
	t.Helper()
	opts := Options{
		Mode:   ModeWatch,
		Path:   dir,
		Listen: "127.0.0.1:0",
		// Tests reload explicitly; those of the watcher set ManualReload false.
		ManualReload: true,
	}
	for _, m := range mods {
		m(&opts)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d, err := New(ctx, opts)
	if err != nil {
		cancel()
		t.Fatalf("New: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(20 * time.Second):
				runErr = fmt.Errorf("Run did not return within 20s of cancel")
			}
		})
		return runErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil && !errors.Is(err, ErrSteppedDown) {
			t.Errorf("daemon shutdown: %v", err)
		}
	})
	// Calls answer as the daemon did: the tests here look at each answer.
	copts := []client.Option{client.WithRetry(0)}
	if opts.Token != "" {
		copts = append(copts, client.WithToken(opts.Token))
	}
	c, err := client.New(d.Addr(), copts...)
	if err != nil {
		t.Fatal(err)
	}
	return &testDaemon{d: d, c: c, dir: dir, state: state, addr: d.Addr(), stop: stop}
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// edit rewrites main.hcl and reloads synchronously.
func (td *testDaemon) edit(t *testing.T, body string) {
	t.Helper()
	writeFile(t, filepath.Join(td.dir, "main.hcl"), body)
	if res := td.d.Reload(context.Background()); !res.OK {
		t.Fatalf("reload after edit failed: %s", res.Error)
	}
}

// raw sends a request with a raw body and returns the status and body.
func (td *testDaemon) raw(t *testing.T, method, path, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+td.addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, sb.String()
}

// fakeClock is a clocktest.Fake seen as a pools.Clock.
type fakeClock struct{ *clocktest.Fake }

func (c *fakeClock) AfterFunc(d time.Duration, f func()) pools.Timer { return c.Fake.AfterFunc(d, f) }

func newFakeClock() *fakeClock { return &fakeClock{clocktest.NewFake(time.Unix(1_700_000_000, 0))} }

// waitFor polls cond, a request to the daemon as often as not, every 10 ms
// for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitfor.Paced(t, waitfor.DefaultTimeout, 10*time.Millisecond, what, cond)
}
