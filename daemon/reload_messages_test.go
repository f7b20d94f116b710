package daemon

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rpdhq/rpd/api"
)

// After rejected edits are fixed, the daemon logs the recovery, so the
// last line of its log is not a stale error, even when the fix restores
// the configuration that was active (nothing changes).
func TestRecoveryAfterRejectedReloadsIsLogged(t *testing.T) {
	var logs syncBuffer
	good := "pool \"db\" {\n  slots = 2\n}\n"
	td := startDaemon(t, good, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	ctx := ctxT(t)
	main := filepath.Join(td.dir, "main.hcl")
	for i, bad := range []string{"pool \"db\" {\n  slots = \n", "pool \"db\" {\n  slots = -1\n}\n"} {
		writeFile(t, main, bad)
		if res := td.d.reloadIfChanged(ctx); res.OK {
			t.Fatalf("bad edit %d accepted", i)
		}
	}
	writeFile(t, main, good)
	if res := td.d.reloadIfChanged(ctx); !res.OK {
		t.Fatalf("the fix was rejected: %+v", res)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, "configuration applied again after 2 rejected reloads") || strings.Contains(last, "level=ERROR") {
		t.Fatalf("last log line = %q, want the recovery", last)
	}

	// One rejection: singular; and the count starts again.
	writeFile(t, main, "pool \"db\" {\n  slots = 3\n  nope = 1\n}\n")
	td.d.reloadIfChanged(ctx)
	writeFile(t, main, "pool \"db\" {\n  slots = 3\n}\n")
	td.d.reloadIfChanged(ctx)
	if !strings.Contains(logs.String(), "configuration applied again after 1 rejected reload ") && !strings.Contains(logs.String(), "configuration applied again after 1 rejected reload\"") {
		t.Fatalf("want the singular recovery line:\n%s", logs.String())
	}
}

// A pool removed from the configuration while its slots are held is kept
// for its holders but grants nothing more: it shows available 0.
func TestRemovedPoolShowsNothingAvailable(t *testing.T) {
	td := startDaemon(t, "pool \"tmp\" {\n  slots = 3\n}\n")
	ctx := ctxT(t)
	if _, err := td.c.Acquire(ctx, "tmp", api.AcquireRequest{}); err != nil {
		t.Fatal(err)
	}
	td.edit(t, "")
	ps, err := td.c.Pool(ctx, "tmp")
	if err != nil || !ps.Retained || ps.Used != 1 || ps.Available != 0 {
		t.Fatalf("removed pool with a holder = %+v, %v; want retained, used 1, available 0", ps, err)
	}
	st, err := td.c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st.Components.Pools {
		if p.Name == "tmp" && p.Available != 0 {
			t.Fatalf("/v1/status shows the removed pool with %d available", p.Available)
		}
	}
}
