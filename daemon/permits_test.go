package daemon

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/internal/clocktest"
)

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Budget permits and ceiling claims outlive the daemon: a restarted one
// on the same backend counts them under their IDs, and their holders'
// heartbeat, release, confirm and cancel keep working.
func TestRestartRestoresPermitsAndClaims(t *testing.T) {
	const body = "budget \"b\" {}\nvm_ceiling \"v\" {\n  max   = 5\n  grant = \"immediate\"\n}\n"
	ctx := ctxT(t)
	first := startDaemon(t, body)
	perm, err := first.c.AcquirePermit(ctx, "b", api.PermitRequest{ScanRingBytes: 1 << 20, Spill: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.c.PushUsage(ctx, "v", 0); err != nil {
		t.Fatal(err)
	}
	unconfirmed, err := first.c.RequestClaim(ctx, "v", api.ClaimRequest{WorkerID: "w1", Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	confirmed, err := first.c.RequestClaim(ctx, "v", api.ClaimRequest{WorkerID: "w2", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.c.ConfirmClaim(ctx, "v", confirmed.ClaimID); err != nil {
		t.Fatal(err)
	}
	cancelled, err := first.c.RequestClaim(ctx, "v", api.ClaimRequest{WorkerID: "w3", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.c.CancelClaim(ctx, "v", cancelled.ClaimID); err != nil {
		t.Fatal(err)
	}
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}

	second := startDaemonIn(t, first.dir, first.state)
	b, err := second.c.Budget(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if b.Permits != 1 || b.ScanRing.Available != b.ScanRing.Total-1<<20 || b.SpillSlots.Available != b.SpillSlots.Total-1 {
		t.Fatalf("budget after the restart: %+v, want the permit's 1 MiB and spill slot still held", b)
	}
	v, err := second.c.Ceiling(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	if v.LocalClaims != 3 {
		t.Fatalf("ceiling after the restart: %+v, want 3 local claims (2 unconfirmed + 1 confirmed; the cancelled one gone)", v)
	}
	if _, err := second.c.PushUsage(ctx, "v", 0); err != nil {
		t.Fatal(err)
	}
	// The confirmed claim retires on this later figure; the unconfirmed
	// one still covers its 2 VMs.
	if v, _ = second.c.Ceiling(ctx, "v"); v.LocalClaims != 2 || v.Available != 3 {
		t.Fatalf("ceiling after a figure: %+v, want 2 local claims, 3 available", v)
	}
	if _, err := second.c.Heartbeat(ctx, perm.LeaseID); err != nil {
		t.Fatalf("heartbeat of the restored permit: %v", err)
	}
	if err := second.c.Release(ctx, perm.LeaseID); err != nil {
		t.Fatalf("release of the restored permit: %v", err)
	}
	if err := second.c.CancelClaim(ctx, "v", unconfirmed.ClaimID); err != nil {
		t.Fatalf("cancel of the restored claim: %v", err)
	}
	b, _ = second.c.Budget(ctx, "b")
	v, _ = second.c.Ceiling(ctx, "v")
	if b.Permits != 0 || b.ScanRing.Available != b.ScanRing.Total || v.LocalClaims != 0 {
		t.Fatalf("after release and cancel: budget %+v, ceiling %+v", b, v)
	}
	fresh, err := second.c.RequestClaim(ctx, "v", api.ClaimRequest{WorkerID: "w4", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, old := range []string{unconfirmed.ClaimID, confirmed.ClaimID, cancelled.ClaimID} {
		if fresh.ClaimID == old {
			t.Fatalf("the new daemon reused claim ID %s", old)
		}
	}
	if err := second.stop(); err != nil {
		t.Fatal(err)
	}

	// A third daemon: every record of a released or cancelled grant is gone;
	// only w4's claim is left.
	third := startDaemonIn(t, first.dir, first.state)
	if b, _ := third.c.Budget(ctx, "b"); b.Permits != 0 {
		t.Fatalf("third daemon: %d permits, want 0", b.Permits)
	}
	if v, _ := third.c.Ceiling(ctx, "v"); v.LocalClaims != 1 {
		t.Fatalf("third daemon: %d local claims, want 1 (w4's)", v.LocalClaims)
	}
}

// Records of grants that lapsed while no daemon ran, or whose budget or
// ceiling is gone, are not restored and are deleted.
func TestRestartDropsLapsedAndOrphanedGrants(t *testing.T) {
	const body = "budget \"b\" {}\nbudget \"gone\" {}\nvm_ceiling \"v\" {\n  max   = 5\n  grant = \"immediate\"\n}\n"
	ctx := ctxT(t)
	first := startDaemon(t, body)
	if _, err := first.c.AcquirePermit(ctx, "b", api.PermitRequest{ScanRingBytes: 1, TTLSeconds: 5}); err != nil {
		t.Fatal(err)
	}
	if _, err := first.c.AcquirePermit(ctx, "gone", api.PermitRequest{ScanRingBytes: 1, TTLSeconds: 3600}); err != nil {
		t.Fatal(err)
	}
	if _, err := first.c.PushUsage(ctx, "v", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := first.c.RequestClaim(ctx, "v", api.ClaimRequest{WorkerID: "w", Count: 1}); err != nil {
		t.Fatal(err)
	}
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(first.dir, "main.hcl"), "budget \"b\" {}\nvm_ceiling \"v\" {\n  max   = 5\n}\n")
	later := &fakeClock{clocktest.NewFake(time.Now().Add(10 * time.Minute))} // past the permit's 5 s and the claim's 2 min
	var logs syncBuffer
	second := startDaemonIn(t, first.dir, first.state, func(o *Options) {
		o.Clock = later
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	if b, _ := second.c.Budget(ctx, "b"); b.Permits != 0 {
		t.Fatalf("a lapsed permit was restored: %+v", b)
	}
	if v, _ := second.c.Ceiling(ctx, "v"); v.LocalClaims != 0 {
		t.Fatalf("a lapsed claim was restored: %+v", v)
	}
	if out := logs.String(); !strings.Contains(out, "expired=2") || !strings.Contains(out, "dropped=1") {
		t.Fatalf("restore summary missing or wrong:\n%s", out)
	}
	recs, err := second.d.arb.GrantStore().LoadGrants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 0 {
		t.Fatalf("records left after the restore: %q", recs)
	}
}

// failingGrants fails every write: a grant that cannot be recorded is not
// granted, and the budget or ceiling is left as it was.
type failingGrants struct{ backend.GrantStore }

func (failingGrants) PutGrant(context.Context, string, []byte) error {
	return errors.New("injected: backend unreachable")
}

func TestGrantNotRecordedIsNotGranted(t *testing.T) {
	const body = "budget \"b\" {}\nvm_ceiling \"v\" {\n  max   = 5\n  grant = \"immediate\"\n}\n"
	ctx := ctxT(t)
	td := startDaemon(t, body)
	td.d.arb.SetGrantStore(failingGrants{td.d.arb.GrantStore()})
	// Answered as a pool lease whose record cannot be written is
	// (pools.ErrStore): 500, with the backend's error.
	_, err := td.c.AcquirePermit(ctx, "b", api.PermitRequest{ScanRingBytes: 1 << 20})
	if err == nil || !strings.Contains(err.Error(), "injected") || apiErr(t, err).Status != http.StatusInternalServerError {
		t.Fatalf("permit with a failing store: %v, want a 500 with the store's error", err)
	}
	if _, err := td.c.PushUsage(ctx, "v", 0); err != nil {
		t.Fatal(err)
	}
	_, err = td.c.RequestClaim(ctx, "v", api.ClaimRequest{WorkerID: "w", Count: 1})
	if err == nil || !strings.Contains(err.Error(), "injected") || apiErr(t, err).Status != http.StatusInternalServerError {
		t.Fatalf("claim with a failing store: %v, want a 500 with the store's error", err)
	}
	b, _ := td.c.Budget(ctx, "b")
	v, _ := td.c.Ceiling(ctx, "v")
	if b.Permits != 0 || b.ScanRing.Available != b.ScanRing.Total || v.LocalClaims != 0 {
		t.Fatalf("a grant that was not recorded is held: budget %+v, ceiling %+v", b, v)
	}
}

// hookGrants calls beforePut before each record is written.
type hookGrants struct {
	backend.GrantStore
	beforePut func(id string)
}

func (h hookGrants) PutGrant(ctx context.Context, id string, body []byte) error {
	h.beforePut(id)
	return h.GrantStore.PutGrant(ctx, id, body)
}

// A release whose record delete lands while a heartbeat of the same permit
// is still writing the record leaves no record behind: the next daemon does
// not count the released permit.
func TestHeartbeatRacingReleaseLeavesNoRecord(t *testing.T) {
	ctx := ctxT(t)
	td := startDaemon(t, "budget \"b\" {}\n")
	perm, err := td.c.AcquirePermit(ctx, "b", api.PermitRequest{ScanRingBytes: 1 << 20, TTLSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	store := td.d.arb.GrantStore()
	entered, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	td.d.arb.SetGrantStore(hookGrants{store, func(string) {
		once.Do(func() { close(entered) })
		<-proceed
	}})
	hb := make(chan error, 1)
	go func() {
		_, err := td.c.Heartbeat(ctx, perm.LeaseID)
		hb <- err
	}()
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the heartbeat never wrote its record")
	}
	if err := td.c.Release(ctx, perm.LeaseID); err != nil {
		t.Fatal(err)
	}
	// Wait (bounded) for the release's queued delete to land, then let the
	// heartbeat's put run after it: the order that used to leave a record.
	for i := 0; ; i++ {
		recs, err := store.LoadGrants(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			break
		}
		if i == 1000 || ctx.Err() != nil {
			t.Fatalf("the release's delete did not land: %q", recs)
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(proceed)
	if err := <-hb; err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	if err := td.stop(); err != nil { // flushes the delete queue
		t.Fatal(err)
	}
	next := startDaemonIn(t, td.dir, td.state)
	if b, _ := next.c.Budget(ctx, "b"); b.Permits != 0 || b.ScanRing.Available != b.ScanRing.Total {
		t.Fatalf("the next daemon counts the released permit: %+v", b)
	}
}

// A permit restored into a budget that shrank while no daemon ran is
// restored whole: the budget reads 0 available (never negative) and grants
// nothing until the permit is released, as after a live shrink.
func TestRestartRestoresPermitIntoAShrunkBudget(t *testing.T) {
	ctx := ctxT(t)
	first := startDaemon(t, "budget \"b\" {\n  scan_ring = \"64MiB\"\n}\n")
	perm, err := first.c.AcquirePermit(ctx, "b", api.PermitRequest{ScanRingBytes: 48 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(first.dir, "main.hcl"), "budget \"b\" {\n  scan_ring = \"32MiB\"\n}\n")
	second := startDaemonIn(t, first.dir, first.state)
	b, err := second.c.Budget(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if b.Permits != 1 || b.ScanRing.Total != 32<<20 || b.ScanRing.Available != 0 {
		t.Fatalf("budget after the restart: %+v, want the 48 MiB permit held in 32 MiB, 0 available", b)
	}
	if _, err := second.c.AcquirePermit(ctx, "b", api.PermitRequest{ScanRingBytes: 1}); apiErr(t, err).Status != http.StatusConflict {
		t.Fatalf("a permit in the over-committed budget: %v, want 409", err)
	}
	if err := second.c.Release(ctx, perm.LeaseID); err != nil {
		t.Fatal(err)
	}
	if b, _ := second.c.Budget(ctx, "b"); b.Permits != 0 || b.ScanRing.Available != 32<<20 {
		t.Fatalf("after the release: %+v, want the whole 32 MiB available", b)
	}
}
