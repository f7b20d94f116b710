package local

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rpdhq/rpd/backend"
)

// pendingCreated reports whether b's pending record of kind for id is
// flagged created (false when there is none).
func pendingCreated(b *Backend, kind byte, id string) (created, found bool) {
	b.j.mu.Lock()
	defer b.j.mu.Unlock()
	for _, p := range b.j.pending {
		if p.rec.kind == kind && p.rec.id == id {
			return p.rec.created, true
		}
	}
	return false, false
}

// checkCrashImage copies b's files as a crash leaves them and checks that
// a reader of the copy sees the leases want, and that a new leader that
// applies the crashed leader's segment has exactly them as rows.
func checkCrashImage(t *testing.T, b *Backend, dir string, want ...string) {
	t.Helper()
	ctx := context.Background()
	img := filepath.Join(dir, "img.db")
	CopyCrashImage(t, b, img)
	later := func() time.Time { return time.Now().Add(time.Hour) } // b's leader lease has run out
	c, err := Open(ctx, img, Options{Stack: "s", Clock: later})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := leaseIDs(t, c); !slices.Equal(got, want) {
		t.Fatalf("after the crash a reader sees %v; want %v", got, want)
	}
	if _, held, err := c.AcquireLeader(ctx, backend.LeaderClaim{Holder: "b", Lease: time.Second}); err != nil || !held {
		t.Fatalf("AcquireLeader after the crash: %v, %v", held, err)
	}
	PauseApplier(c)
	if err := ApplyJournal(c, 3); err != nil {
		t.Fatal(err)
	}
	if got := leaseRows(t, c); got != strings.Join(want, ",") {
		t.Fatalf("rows %q after applying the crashed leader's segment; want %s", got, strings.Join(want, ","))
	}
}

// The applier's own applies hold the records confirmed since the last one
// as a look-ahead: a lease created before an apply and deleted after it
// is never written to SQLite, its delete is flagged so that the next
// apply elides it too, and a reader (the tables plus the journal past the
// applied offset) and a crash image both see it deleted.
func TestJournalLookAheadLeavesOutALeaseDeletedLater(t *testing.T) {
	dir := t.TempDir()
	b, ps := pausedLeaderIn(t, dir)
	ctx := context.Background()
	run(t,
		func() error { return ps.CreateLease(ctx, rec("brief")) },
		func() error { return ps.CreateLease(ctx, rec("kept")) },
	)
	// The first apply finds nothing confirmed before a previous one.
	if err := b.applyHeld(ctx); err != nil {
		t.Fatal(err)
	}
	if got := leaseRows(t, b); got != "" {
		t.Fatalf("rows %q after the first held apply; want none (all held)", got)
	}
	run(t,
		func() error { return ps.DeleteLease(ctx, "brief") },
		func() error { return ps.CreateLease(ctx, rec("late")) }, // syncs the lazy delete
	)
	if err := b.applyHeld(ctx); err != nil {
		t.Fatal(err)
	}
	if got := leaseRows(t, b); got != "kept" {
		t.Fatalf("rows %q after the second held apply; want kept (brief is deleted in the look-ahead)", got)
	}
	if created, found := pendingCreated(b, kindDeleteLease, "brief"); !found || !created {
		t.Fatalf("brief's delete: pending %v, flagged created %v; want pending and flagged", found, created)
	}
	if created, _ := pendingCreated(b, kindPutLease, "late"); !created {
		t.Fatal("late's create lost its created flag")
	}
	if got := leaseIDs(t, b); !slices.Equal(got, []string{"kept", "late"}) {
		t.Fatalf("a reader sees %v; want [kept late]", got)
	}

	// A crash now: the applied offset is past brief's create, which is in
	// no table; the journal after it deletes brief.
	checkCrashImage(t, b, dir, "kept", "late")

	// The next held apply takes the flagged delete: nothing to write for
	// brief, late put.
	if err := b.applyHeld(ctx); err != nil {
		t.Fatal(err)
	}
	if got := leaseRows(t, b); got != "kept,late" {
		t.Fatalf("rows %q after the third held apply; want kept,late", got)
	}
	if b.journalPending() {
		t.Fatal("records left pending after two applies with nothing new")
	}
}

// A lease created before an apply and put again (a heartbeat) after it,
// never deleted, is written; one whose last record in the look-ahead is a
// put after its delete (a restore's put of the same ID) is written too.
func TestJournalLookAheadWritesLeasesNotDeleted(t *testing.T) {
	b, ps := pausedLeader(t)
	ctx := context.Background()
	run(t,
		func() error { return ps.CreateLease(ctx, rec("hb")) },
		func() error { return ps.CreateLease(ctx, rec("again")) },
		func() error { return b.applyHeld(ctx) }, // sets the hold
		func() error { return ps.PutLease(ctx, rec("hb")) },
		func() error { return ps.DeleteLease(ctx, "again") },
		func() error { return ps.PutLease(ctx, rec("again")) },
		func() error { return b.applyHeld(ctx) },
	)
	if got := leaseRows(t, b); got != "again,hb" {
		t.Fatalf("rows %q; want again,hb", got)
	}
	if created, _ := pendingCreated(b, kindPutLease, "hb"); created {
		t.Fatal("hb's heartbeat flagged created: its row exists")
	}
	if err := ApplyJournal(b, 2); err != nil {
		t.Fatal(err)
	}
	if got := leaseRows(t, b); got != "again,hb" {
		t.Fatalf("rows %q after applying the rest; want again,hb", got)
	}
}

// TestJournalLookAheadMatchesModel drives a leader's pool store with random
// creates, heartbeats and deletes between random applies (held, as the
// applier's, or all pending, as a drain's) and checks that a reader sees
// the model after every step, that a crash image at the end holds it, and
// that the tables hold it once everything is applied.
func TestJournalLookAheadMatchesModel(t *testing.T) {
	dir := t.TempDir()
	runs := 0
	rapid.Check(t, func(rt *rapid.T) {
		runs++
		ctx := context.Background()
		path := filepath.Join(dir, fmt.Sprintf("m%d.db", runs))
		b, err := Open(ctx, path, Options{Stack: "s"})
		if err != nil {
			rt.Fatal(err)
		}
		defer b.Close()
		l, held, err := b.AcquireLeader(ctx, backend.LeaderClaim{Holder: "a", Lease: time.Minute})
		if err != nil || !held {
			rt.Fatalf("AcquireLeader: %v, %v", held, err)
		}
		b.j.paused.Store(true)
		ps := b.PoolStore().Fence(l.Epoch)
		model := map[string]bool{}
		next := 0
		live := func() []string {
			var ids []string
			for id := range model {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			return ids
		}
		steps := rapid.IntRange(1, 40).Draw(rt, "steps")
		for range steps {
			ids := live()
			op := rapid.IntRange(0, 5).Draw(rt, "op")
			switch {
			case op <= 1 || len(ids) == 0:
				next++
				id := fmt.Sprintf("l%03d", next)
				if err := ps.CreateLease(ctx, rec(id)); err != nil {
					rt.Fatal(err)
				}
				model[id] = true
			case op == 2:
				id := rapid.SampledFrom(ids).Draw(rt, "heartbeat")
				if err := ps.PutLease(ctx, rec(id)); err != nil {
					rt.Fatal(err)
				}
			case op == 3:
				id := rapid.SampledFrom(ids).Draw(rt, "delete")
				if err := ps.DeleteLease(ctx, id); err != nil {
					rt.Fatal(err)
				}
				delete(model, id)
			case op == 4:
				if err := b.applyHeld(ctx); err != nil {
					rt.Fatal(err)
				}
			default:
				if err := b.applyJournal(ctx); err != nil {
					rt.Fatal(err)
				}
			}
			if got, want := leaseIDs(rt, b), live(); !slices.Equal(got, want) {
				rt.Fatalf("a reader sees %v; the model %v", got, want)
			}
		}
		// Confirm the lazy deletes (a synced write), then crash.
		next++
		marker := fmt.Sprintf("l%03d", next)
		if err := ps.CreateLease(ctx, rec(marker)); err != nil {
			rt.Fatal(err)
		}
		model[marker] = true
		want := strings.Join(live(), ",")
		img := filepath.Join(dir, fmt.Sprintf("m%d-img.db", runs))
		CopyCrashImage(t, b, img)
		later := func() time.Time { return time.Now().Add(time.Hour) }
		c, err := Open(ctx, img, Options{Stack: "s", Clock: later})
		if err != nil {
			rt.Fatal(err)
		}
		defer c.Close()
		if _, held, err := c.AcquireLeader(ctx, backend.LeaderClaim{Holder: "b", Lease: time.Second}); err != nil || !held {
			rt.Fatalf("AcquireLeader after the crash: %v, %v", held, err)
		}
		if err := c.drainJournal(ctx); err != nil {
			rt.Fatal(err)
		}
		if err := c.applyJournal(ctx); err != nil {
			rt.Fatal(err)
		}
		if got := leaseRows(t, c); got != want {
			rt.Fatalf("rows %q after the crash and a full apply; the model %q", got, want)
		}
		if err := b.drainJournal(ctx); err != nil {
			rt.Fatal(err)
		}
		if got := leaseRows(t, b); got != want {
			rt.Fatalf("rows %q after draining; the model %q", got, want)
		}
	})
}

// appliedOffset is the applied offset of b's own journal segment in SQLite.
func appliedOffset(t *testing.T, b *Backend) int64 {
	t.Helper()
	var n int64
	err := b.rdb.QueryRowContext(context.Background(), `SELECT applied FROM journals WHERE stack = ? AND epoch = ? AND seq = ?`,
		"s", b.j.own.epoch, b.j.own.seq).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// An apply whose records would write nothing (every lease in them created
// and deleted, there or in the look-ahead) runs no transaction: the
// applied offset stays behind them, a reader and a crash image still see
// the journal's state, and the next transaction records the offset past
// them with its own records.
func TestJournalApplyWithNothingToWriteSkipsTheTransaction(t *testing.T) {
	dir := t.TempDir()
	b, ps := pausedLeaderIn(t, dir)
	ctx := context.Background()
	run(t,
		func() error { return ps.CreateLease(ctx, rec("a")) },
		func() error { return b.applyHeld(ctx) }, // sets the hold
		func() error { return b.applyHeld(ctx) }, // writes a
	)
	if got := leaseRows(t, b); got != "a" {
		t.Fatalf("rows %q; want a", got)
	}
	before := appliedOffset(t, b)
	run(t,
		func() error { return ps.CreateLease(ctx, rec("c")) },
		func() error { return ps.DeleteLease(ctx, "c") },
		func() error { return ps.CreateLease(ctx, rec("e")) }, // syncs c's delete
		func() error { return b.applyHeld(ctx) },              // all newer than the hold: nothing
		func() error { return ps.DeleteLease(ctx, "e") },
		func() error { return ps.CreateLease(ctx, rec("f")) }, // syncs e's delete
		func() error { return b.applyHeld(ctx) },              // c elided, e deleted in the look-ahead
	)
	if got := appliedOffset(t, b); got != before {
		t.Fatalf("applied offset %d after an apply with nothing to write; want %d (no transaction)", got, before)
	}
	if got := leaseRows(t, b); got != "a" {
		t.Fatalf("rows %q; want a", got)
	}
	if got := leaseIDs(t, b); !slices.Equal(got, []string{"a", "f"}) {
		t.Fatalf("a reader sees %v; want [a f]", got)
	}
	checkCrashImage(t, b, dir, "a", "f")

	if err := b.applyHeld(ctx); err != nil { // f: a transaction, from memory
		t.Fatal(err)
	}
	if got := leaseRows(t, b); got != "a,f" {
		t.Fatalf("rows %q; want a,f", got)
	}
	if got, want := appliedOffset(t, b), JournalEnd(b); got != want {
		t.Fatalf("applied offset %d after the next transaction; want the journal's end %d", got, want)
	}
	if b.journalPending() {
		t.Fatal("records left pending")
	}
}

// leaderWithLongLease is a leader (applier paused, buffered appends) whose
// lease a is applied and whose lease y is created, then pairs leases
// created and deleted, then y deleted and b created (which syncs y's
// delete); nothing after a is applied.
func leaderWithLongLease(t *testing.T, pairs int) (*Backend, *PoolStore) {
	t.Helper()
	b, ps := pausedLeader(t)
	b.j.noDirect = true
	ctx := context.Background()
	run(t,
		func() error { return ps.CreateLease(ctx, rec("a")) },
		func() error { return b.applyHeld(ctx) },
		func() error { return b.applyHeld(ctx) },
		func() error { return ps.CreateLease(ctx, rec("y")) },
	)
	for i := range pairs {
		id := fmt.Sprintf("p%04d", i)
		run(t,
			func() error { return ps.CreateLease(ctx, rec(id)) },
			func() error { return ps.DeleteLease(ctx, id) },
		)
	}
	run(t,
		func() error { return ps.DeleteLease(ctx, "y") },
		func() error { return ps.CreateLease(ctx, rec("b")) },
	)
	return b, ps
}

// A lag of skipped applies longer than one transaction, caught up from
// the segment file (an idle tick's apply finds SQLite's offset behind)
// and interrupted by new records: the file path writes the creates the
// look-ahead left out, so the lag and the marks end there, and the
// records after are applied, not jumped over (a review found the jump:
// a released lease came back as a row nothing after the offset deletes).
func TestJournalLagCaughtUpFromTheFileIsNotJumped(t *testing.T) {
	// The lag spans two skips, over maxApply records.
	b, ps := leaderWithLongLease(t, maxApply/2+76)
	ctx := context.Background()
	run(t, func() error { return ps.DeleteLease(ctx, "b") })
	before := appliedOffset(t, b)
	for range 3 { // the hold, then two skips
		if err := b.applyHeld(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := appliedOffset(t, b); got != before || !b.journalPending() {
		t.Fatalf("applied offset %d (before %d), pending %v: want the skips' lag to stand", got, before, b.journalPending())
	}
	// Lose the lag as a failure would (SQLite's offset unknown), so that
	// the next apply reads own's records back from the file, capped.
	b.j.dbSeg = segKey{}
	b.j.lagged.Store(false)
	if err := b.applyHeld(ctx); err != nil {
		t.Fatal(err)
	}
	if got := appliedOffset(t, b); got <= before || got >= JournalEnd(b) {
		t.Fatalf("applied offset %d after a capped apply from the file; want between %d and %d", got, before, JournalEnd(b))
	}
	run(t,
		func() error { return ps.CreateLease(ctx, rec("z")) },
		func() error { return b.applyHeld(ctx) },
		func() error { return b.applyHeld(ctx) },
		func() error { return b.applyHeld(ctx) },
	)
	if err := b.drainJournal(ctx); err != nil {
		t.Fatal(err)
	}
	if got := leaseRows(t, b); got != "a,z" {
		t.Fatalf("rows %q; want a,z", got)
	}
	if got := leaseIDs(t, b); !slices.Equal(got, []string{"a", "z"}) {
		t.Fatalf("a reader sees %v; want [a z]", got)
	}
	if got, want := appliedOffset(t, b), JournalEnd(b); got != want {
		t.Fatalf("applied offset %d after the drain; want the end %d", got, want)
	}
}

// A drain (an unfenced write, Close) records a standing lag: afterwards
// SQLite's offset is the journal's end.
func TestJournalDrainRecordsTheLag(t *testing.T) {
	b, ps := pausedLeader(t)
	ctx := context.Background()
	run(t,
		func() error { return ps.CreateLease(ctx, rec("a")) },
		func() error { return b.applyHeld(ctx) },
		func() error { return b.applyHeld(ctx) },
		func() error { return ps.CreateLease(ctx, rec("c")) },
		func() error { return ps.DeleteLease(ctx, "c") },
		func() error { return ps.CreateLease(ctx, rec("e")) }, // syncs c's delete
		func() error { return ps.DeleteLease(ctx, "e") },
		func() error { return b.applyHeld(ctx) },              // the hold
		func() error { return ps.CreateLease(ctx, rec("f")) }, // syncs e's delete
		func() error { return ps.DeleteLease(ctx, "f") },
		func() error { return ps.PutLease(ctx, rec("a")) }, // syncs f's delete
		func() error { return b.applyHeld(ctx) },           // c, e: nothing to write
	)
	if !b.j.lagged.Load() {
		t.Fatal("no lag after an apply with nothing to write")
	}
	if err := b.drainJournal(ctx); err != nil {
		t.Fatal(err)
	}
	if b.journalPending() {
		t.Fatal("pending after the drain")
	}
	if got, want := appliedOffset(t, b), JournalEnd(b); got != want {
		t.Fatalf("applied offset %d after the drain; want the end %d", got, want)
	}
	if got := leaseRows(t, b); got != "a" {
		t.Fatalf("rows %q; want a", got)
	}
}

// A skip's look-ahead marks still pending when SQLite's offset goes
// through the file (after a failure lost the lag): the file writes the
// creates the marks stand for, so the marks are taken back and the
// deletes they would have elided are written.
func TestJournalMarksEndWhenTheFileIsReadBack(t *testing.T) {
	// y's delete comes more than two transactions' worth of records
	// after its create.
	b, _ := leaderWithLongLease(t, maxApply+52)
	ctx := context.Background()
	run(t,
		func() error { return b.applyHeld(ctx) }, // the hold
		func() error { return b.applyHeld(ctx) }, // skips maxApply records, marks y's delete
	)
	if created, found := pendingCreated(b, kindDeleteLease, "y"); !found || !created {
		t.Fatalf("y's delete: pending %v, marked %v; want both", found, created)
	}
	b.j.dbSeg = segKey{} // as a failed transaction leaves it
	b.j.lagged.Store(false)
	// The next maxApply records leave pending, but SQLite's offset is
	// behind them: own's records come from the file, y's create with them.
	if err := b.applyHeld(ctx); err != nil {
		t.Fatal(err)
	}
	if created, found := pendingCreated(b, kindDeleteLease, "y"); !found || created {
		t.Fatalf("y's delete: pending %v, marked %v; want pending, no longer marked", found, created)
	}
	if got := leaseIDs(t, b); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("a reader sees %v; want [a b]", got)
	}
	if err := ApplyJournal(b, 4); err != nil {
		t.Fatal(err)
	}
	if got := leaseRows(t, b); got != "a,b" {
		t.Fatalf("rows %q; want a,b", got)
	}
}
