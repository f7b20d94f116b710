package local

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/internal/waitfor"
)

// lazyLeader opens a backend at path, takes the leader lease and returns
// its fenced stores.
func lazyLeader(t *testing.T, path string, clock func() time.Time) (*Backend, *PoolStore, *GrantStore, int64) {
	t.Helper()
	b, err := Open(context.Background(), path, Options{Stack: "s", Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	l, held, err := b.AcquireLeader(context.Background(), backend.LeaderClaim{Holder: "a", Lease: time.Second})
	if err != nil || !held {
		t.Fatalf("AcquireLeader: %+v, %v, %v", l, held, err)
	}
	return b, b.PoolStore().Fence(l.Epoch), b.GrantStore().Fence(l.Epoch), l.Epoch
}

func TestJournalDeleteOnlyBatchIsNotSynced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	ctx := context.Background()
	b, ps, gs, _ := lazyLeader(t, path, nil)
	b.j.paused.Store(true) // no lazy flush: the test looks at each sync
	b.j.noDirect = true    // lazy deletes are a buffered segment's (see TestJournalDirectDeletesAreDurable)
	for _, id := range []string{"l1", "l2"} {
		if err := ps.PutLease(ctx, rec(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := gs.PutGrant(ctx, "permit/1", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	synced := b.j.syncs.Load()
	if b.j.unsynced.Load() != 0 {
		t.Fatal("unsynced bytes after grants")
	}
	if err := ps.DeleteLease(ctx, "l1"); err != nil {
		t.Fatal(err)
	}
	if err := gs.DeleteGrant(ctx, "permit/1"); err != nil {
		t.Fatal(err)
	}
	if n := b.j.syncs.Load() - synced; n != 0 {
		t.Errorf("deletes alone cost %d fdatasyncs; want none", n)
	}
	if b.j.unsynced.Load() == 0 {
		t.Error("the deletes are not marked unsynced")
	}
	// A read sees them at once.
	if got := strings.Join(leaseIDs(t, b), ","); got != "l2" {
		t.Errorf("lease records %s after the delete; want l2", got)
	}
	if grants, err := b.GrantStore().LoadGrants(ctx); err != nil || len(grants) != 0 {
		t.Errorf("grants %q, %v after the delete; want none", grants, err)
	}
	// The next grant's fdatasync syncs them too.
	if err := ps.PutLease(ctx, rec("l3")); err != nil {
		t.Fatal(err)
	}
	if n := b.j.syncs.Load() - synced; n != 1 || b.j.unsynced.Load() != 0 {
		t.Errorf("after a grant: %d fdatasyncs, unsynced %d; want 1 and none", n, b.j.unsynced.Load())
	}
	// Close syncs what is left.
	if err := ps.DeleteLease(ctx, "l2"); err != nil {
		t.Fatal(err)
	}
	if b.j.unsynced.Load() == 0 {
		t.Fatal("the delete is not marked unsynced")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n := b.j.syncs.Load() - synced; n != 2 || b.j.unsynced.Load() != 0 {
		t.Errorf("after Close: %d fdatasyncs, unsynced %d; want 2 and none", n, b.j.unsynced.Load())
	}
	c := openAt(t, path)
	if got := strings.Join(leaseIDs(t, c), ","); got != "l3" {
		t.Errorf("reopened: lease records %s; want l3", got)
	}
}

// On a segment appended with direct I/O and RWF_DSYNC a batch of deletes
// waits for no sync it needs (the count of syncs the grants need does not
// move) but is durable at once: nothing is left for a lazy flush, and no
// delete lies in the disk's cache behind a later grant.
func TestJournalDirectDeletesAreDurable(t *testing.T) {
	b, ps := pausedLeader(t)
	ctx := context.Background()
	if err := ps.PutLease(ctx, rec("l1")); err != nil {
		t.Fatal(err)
	}
	if w := b.j.w; w.d == nil || !w.d.dsync {
		t.Skip("no direct appends with RWF_DSYNC here")
	}
	synced := b.j.syncs.Load()
	if err := ps.DeleteLease(ctx, "l1"); err != nil {
		t.Fatal(err)
	}
	if n := b.j.syncs.Load() - synced; n != 0 || b.j.unsynced.Load() != 0 {
		t.Errorf("a delete: %d syncs counted, unsynced %d; want 0 and none", n, b.j.unsynced.Load())
	}
}

// openAt opens the database at path (stack s).
func openAt(t *testing.T, path string) *Backend {
	t.Helper()
	b, err := Open(context.Background(), path, Options{Stack: "s"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestJournalLazyDeletesAreFlushed(t *testing.T) {
	b, ps, _, _ := lazyLeader(t, filepath.Join(t.TempDir(), "c.db"), nil)
	b.j.noDirect = true // lazy deletes are a buffered segment's
	ctx := context.Background()
	if err := ps.PutLease(ctx, rec("l1")); err != nil {
		t.Fatal(err)
	}
	synced := b.j.syncs.Load()
	if err := ps.DeleteLease(ctx, "l1"); err != nil {
		t.Fatal(err)
	}
	// With no grant after it, the applier syncs it (lazySync).
	waitfor.Until(t, "the applier to sync the lazy delete", func() bool {
		return b.j.unsynced.Load() == 0 && b.j.syncs.Load() == synced+1
	})
	if got := leaseIDs(t, b); len(got) != 0 {
		t.Errorf("lease records %v; want none", got)
	}
}

// A crash image (database, WAL, journal as a kill -9 leaves them) taken
// after a lazy delete and a later grant: both are read back.
func TestJournalLazyDeleteBeforeAGrantSurvivesACrash(t *testing.T) {
	dir := t.TempDir()
	b, ps := pausedLeaderIn(t, dir)
	ctx := context.Background()
	for _, op := range []func() error{
		func() error { return ps.PutLease(ctx, rec("x")) },
		func() error { return ps.PutLease(ctx, rec("y")) },
		func() error { return ps.DeleteLease(ctx, "x") },
		func() error { return ps.PutLease(ctx, rec("z")) },
		func() error { return ps.DeleteLease(ctx, "y") }, // unsynced at the crash
	} {
		if err := op(); err != nil {
			t.Fatal(err)
		}
	}
	img := filepath.Join(dir, "img.db")
	CopyCrashImage(t, b, img)
	c := openAt(t, img)
	if got := strings.Join(leaseIDs(t, c), ","); got != "z" {
		t.Errorf("after the crash: lease records %s; want z", got)
	}
}

// A stale leader's delete is answered ErrFenced and never read, whether
// its segment's seal is still pending (the stale writer fixes it) or was
// fixed by the new leader's read (the delete lies past it).
func TestJournalLazyDeletePastASeal(t *testing.T) {
	for _, sealedBy := range []string{"the stale writer", "the new leader's read"} {
		t.Run(sealedBy, func(t *testing.T) {
			now := time.Unix(1000, 0)
			var mu sync.Mutex
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			path := filepath.Join(t.TempDir(), "c.db")
			ctx := context.Background()
			a, staleP, _, epoch := lazyLeader(t, path, clock)
			for _, id := range []string{"x", "y"} {
				if err := staleP.PutLease(ctx, rec(id)); err != nil {
					t.Fatal(err)
				}
			}
			// The new leader, in another handle of the file (as another
			// process would).
			nb, err := Open(ctx, path, Options{Stack: "s", Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { nb.Close() })
			mu.Lock()
			now = now.Add(2 * time.Second)
			mu.Unlock()
			l, held, err := nb.AcquireLeader(ctx, backend.LeaderClaim{Holder: "b", Lease: time.Minute})
			if err != nil || !held || l.Epoch != epoch+1 {
				t.Fatalf("takeover: %+v, %v, %v", l, held, err)
			}
			if sealedBy != "the stale writer" {
				if got := strings.Join(leaseIDs(t, nb), ","); got != "x,y" {
					t.Fatalf("the new leader reads %s; want x,y", got)
				}
			}
			if err := staleP.DeleteLease(ctx, "x"); !errors.Is(err, backend.ErrFenced) {
				t.Errorf("stale delete: %v; want ErrFenced", err)
			}
			if err := staleP.PutLease(ctx, rec("w")); !errors.Is(err, backend.ErrFenced) {
				t.Errorf("stale grant after it: %v; want ErrFenced", err)
			}
			for name, h := range map[string]*Backend{"new leader": nb, "stale handle": a} {
				if got := strings.Join(leaseIDs(t, h), ","); got != "x,y" {
					t.Errorf("the %s reads %s; want x,y", name, got)
				}
			}
			if err := ApplyJournal(nb, 4); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(leaseIDs(t, nb), ","); got != "x,y" {
				t.Errorf("applied: the new leader reads %s; want x,y", got)
			}
		})
	}
}

// The applier deletes the records whose last write is a delete, in one
// statement per table, and only those; an ID that is not valid UTF-8 (which
// JSON would not carry intact) is deleted on its own.
func TestJournalApplyDeletes(t *testing.T) {
	b, ps, gs, _ := lazyLeader(t, filepath.Join(t.TempDir(), "c.db"), nil)
	b.j.paused.Store(true)
	ctx := context.Background()
	odd := "l\xff"
	for _, id := range []string{"a", "b", "c", odd} {
		if err := ps.PutLease(ctx, rec(id)); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"g1", "g2", "g\"3"} {
		if err := gs.PutGrant(ctx, id, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	if err := ApplyJournal(b, 2); err != nil {
		t.Fatal(err)
	}
	for _, op := range []func() error{
		func() error { return ps.DeleteLease(ctx, "a") },
		func() error { return ps.DeleteLease(ctx, odd) },
		func() error { return ps.PutLease(ctx, rec("d")) },
		func() error { return ps.DeleteLease(ctx, "d") }, // granted and released between applies
		func() error { return ps.DeleteLease(ctx, "b") },
		func() error { return ps.PutLease(ctx, rec("b")) }, // the last write wins
		func() error { return ps.DeleteLease(ctx, "never") },
		func() error { return gs.DeleteGrant(ctx, "g\"3") },
		func() error { return gs.DeleteGrant(ctx, "g1") },
		func() error { return gs.DeleteGrant(ctx, "c") }, // a grant's ID, not the lease's
	} {
		if err := op(); err != nil {
			t.Fatal(err)
		}
	}
	if err := ApplyJournal(b, 2); err != nil {
		t.Fatal(err)
	}
	if b.journalPending() {
		t.Fatal("records left to apply")
	}
	if got := leaseRows(t, b); got != "b,c" {
		t.Errorf("pool_leases rows %q; want b,c", got)
	}
	if got := column(t, b, `SELECT id FROM grants WHERE stack = ? ORDER BY id`); got != "g2" {
		t.Errorf("grants rows %q; want g2", got)
	}
}

// A queued delete (a release's) waits for the next grant to share its
// append: no write of its own, and it is durable with the grant.
func TestQueuedDeleteSharesTheNextGrantsAppend(t *testing.T) {
	old := deferDeletes
	deferDeletes = time.Hour // only a grant (or Close) writes it
	t.Cleanup(func() { deferDeletes = old })
	path := filepath.Join(t.TempDir(), "c.db")
	ctx := context.Background()
	b, ps, _, _ := lazyLeader(t, path, nil)
	if err := ps.PutLease(ctx, rec("l1")); err != nil {
		t.Fatal(err)
	}
	end, synced := JournalEnd(b), b.j.syncs.Load()
	deleted := make(chan error, 1)
	ps.QueueDeleteLease("l1", func(err error) { deleted <- err })
	if b.records.Queued() != 1 || JournalEnd(b) != end {
		t.Fatalf("queued delete: %d queued, journal end %d -> %d; want it queued, nothing appended", b.records.Queued(), end, JournalEnd(b))
	}
	if err := ps.PutLease(ctx, rec("l2")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-deleted:
		if err != nil {
			t.Fatalf("the queued delete: %v", err)
		}
	default:
		t.Fatal("the grant's append returned before the delete queued ahead of it was written")
	}
	if n := b.j.syncs.Load() - synced; n != 1 {
		t.Fatalf("a delete and a grant cost %d synced appends; want the grant's one", n)
	}
	if got := leaseIDs(t, b); strings.Join(got, ",") != "l2" {
		t.Fatalf("leases %v; want l2 (l1 released)", got)
	}
	// A reopen reads the same from the journal.
	b.Close()
	b2, err := Open(ctx, path, Options{Stack: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	if got := leaseIDs(t, b2); strings.Join(got, ",") != "l2" {
		t.Fatalf("after a reopen: leases %v; want l2", got)
	}
}

// PrepareJournal opens the leader's segment before its first grant, once;
// an epoch that does not lead is fenced.
func TestPrepareJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	ctx := context.Background()
	b, ps, _, epoch := lazyLeader(t, path, nil)
	name := JournalSegment(path, "s", epoch, 0)
	if _, err := os.Stat(name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a segment before any write or PrepareJournal: %v", err)
	}
	for range 2 {
		if err := b.PrepareJournal(ctx, epoch); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(name)
		if err != nil || fi.Size() != firstSegmentSize {
			t.Fatalf("after PrepareJournal: %v, %v; want the segment preallocated (%d bytes)", fi, err, firstSegmentSize)
		}
		if JournalEnd(b) != headerSize {
			t.Fatalf("journal end %d; want %d (no record)", JournalEnd(b), headerSize)
		}
	}
	if err := ps.PutLease(ctx, rec("l1")); err != nil {
		t.Fatal(err)
	}
	if own := b.j.own; own != (segKey{epoch, 0}) {
		t.Fatalf("the grant went to segment %+v; want the prepared %d.0", own, epoch)
	}
	if err := b.PrepareJournal(ctx, epoch+1); !errors.Is(err, backend.ErrFenced) {
		t.Fatalf("PrepareJournal of epoch %d, which does not lead: %v; want ErrFenced", epoch+1, err)
	}
	if got := leaseIDs(t, b); strings.Join(got, ",") != "l1" {
		t.Fatalf("leases %v; want l1", got)
	}
}
