package daemon

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/rpdhq/rpd/api"
)

// A hot reload that shrinks a pool below what is held says so in the log,
// as rpd plan does; removing a pool in use is still no refusal (the daemon
// keeps it until idle).
func TestReloadWarnsAboutShrinkingBelowHeld(t *testing.T) {
	var logs syncBuffer
	td := startDaemon(t, "pool \"db\" { slots = 5 }\n", func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	for range 3 {
		if _, err := td.c.Acquire(context.Background(), "db", api.AcquireRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	td.edit(t, "pool \"db\" { slots = 1 }\n")
	if want := "pool.db: 3 slots held; shrinking to 1 makes new requests wait until 2 are released"; !strings.Contains(logs.String(), want) {
		t.Fatalf("the log lacks %q:\n%s", want, logs.String())
	}
	td.edit(t, "")
	if st := td.d.Status(); !st.LastReload.OK {
		t.Fatalf("removing the pool in use was refused: %s", st.LastReload.Error)
	}
}
