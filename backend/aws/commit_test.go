package aws_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/aws"
	"github.com/rpdhq/rpd/backend/backendtest"
	"github.com/rpdhq/rpd/internal/awstest"
	"github.com/rpdhq/rpd/runtime/pools"
)

func openTables(t *testing.T, e awstest.Endpoints) *aws.Backend {
	t.Helper()
	stack := backendtest.RandomName("s")
	b := open(t, e.Options(stack, "t"+stack))
	t.Cleanup(func() { b.Close() })
	if err := b.EnsureTables(context.Background()); err != nil {
		t.Fatal(err)
	}
	return b
}

func leaseRec(id string) pools.LeaseRecord {
	return pools.LeaseRecord{LeaseID: id, Pool: "p", TaskID: "t", Slots: 1,
		GrantedAt: time.Unix(100, 0), ExpiresAt: time.Unix(160, 0), TTL: time.Minute}
}

// Group commit under -race on dynalite: concurrent writers, fenced and
// not, each putting, heartbeating and deleting its own items, and all of
// them writing one shared item (so rounds must split on repeated keys);
// every outcome is nil and the table holds exactly what was left.
func TestGroupCommitConcurrentWriters(t *testing.T) {
	e := awstest.Start(t)
	b := openTables(t, e)
	ctx := context.Background()
	l, _, err := b.AcquireLeader(ctx, backend.LeaderClaim{Holder: "a", Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 12, 16
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			ps, gs := b.PoolStore(), b.GrantStore()
			if w%2 == 1 {
				ps, gs = ps.Fence(l.Epoch), gs.Fence(l.Epoch)
			}
			for i := range each {
				id := fmt.Sprintf("p.w%02d-%02d", w, i)
				err := errors.Join(ps.PutLease(ctx, leaseRec(id)), ps.PutLease(ctx, leaseRec(id)),
					gs.PutGrant(ctx, "g/"+id, []byte(id)), gs.PutGrant(ctx, "shared", []byte(id)))
				if i%2 == 0 {
					err = errors.Join(err, ps.DeleteLease(ctx, id), gs.DeleteGrant(ctx, "g/"+id))
				}
				if err != nil {
					t.Errorf("%s: %v", id, err)
					return
				}
			}
		})
	}
	wg.Wait()
	recs, err := b.PoolStore().LoadLeases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	grants, err := b.GrantStore().LoadGrants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != writers*each/2 || len(grants) != writers*each/2+1 {
		t.Fatalf("%d lease items and %d grants; want %d and %d", len(recs), len(grants), writers*each/2, writers*each/2+1)
	}
	for _, r := range recs {
		var i int
		fmt.Sscanf(r.LeaseID[strings.IndexByte(r.LeaseID, '-')+1:], "%d", &i)
		if i%2 == 0 || string(grants["g/"+r.LeaseID]) != r.LeaseID {
			t.Errorf("item %s: should be deleted, or its grant is %q", r.LeaseID, grants["g/"+r.LeaseID])
		}
	}
	if !strings.HasPrefix(string(grants["shared"]), "p.w") {
		t.Errorf("the shared grant is %q; want one writer's last put", grants["shared"])
	}
}

// takeOverAfter makes daemon "a" leader, writes a lease record id under
// its epoch, and hands the stack to daemon "b": it returns the pool stores
// fenced at a's (stale) and b's (current) epoch.
func takeOverAfter(t *testing.T, b *aws.Backend, id string) (stale, cur *aws.PoolStore) {
	t.Helper()
	ctx := context.Background()
	a, _, err := b.AcquireLeader(ctx, backend.LeaderClaim{Holder: "a", Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	stale = b.PoolStore().Fence(a.Epoch)
	if err := stale.PutLease(ctx, leaseRec(id)); err != nil {
		t.Fatal(err)
	}
	if err := b.ReleaseLeader(ctx, "a", a.Epoch); err != nil {
		t.Fatal(err)
	}
	l, held, err := b.AcquireLeader(ctx, backend.LeaderClaim{Holder: "b", Lease: time.Hour})
	if err != nil || !held || l.Epoch != a.Epoch+1 {
		t.Fatalf("takeover: %+v, %v, %v", l, held, err)
	}
	return stale, b.PoolStore().Fence(l.Epoch)
}

// Fenced writes of a stale and of the current epoch, sent together: the
// round's one leader read refuses every stale one (ErrFenced, its put
// undone) and lets the current ones stand.
func TestGroupCommitFencedWritesShareTheVerdict(t *testing.T) {
	e := awstest.Start(t)
	b := openTables(t, e)
	ctx := context.Background()
	stale, cur := takeOverAfter(t, b, "p.kept")
	const n = 10
	errs := make([]error, 2*n+1)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = cur.PutLease(ctx, leaseRec(fmt.Sprint("p.new", i))) })
		wg.Go(func() { errs[n+i] = stale.PutLease(ctx, leaseRec(fmt.Sprint("p.stale", i))) })
	}
	wg.Go(func() { errs[2*n] = stale.DeleteLease(ctx, "p.kept") })
	wg.Wait()
	for i, err := range errs {
		if i < n && err != nil {
			t.Errorf("current epoch's put %d: %v", i, err)
		}
		if i >= n && (!errors.Is(err, backend.ErrFenced) || !strings.Contains(err.Error(), "stack "+b.Stack())) {
			t.Errorf("stale write %d: %v; want ErrFenced naming the stack", i-n, err)
		}
	}
	recs, err := b.PoolStore().LoadLeases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.LeaseID)
	}
	// p.kept is not asserted: a stale leader's delete of an item no newer
	// leader rewrote lands before the leader read refuses it (as a
	// fenced delete always did; the caller is told ErrFenced).
	if got := strings.Join(ids, ","); strings.Contains(got, "stale") || strings.Count(got, "p.new") != n {
		t.Errorf("items %s; want the %d current puts, no stale one", got, n)
	}
}

// A stale leader's heartbeat (a put over an item it wrote) that lands
// before the takeover is verified after it: the writer is told ErrFenced,
// and the item keeps the longer expiry instead of being deleted, because the
// new leader may have restored it as written; deleting it would drop a held
// lease from the records (a later leader would then grant its slot twice).
func TestFencedHeartbeatIsNotUndone(t *testing.T) {
	e := awstest.Start(t)
	b := openTables(t, e)
	ctx := context.Background()
	stale, _ := takeOverAfter(t, b, "p.held")
	hb := leaseRec("p.held")
	hb.ExpiresAt = hb.ExpiresAt.Add(time.Minute)
	if err := stale.PutLease(ctx, hb); !errors.Is(err, backend.ErrFenced) {
		t.Fatalf("stale heartbeat: %v; want ErrFenced", err)
	}
	recs, err := b.PoolStore().LoadLeases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].LeaseID != "p.held" || recs[0].ExpiresAt.Before(leaseRec("p.held").ExpiresAt) {
		t.Fatalf("records after a fenced heartbeat: %+v; want p.held, its expiry not shortened", recs)
	}
	// A fenced put that created its item is still undone.
	if err := stale.PutLease(ctx, leaseRec("p.new")); !errors.Is(err, backend.ErrFenced) {
		t.Fatalf("stale grant: %v; want ErrFenced", err)
	}
	if recs, _ := b.PoolStore().LoadLeases(ctx); len(recs) != 1 {
		t.Fatalf("a fenced grant's record was left: %+v", recs)
	}
}

func TestGroupCommitAfterClose(t *testing.T) {
	e := awstest.Start(t)
	b := openTables(t, e)
	ctx := context.Background()
	if err := b.PoolStore().PutLease(ctx, leaseRec("p.before")); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := b.PoolStore().PutLease(ctx, leaseRec("p.after")); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("put after Close: %v; want an error saying the backend is closed", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	b2 := open(t, e.Options(b.Stack(), b.TablePrefix()))
	defer b2.Close()
	if err := b2.PoolStore().PutLease(cctx, leaseRec("p.cancelled")); !errors.Is(err, context.Canceled) {
		t.Errorf("put with a done ctx: %v; want context.Canceled", err)
	}
	recs, err := b2.PoolStore().LoadLeases(ctx)
	if err != nil || len(recs) != 1 || recs[0].LeaseID != "p.before" {
		t.Errorf("items %+v, %v; want p.before only", recs, err)
	}
}
