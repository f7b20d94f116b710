package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/daemon/internal/component"
	"github.com/rpdhq/rpd/daemon/watch"
	"github.com/rpdhq/rpd/spec"
)

func TestResizeGrantsWaiterWithoutDroppingHolders(t *testing.T) {
	td := startDaemon(t, `pool "db" { slots = 1 }`)
	ctx := ctxT(t)
	held, err := td.c.Acquire(ctx, "db", api.AcquireRequest{TaskID: "holder"})
	if err != nil {
		t.Fatal(err)
	}
	v0 := td.d.Status().ConfigVersion
	got := make(chan error, 1)
	go func() {
		_, err := td.c.Acquire(ctx, "db", api.AcquireRequest{TaskID: "waiter", WaitSeconds: 10})
		got <- err
	}()
	waitFor(t, "the waiter", func() bool { st, _ := td.c.Pool(ctx, "db"); return st.Queued == 1 })
	td.edit(t, `pool "db" { slots = 2 }`)
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter after the resize: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("growing the pool did not grant the waiter")
	}
	st := td.d.Status()
	if st.ConfigVersion != v0+1 || !st.LastReload.OK || !st.LastReload.Changed {
		t.Fatalf("status after the resize = version %d (was %d), last %+v", st.ConfigVersion, v0, st.LastReload)
	}
	// Shrinking below what is held revokes nothing.
	td.edit(t, `pool "db" { slots = 1 }`)
	if ps, _ := td.c.Pool(ctx, "db"); ps.Used != 2 || ps.Total != 1 || ps.Available != 0 {
		t.Fatalf("pool after shrinking below its holders = %+v, want used 2 of 1", ps)
	}
	if _, err := td.c.Heartbeat(ctx, held.LeaseID); err != nil {
		t.Fatalf("the holder lost its lease in a reload: %v", err)
	}
}

func TestRejectedConfigKeepsTheLastGoodOne(t *testing.T) {
	td := startDaemon(t, `pool "db" { slots = 2 }`)
	ctx := ctxT(t)
	v0 := td.d.Status().ConfigVersion
	failures := func() float64 {
		var m dto.Metric
		if err := td.d.metrics.reloads.WithLabelValues("failure").Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}

	broken := filepath.Join(td.dir, "zz-broken.hcl")
	writeFile(t, broken, "pool \"b\" {\n  slots = \n")
	res := td.d.Reload(ctx)
	if res.OK || res.ConfigVersion != v0 {
		t.Fatalf("reload of a broken file = %+v, want rejected at version %d", res, v0)
	}
	if !strings.Contains(res.Error, broken+":2,") {
		t.Fatalf("error %q does not name %s:2", res.Error, broken)
	}
	st := td.d.Status()
	if st.ConfigVersion != v0 || st.LastReload.OK || st.LastReload.Error != res.Error {
		t.Fatalf("status after the rejection = %+v", st)
	}
	if ps, _ := td.c.Pool(ctx, "db"); ps.Total != 2 {
		t.Fatalf("the rejected configuration touched pool db: %+v", ps)
	}
	if err := td.c.Ready(ctx); err != nil {
		t.Fatalf("readyz after a rejected reload: %v (the last good configuration is active)", err)
	}
	// The watcher's reload does not retry unchanged content.
	f := failures()
	td.d.reloadIfChanged(ctx)
	if got := failures(); got != f {
		t.Fatalf("an unchanged rejected configuration was retried: failures %v -> %v", f, got)
	}
	// A semantic error (not a syntax one) is rejected the same way, with
	// the line of the offending attribute.
	writeFile(t, broken, "pool \"b\" {\n  slots = -3\n}\n")
	res = td.d.reloadIfChanged(ctx)
	if res.OK || !strings.Contains(res.Error, broken+":2,") {
		t.Fatalf("negative slots = %+v, want rejected at %s:2", res, broken)
	}
	// A fix always applies.
	writeFile(t, broken, "pool \"b\" {\n  slots = 3\n}\n")
	res = td.d.reloadIfChanged(ctx)
	if !res.OK || res.ConfigVersion != v0+1 {
		t.Fatalf("fixed configuration = %+v, want applied as version %d", res, v0+1)
	}
	if ps, err := td.c.Pool(ctx, "b"); err != nil || ps.Total != 3 {
		t.Fatalf("pool b after the fix = %+v, %v", ps, err)
	}
	// Unchanged content after a good reload is a no-op; a comment is no
	// change of meaning, so the version stays.
	if res := td.d.reloadIfChanged(ctx); res.ConfigVersion != v0+1 {
		t.Fatalf("no-op reload changed the version: %+v", res)
	}
	writeFile(t, broken, "# a comment\npool \"b\" {\n  slots = 3\n}\n")
	if res := td.d.reloadIfChanged(ctx); !res.OK || res.Changed || res.ConfigVersion != v0+1 {
		t.Fatalf("a comment-only edit = %+v, want ok, unchanged, version %d", res, v0+1)
	}
	// A configuration the runtime packages refuse is rejected before
	// anything is touched: the budget below is fine, the ceiling is not.
	writeFile(t, broken, "budget \"ok\" {}\nvm_ceiling \"bad\" {\n  max = 1\n  claim_ttl = \"10s\"\n  stale_after = \"30s\"\n}\n")
	res = td.d.reloadIfChanged(ctx)
	if res.OK {
		t.Fatalf("claim_ttl <= stale_after was accepted: %+v", res)
	}
	if list, _ := td.c.Budgets(ctx); len(list) != 0 {
		t.Fatalf("a rejected configuration created budgets: %+v", list)
	}
}

func TestRemovedPoolIsKeptWhileHeld(t *testing.T) {
	td := startDaemon(t, "pool \"db\" { slots = 2 }\npool \"tmp\" { slots = 1 }\n")
	ctx := ctxT(t)
	l, err := td.c.Acquire(ctx, "tmp", api.AcquireRequest{})
	if err != nil {
		t.Fatal(err)
	}
	td.edit(t, "pool \"db\" { slots = 2 }\n")
	ps, err := td.c.Pool(ctx, "tmp")
	if err != nil || !ps.Retained || ps.Used != 1 {
		t.Fatalf("removed pool with a holder = %+v, %v; want retained with its slot", ps, err)
	}
	if _, err := td.c.Heartbeat(ctx, l.LeaseID); err != nil {
		t.Fatalf("holder of a removed pool: %v", err)
	}
	if _, err := td.c.Acquire(ctx, "tmp", api.AcquireRequest{WaitSeconds: 1}); apiErr(t, err).Status != 404 {
		t.Fatalf("acquire on a removed pool = %v, want 404", err)
	}
	if err := td.c.Release(ctx, l.LeaseID); err != nil {
		t.Fatal(err)
	}
	td.d.arb.Sweep(ctx)
	if _, err := td.c.Pool(ctx, "tmp"); apiErr(t, err).Status != 404 {
		t.Fatalf("idle removed pool = %v, want gone (404)", err)
	}
}

func TestRemovedPoolWithAllowDestroyDropsHolders(t *testing.T) {
	td := startDaemon(t, "pool \"tmp\" {\n  slots = 2\n  allow_destroy = true\n}\n")
	ctx := ctxT(t)
	l, err := td.c.Acquire(ctx, "tmp", api.AcquireRequest{Slots: 2})
	if err != nil {
		t.Fatal(err)
	}
	td.edit(t, "")
	if _, err := td.c.Pool(ctx, "tmp"); apiErr(t, err).Status != 404 {
		t.Fatalf("pool removed with allow_destroy = %v, want gone", err)
	}
	if _, err := td.c.Heartbeat(ctx, l.LeaseID); apiErr(t, err).Status != 404 {
		t.Fatalf("holder of a destroyed pool = %v, want its lease gone", err)
	}
}

func TestReloadRefusesAnotherStackOrBackend(t *testing.T) {
	td := startDaemon(t, `pool "db" { slots = 1 }`)
	for _, rpd := range []string{
		"rpd {\n  stack = \"other\"\n  backend \"local\" { path = \"" + filepath.Join(td.state, "state.db") + "\" }\n}\n",
		"rpd {\n  stack = \"t\"\n  backend \"local\" { path = \"" + filepath.Join(td.state, "other.db") + "\" }\n}\n",
	} {
		writeFile(t, filepath.Join(td.dir, "rpd.hcl"), rpd)
		if res := td.d.Reload(ctxT(t)); res.OK || !strings.Contains(res.Error, "restart the daemon") {
			t.Fatalf("reload onto another stack or backend = %+v, want rejected", res)
		}
	}
}

func TestInvalidStartupConfiguration(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(dir, "rpd.hcl"), rpdBlock(state))
	writeFile(t, filepath.Join(dir, "main.hcl"), "pool \"x\" {\n  slots = 0\n}\n")
	_, err := New(context.Background(), Options{Mode: ModeWatch, Path: dir, Listen: "127.0.0.1:0"})
	ce, ok := err.(*ConfigError)
	if !ok {
		t.Fatalf("New with an invalid configuration = %v (%T), want *ConfigError", err, err)
	}
	if !strings.Contains(ce.Error(), "main.hcl:2,") {
		t.Fatalf("error %q does not point at main.hcl:2", ce.Error())
	}
}

// The real watcher, end to end in-process: an editor's atomic replace
// reloads without an explicit Reload.
func TestWatcherReloadsOnAtomicReplace(t *testing.T) {
	td := startDaemon(t, `pool "db" { slots = 1 }`, func(o *Options) {
		o.ManualReload = false
		o.Watch = watch.Options{Debounce: 20 * time.Millisecond, Resync: -1}
	})
	v0 := td.d.Status().ConfigVersion
	tmp := filepath.Join(td.dir, ".main.hcl.tmp")
	writeFile(t, tmp, `pool "db" { slots = 5 }`)
	if err := os.Rename(tmp, filepath.Join(td.dir, "main.hcl")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload", func() bool { return td.d.Status().ConfigVersion == v0+1 })
	if ps, _ := td.c.Pool(ctxT(t), "db"); ps.Total != 5 {
		t.Fatalf("pool after the replace = %+v", ps)
	}
}

func TestReloadRoute(t *testing.T) {
	td := startDaemon(t, `pool "db" { slots = 1 }`)
	ctx := ctxT(t)
	writeFile(t, filepath.Join(td.dir, "main.hcl"), `pool "db" { slots = 4 }`)
	res, err := td.c.Reload(ctx)
	if err != nil || !res.OK || !res.Changed {
		t.Fatalf("POST /v1/reload = %+v, %v", res, err)
	}
	writeFile(t, filepath.Join(td.dir, "main.hcl"), `pool "db" { slots = "four" }`)
	res, err = td.c.Reload(ctx)
	if err == nil || res.OK || !strings.Contains(res.Error, "main.hcl:1,") {
		t.Fatalf("POST /v1/reload of a broken file = %+v, %v; want rejected naming main.hcl:1", res, err)
	}
}

func TestFingerprintIgnoresPositions(t *testing.T) {
	a, _ := loadSnapshot(watch.Snapshot{Files: map[string][]byte{"a.hcl": []byte("pool \"p\" { slots = 2 }\n")}}, spec.Vars{})
	b, _ := loadSnapshot(watch.Snapshot{Files: map[string][]byte{"b.hcl": []byte("\n\n# moved\npool \"p\" {\n  slots = 2\n}\n")}}, spec.Vars{})
	c, _ := loadSnapshot(watch.Snapshot{Files: map[string][]byte{"a.hcl": []byte("pool \"p\" { slots = 3 }\n")}}, spec.Vars{})
	fp := func(cfg *spec.Config) string { return fingerprint(component.WatchInput(cfg).Doc()) }
	if fp(a) != fp(b) {
		t.Fatal("moving a block changed the fingerprint")
	}
	if fp(a) == fp(c) {
		t.Fatal("changing slots kept the fingerprint")
	}
}

// The watcher logs through the daemon's logger: a configuration directory
// that vanished before Run is reported (and waited for), and its return
// reloads.
func TestWatcherLogsThroughTheDaemonLogger(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	dir = filepath.Join(dir, "conf")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "rpd.hcl"), rpdBlock(state))
	writeFile(t, filepath.Join(dir, "main.hcl"), `pool "db" { slots = 1 }`)
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d, err := New(ctx, Options{Mode: ModeWatch, Path: dir, Listen: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Watch: watch.Options{Debounce: 20 * time.Millisecond, Resync: -1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("Run did not return within 20s of cancel")
		}
	}()
	waitFor(t, "the watcher's warning in the daemon's log", func() bool {
		return strings.Contains(logs.String(), "component=watch") && strings.Contains(logs.String(), "does not exist yet")
	})
	v0 := d.Status().ConfigVersion
	tmp := dir + ".new"
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(tmp, "rpd.hcl"), rpdBlock(state))
	writeFile(t, filepath.Join(tmp, "main.hcl"), `pool "db" { slots = 3 }`)
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload of the returned directory", func() bool { return d.Status().ConfigVersion > v0 })
}

// The change log names exactly the attributes that changed.
func TestReloadLogNamesChangedAttributes(t *testing.T) {
	var logs syncBuffer
	td := startDaemon(t, "pool \"db\" { slots = 5 }\nbudget \"b\" {}\npriority \"hi\" { weight = 1 }\n", func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	td.edit(t, "pool \"db\" {\n  slots = 5\n  description = \"heavy\"\n}\nbudget \"b\" { spill_slots = 3 }\npriority \"hi\" { weight = 7 }\n")
	line := ""
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "configuration applied") {
			line = l
		}
	}
	for _, want := range []string{`pool.db: description \"\" -> \"heavy\"`, "budget.b: spill_slots 16 -> 3", "priority.hi: weight 1 -> 7"} {
		if !strings.Contains(line, want) {
			t.Errorf("reload log %q does not contain %q", line, want)
		}
	}
	if strings.Contains(line, "slots 5 -> 5") || strings.Contains(line, "scan_ring") {
		t.Errorf("reload log %q names attributes that did not change", line)
	}
}
