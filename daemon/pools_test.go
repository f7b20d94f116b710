package daemon

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rpdhq/rpd/api"
)

// A pool's max_wait bounds a request's wait_seconds: above it the acquire
// answers 400 in the JSON error model, at or below it the request is
// served; removing max_wait lifts the bound.
func TestPoolMaxWait(t *testing.T) {
	td := startDaemon(t, "pool \"p\" {\n  slots    = 2\n  max_wait = \"5s\"\n}\n")
	ctx := ctxT(t)
	status, body := td.raw(t, "POST", "/v1/pools/p/acquire", `{"task_id":"x","wait_seconds":30}`)
	var eb api.ErrorBody
	if err := json.Unmarshal([]byte(body), &eb); status != 400 || err != nil || eb.Error.Code != api.CodeBadRequest ||
		!strings.Contains(eb.Error.Message, "max_wait of 5s") {
		t.Fatalf("wait_seconds 30 above max_wait 5s = %d %s, want 400 bad_request naming max_wait", status, body)
	}
	if st, _ := td.c.Pool(ctx, "p"); st.Used != 0 || st.Queued != 0 {
		t.Fatalf("a refused request touched the pool: %+v", st)
	}
	for _, wait := range []float64{5, 2, 0} {
		l, err := td.c.Acquire(ctx, "p", api.AcquireRequest{TaskID: "y", WaitSeconds: wait})
		if err != nil {
			t.Fatalf("wait_seconds %v within max_wait: %v", wait, err)
		}
		if err := td.c.Release(ctx, l.LeaseID); err != nil {
			t.Fatal(err)
		}
	}
	// Other pools (default_pool here) have no bound.
	if _, err := td.c.Acquire(ctx, "default_pool", api.AcquireRequest{WaitSeconds: 30}); err != nil {
		t.Fatalf("default_pool without max_wait: %v", err)
	}
	td.edit(t, "pool \"p\" { slots = 2 }\n")
	if _, err := td.c.Acquire(ctx, "p", api.AcquireRequest{WaitSeconds: 30}); err != nil {
		t.Fatalf("after removing max_wait, wait_seconds 30: %v", err)
	}
}

// A daemon that takes over opens the grant journal's segment before it
// serves, so that its first grants do not wait for the segment's
// preallocation (the local backend's PrepareJournal).
func TestLeaderOpensTheGrantJournalBeforeItsFirstGrant(t *testing.T) {
	td := startDaemon(t, `pool "p" { slots = 1 }`)
	segs, err := filepath.Glob(filepath.Join(td.state, "state.db.journal", "t.*.0"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("journal segments after the start: %v, %v; want the leader's one", segs, err)
	}
	if _, err := td.c.Acquire(context.Background(), "p", api.AcquireRequest{TaskID: "t"}); err != nil {
		t.Fatal(err)
	}
	if again, _ := filepath.Glob(filepath.Join(td.state, "state.db.journal", "t.*")); len(again) != 1 || again[0] != segs[0] {
		t.Fatalf("journal segments after a grant: %v; want %v only", again, segs)
	}
}
