package backendtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/runtime/pools"
)

// leaderLease is the lease the leader cases take: short, because the aws
// harness waits it out in real time.
const leaderLease = 800 * time.Millisecond

func claim(holder string) backend.LeaderClaim {
	return backend.LeaderClaim{Holder: holder, Address: "http://" + holder + ":7070", Mode: "watch", ConfigHash: "hash-" + holder, Lease: leaderLease}
}

func acquire(t *testing.T, h *Harness, holder string) (backend.Leader, bool) {
	t.Helper()
	l, held, err := h.Leader.AcquireLeader(ctx(t), claim(holder))
	if err != nil {
		t.Fatalf("AcquireLeader(%s): %v", holder, err)
	}
	return l, held
}

// testLeaderLease: a free lease is taken at epoch 1; another holder is
// refused while it is live; renewal keeps the epoch and the acquisition
// time; an expired lease is taken at the next epoch, after which the old
// holder cannot renew; release frees it at once and keeps the epoch.
func testLeaderLease(t *testing.T, h *Harness) {
	c := ctx(t)
	if l, err := h.Leader.ReadLeader(c); err != nil || l != (backend.Leader{}) {
		t.Fatalf("ReadLeader before any acquisition = %+v, %v; want the zero Leader", l, err)
	}
	for _, bad := range []backend.LeaderClaim{{Lease: time.Second}, {Holder: "a"}} {
		if _, _, err := h.Leader.AcquireLeader(c, bad); err == nil {
			t.Errorf("AcquireLeader(%+v) succeeded; want an error (holder and lease are required)", bad)
		}
	}
	a, held := acquire(t, h, "a")
	if !held || a.Epoch != 1 || a.Holder != "a" || a.Address != "http://a:7070" || a.Mode != "watch" || a.ConfigHash != "hash-a" || !a.Live(h.Now()) {
		t.Fatalf("first AcquireLeader = %+v, held %v; want a live lease of a at epoch 1 with its address, mode and hash", a, held)
	}
	if got, err := h.Leader.ReadLeader(c); err != nil || got.Holder != "a" || got.Epoch != 1 || !got.ExpiresAt.Equal(a.ExpiresAt) || !got.AcquiredAt.Equal(a.AcquiredAt) {
		t.Fatalf("ReadLeader = %+v, %v; want %+v", got, err, a)
	}
	if b, held := acquire(t, h, "b"); held || b.Holder != "a" || b.Epoch != 1 {
		t.Fatalf("AcquireLeader(b) while a's lease is live = %+v, held %v; want a's record, not held", b, held)
	}
	h.Advance(leaderLease / 4)
	renewed, held := acquire(t, h, "a")
	if !held || renewed.Epoch != 1 || !renewed.AcquiredAt.Equal(a.AcquiredAt) || !renewed.ExpiresAt.After(a.ExpiresAt) {
		t.Fatalf("renewal = %+v, held %v; want epoch 1, AcquiredAt %v kept, ExpiresAt after %v", renewed, held, a.AcquiredAt, a.ExpiresAt)
	}
	h.Advance(leaderLease + 100*time.Millisecond)
	b, held := acquire(t, h, "b")
	if !held || b.Holder != "b" || b.Epoch != 2 {
		t.Fatalf("AcquireLeader(b) after a's lease expired = %+v, held %v; want b at epoch 2", b, held)
	}
	if got, held := acquire(t, h, "a"); held || got.Holder != "b" {
		t.Fatalf("renewal by a after b took over = %+v, held %v; want refused", got, held)
	}
	if err := h.Leader.ReleaseLeader(c, "b", 1); err != nil {
		t.Fatalf("ReleaseLeader with a stale epoch: %v; want nil and no change", err)
	}
	if err := h.Leader.ReleaseLeader(c, "a", 2); err != nil {
		t.Fatalf("ReleaseLeader by a non-holder: %v; want nil and no change", err)
	}
	if got, _ := h.Leader.ReadLeader(c); got.Holder != "b" || !got.Live(h.Now()) {
		t.Fatalf("after refused releases the record is %+v; want b's live lease", got)
	}
	if err := h.Leader.ReleaseLeader(c, "b", 2); err != nil {
		t.Fatal(err)
	}
	if got, _ := h.Leader.ReadLeader(c); got.Holder != "" || got.Epoch != 2 || got.Live(h.Now()) {
		t.Fatalf("after release the record is %+v; want no holder, epoch 2 kept", got)
	}
	if a, held := acquire(t, h, "a"); !held || a.Epoch != 3 {
		t.Fatalf("AcquireLeader(a) right after the release = %+v, held %v; want a at epoch 3 without waiting", a, held)
	}
}

// testLeaderRace: daemons racing for a free lease, and for an expired one,
// elect exactly one.
func testLeaderRace(t *testing.T, h *Harness) {
	for round := range 2 {
		const n = 8
		var wg sync.WaitGroup
		winners := make(chan backend.Leader, n)
		for i := range n {
			wg.Go(func() {
				l, held, err := h.Leader.AcquireLeader(ctx(t), claim(fmt.Sprintf("r%d-%d", round, i)))
				if err != nil {
					t.Errorf("AcquireLeader: %v", err)
				}
				if held {
					winners <- l
				}
			})
		}
		wg.Wait()
		close(winners)
		var got []backend.Leader
		for l := range winners {
			got = append(got, l)
		}
		if len(got) != 1 || got[0].Epoch != int64(round+1) {
			t.Fatalf("round %d: %d daemons hold the lease (%+v); want exactly one, at epoch %d", round, len(got), got, round+1)
		}
		h.Advance(leaderLease + 100*time.Millisecond)
	}
}

// testFencing is the case a lock lease alone does not cover: leader a
// pauses past its lease (a SIGSTOP, a VM freeze), b takes over, restores
// (nothing held) and grants the only slot of a 1-slot pool; a resumes still
// believing it leads. Its writes through the plain stores succeed, which
// would give the slot twice; through the stores fenced with its epoch they
// fail with backend.ErrFenced and change nothing.
func testFencing(t *testing.T, h *Harness) {
	c := ctx(t)
	if err := h.FencedPools(1).PutLease(c, lease("before", h.Now())); !errors.Is(err, backend.ErrFenced) {
		t.Fatalf("fenced PutLease before any leader: %v; want ErrFenced", err)
	}
	a, _ := acquire(t, h, "a")
	aPools, aGrants := h.FencedPools(a.Epoch), h.FencedGrants(a.Epoch)
	if err := aPools.PutLease(c, lease("held-by-a", h.Now())); err != nil {
		t.Fatalf("PutLease by the leader: %v", err)
	}
	if err := aPools.DeleteLease(c, "held-by-a"); err != nil {
		t.Fatalf("DeleteLease by the leader: %v", err)
	}
	if err := aPools.DeleteLease(c, "never-existed"); err != nil {
		t.Fatalf("DeleteLease of a missing record by the leader: %v; want nil", err)
	}
	h.Advance(leaderLease + 100*time.Millisecond) // a is paused
	b, held := acquire(t, h, "b")
	if !held {
		t.Fatalf("b could not take over an expired lease: %+v", b)
	}
	bPools, bGrants := h.FencedPools(b.Epoch), h.FencedGrants(b.Epoch)
	if n := heldCount(t, h); n != 0 {
		t.Fatalf("b restores %d held slots; want 0", n)
	}
	if err := bPools.PutLease(c, lease("x", h.Now())); err != nil {
		t.Fatalf("the new leader's grant: %v", err)
	}

	// a resumes. A plain lock lease lets its grant through: two holders.
	if err := h.Pools.PutLease(c, lease("y-unfenced", h.Now())); err != nil {
		t.Fatal(err)
	}
	if n := heldCount(t, h); n != 2 {
		t.Fatalf("unfenced: %d records; the demonstration expects the over-grant (2)", n)
	}
	if err := h.Pools.DeleteLease(c, "y-unfenced"); err != nil {
		t.Fatal(err)
	}
	// Fenced, every write of a is refused and changes nothing.
	for what, err := range map[string]error{
		"grant":        aPools.PutLease(c, lease("y", h.Now())),
		"heartbeat":    aPools.PutLease(c, lease("x", h.Now().Add(time.Hour))),
		"release":      aPools.DeleteLease(c, "x"),
		"permit":       aGrants.PutGrant(c, "permit/y", []byte("{}")),
		"grant delete": aGrants.DeleteGrant(c, "permit/x"),
	} {
		if !errors.Is(err, backend.ErrFenced) {
			t.Errorf("stale leader's %s: %v; want ErrFenced", what, err)
		}
	}
	recs, err := h.Pools.LoadLeases(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].LeaseID != "x" || !recs[0].ExpiresAt.Before(h.Now().Add(30*time.Minute)) {
		t.Fatalf("after the stale leader's writes the records are %+v; want only x, as b wrote it", recs)
	}
	if err := bGrants.PutGrant(c, "permit/x", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := aGrants.DeleteGrant(c, "permit/x"); !errors.Is(err, backend.ErrFenced) {
		t.Fatalf("stale leader's delete of the new leader's grant: %v; want ErrFenced", err)
	}
	grants, err := h.Grants.LoadGrants(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := grants["permit/x"]; !ok || len(grants) != 1 {
		t.Fatalf("grant records %q; want only permit/x", grants)
	}
	if err := bGrants.DeleteGrant(c, "permit/x"); err != nil {
		t.Fatalf("the leader's delete of its grant: %v", err)
	}
}

func lease(id string, now time.Time) pools.LeaseRecord {
	return pools.LeaseRecord{LeaseID: id, Pool: "p", TaskID: "t-" + id, Slots: 1, GrantedAt: now, ExpiresAt: now.Add(time.Minute), TTL: time.Minute}
}

func heldCount(t *testing.T, h *Harness) int {
	t.Helper()
	recs, err := h.Pools.LoadLeases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(recs)
}
