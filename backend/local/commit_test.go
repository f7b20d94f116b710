package local

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/internal/waitfor"
	"github.com/rpdhq/rpd/runtime/pickup"
	"github.com/rpdhq/rpd/runtime/pools"
)

func openCommitTest(t *testing.T, clock func() time.Time) *Backend {
	t.Helper()
	b, err := Open(context.Background(), filepath.Join(t.TempDir(), "c.db"), Options{Stack: "s", Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// holdWriter takes the only write connection, so that the committer's next
// transaction waits in BEGIN; the returned func gives it back.
func holdWriter(t *testing.T, b *Backend) func() {
	t.Helper()
	conn, err := b.wdb.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release := func() { once.Do(func() { conn.Close() }) }
	t.Cleanup(release)
	return release
}

// waitQueued waits (bounded) until n writes are queued behind the one the
// committer took.
func waitQueued(t *testing.T, b *Backend, n int) {
	t.Helper()
	waitfor.Within(t, 10*time.Second, fmt.Sprintf("the committer to have %d writes queued", n), func() bool { return b.records.Queued() == n })
}

func rec(id string) pools.LeaseRecord {
	return pools.LeaseRecord{LeaseID: id, Pool: "p", TaskID: "t-" + id, Slots: 1,
		GrantedAt: time.Unix(100, 0), ExpiresAt: time.Unix(160, 0), TTL: time.Minute}
}

// leaseIDs returns the IDs of the lease records a reader sees (LoadLeases);
// t is a *testing.T or a rapid.T.
func leaseIDs(t interface {
	Helper()
	Fatal(...any)
}, b *Backend) []string {
	t.Helper()
	recs, err := b.PoolStore().LoadLeases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.LeaseID)
	}
	return ids
}

// blockCommitter holds the write connection and queues a write of the
// record "first", which the committer takes and then waits with in BEGIN:
// writes queued after it form the next batch. release gives the
// connection back; first then yields the first write's outcome.
func blockCommitter(t *testing.T, b *Backend) (release func(), first <-chan error) {
	t.Helper()
	release = holdWriter(t, b)
	waits := b.wdb.Stats().WaitCount
	ch := make(chan error, 1)
	go func() { ch <- b.PoolStore().PutLease(context.Background(), rec("first")) }()
	for i := 0; b.wdb.Stats().WaitCount == waits; i++ {
		if i == 2000 {
			t.Fatal("the committer never waited for the write connection")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return release, ch
}

// inOneBatch runs each fn (a write) in its own goroutine, each queued before
// the next starts, behind a write that holds the committer, so that they
// share one transaction; it returns their outcomes.
func inOneBatch(t *testing.T, b *Backend, fns ...func() error) []error {
	t.Helper()
	release, first := blockCommitter(t, b)
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() { errs[i] = fn() })
		waitQueued(t, b, i+1)
	}
	release()
	if err := <-first; err != nil {
		t.Fatalf("the first write: %v", err)
	}
	wg.Wait()
	return errs
}

func TestGroupCommitBatchKeepsOrderAndOutcomes(t *testing.T) {
	b := openCommitTest(t, nil)
	ctx := context.Background()
	ps, gs := b.PoolStore(), b.GrantStore()
	if err := ps.PutLease(ctx, rec("gone")); err != nil {
		t.Fatal(err)
	}
	errs := inOneBatch(t, b,
		func() error { return ps.PutLease(ctx, rec("a")) },
		func() error { return gs.PutGrant(ctx, "permit/x", []byte(`{"permit":{}}`)) },
		func() error { return ps.DeleteLease(ctx, "gone") },
		func() error { return ps.PutLease(ctx, rec("b")) },
		func() error { return ps.DeleteLease(ctx, "b") }, // after its put, in order
		func() error { return ps.DeleteLease(ctx, "never-written") },
	)
	for i, err := range errs {
		if err != nil {
			t.Errorf("write %d: %v", i, err)
		}
	}
	if got, want := strings.Join(leaseIDs(t, b), ","), "a,first"; got != want {
		t.Errorf("lease records %s; want %s", got, want)
	}
	grants, err := gs.LoadGrants(ctx)
	if err != nil || string(grants["permit/x"]) != `{"permit":{}}` {
		t.Errorf("grants %q, %v; want permit/x", grants, err)
	}
}

// A record whose statement fails fails only its own caller: the batch is
// retried one write at a time.
func TestGroupCommitFailingRecordFailsOnlyItsCaller(t *testing.T) {
	b := openCommitTest(t, nil)
	ctx := context.Background()
	if _, err := b.wdb.ExecContext(ctx, `CREATE TRIGGER refuse_bad BEFORE INSERT ON pool_leases WHEN NEW.lease_id = 'bad'
		BEGIN SELECT RAISE(ABORT, 'refused by the test trigger'); END`); err != nil {
		t.Fatal(err)
	}
	ps := b.PoolStore()
	errs := inOneBatch(t, b,
		func() error { return ps.PutLease(ctx, rec("good1")) },
		func() error { return ps.PutLease(ctx, rec("bad")) },
		func() error { return ps.PutLease(ctx, rec("good2")) },
	)
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("the good writes failed: %v, %v", errs[0], errs[2])
	}
	if err := errs[1]; err == nil || !strings.Contains(err.Error(), "put pool lease bad of stack s") || !strings.Contains(err.Error(), "refused by the test trigger") {
		t.Errorf("the bad write: %v; want its own statement's error naming it", err)
	}
	if got, want := strings.Join(leaseIDs(t, b), ","), "first,good1,good2"; got != want {
		t.Errorf("lease records %s; want %s", got, want)
	}
}

// A failing disk (here: every statement refused) fails every caller of the batch
// with an error that names its record.
func TestGroupCommitEveryWriteFailingFailsEachCaller(t *testing.T) {
	b := openCommitTest(t, nil)
	ctx := context.Background()
	if _, err := b.wdb.ExecContext(ctx, `CREATE TRIGGER refuse_all BEFORE INSERT ON pool_leases WHEN NEW.lease_id != 'first'
		BEGIN SELECT RAISE(ABORT, 'disk says no'); END`); err != nil {
		t.Fatal(err)
	}
	ps := b.PoolStore()
	errs := inOneBatch(t, b,
		func() error { return ps.PutLease(ctx, rec("x")) },
		func() error { return ps.PutLease(ctx, rec("y")) },
	)
	for i, id := range []string{"x", "y"} {
		if err := errs[i]; err == nil || !strings.Contains(err.Error(), "put pool lease "+id+" ") || !strings.Contains(err.Error(), "disk says no") {
			t.Errorf("write %s: %v; want its failure, naming it", id, err)
		}
	}
}

// Fenced writes of a stale epoch in a batch fail with backend.ErrFenced and
// write nothing; the current epoch's writes beside them commit.
func TestGroupCommitFencingInsideABatch(t *testing.T) {
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	b := openCommitTest(t, clock)
	ctx := context.Background()
	a, _, err := b.AcquireLeader(ctx, backend.LeaderClaim{Holder: "a", Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	staleP, staleG := b.PoolStore().Fence(a.Epoch), b.GrantStore().Fence(a.Epoch)
	if err := staleP.PutLease(ctx, rec("kept")); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	l, held, err := b.AcquireLeader(ctx, backend.LeaderClaim{Holder: "b", Lease: time.Minute})
	if err != nil || !held || l.Epoch != a.Epoch+1 {
		t.Fatalf("takeover: %+v, %v, %v", l, held, err)
	}
	curP, curG := b.PoolStore().Fence(l.Epoch), b.GrantStore().Fence(l.Epoch)
	errs := inOneBatch(t, b,
		func() error { return curP.PutLease(ctx, rec("new")) },
		func() error { return staleP.PutLease(ctx, rec("stale")) },
		func() error { return staleP.DeleteLease(ctx, "kept") },
		func() error { return staleG.PutGrant(ctx, "permit/stale", []byte("{}")) },
		func() error { return curG.PutGrant(ctx, "permit/new", []byte("{}")) },
		func() error { return curP.DeleteLease(ctx, "missing") },
	)
	for _, i := range []int{0, 4, 5} {
		if errs[i] != nil {
			t.Errorf("current epoch's write %d: %v", i, errs[i])
		}
	}
	for _, i := range []int{1, 2, 3} {
		if !errors.Is(errs[i], backend.ErrFenced) || !strings.Contains(errs[i].Error(), fmt.Sprintf("leader epoch %d, the stack's is %d", a.Epoch, l.Epoch)) {
			t.Errorf("stale write %d: %v; want ErrFenced naming both epochs", i, errs[i])
		}
	}
	if got, want := strings.Join(leaseIDs(t, b), ","), "first,kept,new"; got != want {
		t.Errorf("lease records %s; want %s", got, want)
	}
	grants, err := b.GrantStore().LoadGrants(ctx)
	if _, stale := grants["permit/stale"]; err != nil || stale || grants["permit/new"] == nil {
		t.Errorf("grants %q, %v; want permit/new only", grants, err)
	}
}

func TestGroupCommitCancelledWriteIsNotWritten(t *testing.T) {
	b := openCommitTest(t, nil)
	ps := b.PoolStore()
	release, first := blockCommitter(t, b)
	cctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan error, 1)
	go func() { cancelled <- ps.PutLease(cctx, rec("cancelled")) }()
	waitQueued(t, b, 1)
	cancel() // before the committer takes it
	if err := <-cancelled; !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "put pool lease cancelled of stack s") || !strings.Contains(err.Error(), "not written") {
		t.Errorf("cancelled write: %v; want context.Canceled, naming it, not written", err)
	}
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := ps.PutLease(cctx, rec("late")); !errors.Is(err, context.Canceled) {
		t.Errorf("write with a done ctx: %v; want context.Canceled", err)
	}
	// The committer skipped the abandoned write and still serves.
	if err := ps.PutLease(context.Background(), rec("after")); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(leaseIDs(t, b), ","), "after,first"; got != want {
		t.Errorf("lease records %s; want %s", got, want)
	}
}

func TestGroupCommitCloseWritesQueuedThenRefuses(t *testing.T) {
	b := openCommitTest(t, nil)
	ctx := context.Background()
	ps := b.PoolStore()
	release, first := blockCommitter(t, b)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() { errs[i] = ps.PutLease(ctx, rec(fmt.Sprint("q", i))) })
	}
	waitQueued(t, b, 2)
	closed := make(chan struct{})
	go func() { b.records.Close(); close(closed) }()
	release()
	<-closed
	wg.Wait()
	for i, err := range append(errs, <-first) {
		if err != nil {
			t.Errorf("queued write %d: %v", i, err)
		}
	}
	if err := ps.PutLease(ctx, rec("after")); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("write after close: %v; want an error saying the backend is closed", err)
	}
	var n int
	if err := b.rdb.QueryRowContext(ctx, `SELECT count(*) FROM pool_leases`).Scan(&n); err != nil || n != 3 {
		t.Errorf("%d records, %v; want the 3 queued before close", n, err)
	}
}

// Under -race: concurrent writers through both stores, fenced and not, each
// putting, heartbeating and deleting its own records; every outcome is nil
// and the file holds exactly the records left undeleted.
func TestGroupCommitConcurrentWriters(t *testing.T) {
	b := openCommitTest(t, nil)
	ctx := context.Background()
	l, _, err := b.AcquireLeader(ctx, backend.LeaderClaim{Holder: "a", Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 16, 60
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			ps, gs := b.PoolStore(), b.GrantStore()
			if w%2 == 1 {
				ps, gs = ps.Fence(l.Epoch), gs.Fence(l.Epoch)
			}
			for i := range each {
				id := fmt.Sprintf("w%02d-%03d", w, i)
				for _, err := range []error{ps.PutLease(ctx, rec(id)), ps.PutLease(ctx, rec(id)), gs.PutGrant(ctx, "g/"+id, []byte(id))} {
					if err != nil {
						t.Errorf("%s: %v", id, err)
						return
					}
				}
				if i%2 == 0 {
					if err := errors.Join(ps.DeleteLease(ctx, id), gs.DeleteGrant(ctx, "g/"+id)); err != nil {
						t.Errorf("%s: %v", id, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	ids := leaseIDs(t, b)
	grants, err := b.GrantStore().LoadGrants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != writers*each/2 || len(grants) != writers*each/2 {
		t.Fatalf("%d lease records and %d grants; want %d of each", len(ids), len(grants), writers*each/2)
	}
	for _, id := range ids {
		var i int
		fmt.Sscanf(id[strings.IndexByte(id, '-')+1:], "%d", &i)
		if i%2 == 0 || string(grants["g/"+id]) != id {
			t.Errorf("record %s: should be deleted, or its grant is %q", id, grants["g/"+id])
		}
	}
}

// Grant records commit with synchronous=FULL, every other write with
// NORMAL. Triggers read the connection's level (pragma_synchronous) at the
// moment of each write and refuse the wrong one.
func TestGrantCommitsAreFullySynced(t *testing.T) {
	b := openCommitTest(t, nil)
	ctx := context.Background()
	for _, q := range []string{
		`CREATE TRIGGER lease_full BEFORE INSERT ON pool_leases WHEN (SELECT synchronous FROM pragma_synchronous) != 2
		 BEGIN SELECT RAISE(ABORT, 'pool lease written without synchronous=FULL'); END`,
		`CREATE TRIGGER grant_full BEFORE INSERT ON grants WHEN (SELECT synchronous FROM pragma_synchronous) != 2
		 BEGIN SELECT RAISE(ABORT, 'grant written without synchronous=FULL'); END`,
		`CREATE TRIGGER instance_normal BEFORE INSERT ON instances WHEN (SELECT synchronous FROM pragma_synchronous) != 1
		 BEGIN SELECT RAISE(ABORT, 'instance written without synchronous=NORMAL'); END`,
	} {
		if _, err := b.wdb.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.PoolStore().PutLease(ctx, rec("durable")); err != nil {
		t.Fatalf("pool lease: %v", err)
	}
	if err := b.GrantStore().PutGrant(ctx, "permit/durable", []byte(`{}`)); err != nil {
		t.Fatalf("grant: %v", err)
	}
	in := pickup.Instance{ID: "i-1", Class: "c", State: pickup.StateIdle, Threshold: time.Now().Add(time.Hour)}
	if err := b.Instances().Put(ctx, in); err != nil {
		t.Fatalf("instance after grant commits: %v", err)
	}
}
