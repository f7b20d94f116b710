package local

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/runtime/pools"
)

// column is the first column of q's rows (q takes the stack as its one
// argument), joined with commas: what b's SQLite tables hold, not the
// journal's records.
func column(t *testing.T, b *Backend, q string) string {
	t.Helper()
	rows, err := b.rdb.QueryContext(context.Background(), q, "s")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, ",")
}

// leaseRows is the lease IDs in b's SQLite table.
func leaseRows(t *testing.T, b *Backend) string {
	t.Helper()
	return column(t, b, `SELECT lease_id FROM pool_leases WHERE stack = ? ORDER BY lease_id`)
}

// pausedLeader is a leader of a new database whose applier is paused: the
// test applies when it says so.
func pausedLeader(t *testing.T) (*Backend, *PoolStore) {
	t.Helper()
	return pausedLeaderIn(t, t.TempDir())
}

// pausedLeaderIn is pausedLeader with its database (c.db) in dir, for a
// test that copies the files (a crash image).
func pausedLeaderIn(t *testing.T, dir string) (*Backend, *PoolStore) {
	t.Helper()
	b, ps, _, _ := lazyLeader(t, filepath.Join(dir, "c.db"), nil)
	b.j.paused.Store(true)
	return b, ps
}

func run(t *testing.T, ops ...func() error) {
	t.Helper()
	for i, op := range ops {
		if err := op(); err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
	}
}

// A lease created (CreateLease) and deleted between two applies is not
// written to SQLite at all; a delete whose lease was created before the
// batch, or written by PutLease only (a restored lease's heartbeat), is.
func TestJournalElidesALeaseCreatedAndDeletedInOneApply(t *testing.T) {
	b, ps := pausedLeader(t)
	ctx := context.Background()
	run(t,
		func() error { return ps.PutLease(ctx, rec("old")) },
		func() error { return ps.CreateLease(ctx, rec("kept")) },
	)
	if err := ApplyJournal(b, 2); err != nil {
		t.Fatal(err)
	}
	if got := leaseRows(t, b); got != "kept,old" {
		t.Fatalf("rows %q after the first apply; want kept,old", got)
	}
	// A row under the ID of a lease about to be created: no created lease
	// can have one, so its delete is not written and the row shows it.
	if err := b.PoolStore().PutLease(ctx, rec("brief")); err != nil {
		t.Fatal(err)
	}
	run(t,
		func() error { return ps.PutLease(ctx, rec("old")) }, // a heartbeat
		func() error { return ps.DeleteLease(ctx, "old") },
		func() error { return ps.PutLease(ctx, rec("kept")) },
		func() error { return ps.DeleteLease(ctx, "kept") }, // created in an earlier apply
		func() error { return ps.CreateLease(ctx, rec("brief")) },
		func() error { return ps.DeleteLease(ctx, "brief") },
		func() error { return ps.CreateLease(ctx, rec("hb")) },
		func() error { return ps.PutLease(ctx, rec("hb")) },
		func() error { return ps.DeleteLease(ctx, "hb") },
		func() error { return ps.CreateLease(ctx, rec("held")) },
	)
	if err := ApplyJournal(b, 2); err != nil {
		t.Fatal(err)
	}
	if b.journalPending() {
		t.Fatal("records left to apply")
	}
	if got := leaseRows(t, b); got != "brief,held" {
		t.Errorf("rows %q; want brief (the planted row, its delete elided),held", got)
	}
}

// A batch split by maxApply: the create in one apply, the delete in the
// next, which deletes the row.
func TestJournalElisionAcrossApplies(t *testing.T) {
	b, ps := pausedLeader(t)
	ctx := context.Background()
	for i := range maxApply - 1 {
		if err := ps.PutLease(ctx, rec(fmt.Sprintf("f%03d", i))); err != nil {
			t.Fatal(err)
		}
	}
	run(t,
		func() error { return ps.CreateLease(ctx, rec("edge")) }, // the first apply's last record
		func() error { return ps.DeleteLease(ctx, "edge") },
	)
	if err := ApplyJournal(b, 1); err != nil {
		t.Fatal(err)
	}
	if got := leaseRows(t, b); !strings.Contains(","+got+",", ",edge,") {
		t.Fatalf("after the first apply the created lease has no row (rows %.60q…)", got)
	}
	if err := ApplyJournal(b, 1); err != nil {
		t.Fatal(err)
	}
	if got := leaseRows(t, b); strings.Contains(","+got+",", ",edge,") {
		t.Errorf("the delete applied in the next batch left the row")
	}
}

// Whether a put created its lease is not written to the journal: after a
// crash the records are applied from the segment, every delete written.
func TestJournalElisionNotReadBackFromASegment(t *testing.T) {
	dir := t.TempDir()
	b, ps := pausedLeaderIn(t, dir)
	ctx := context.Background()
	run(t,
		// The row the file's delete must remove (planted as above; an
		// unfenced write applies the journal first, so it comes first).
		func() error { return b.PoolStore().PutLease(ctx, rec("f")) },
		func() error { return ps.CreateLease(ctx, rec("f")) },
		func() error { return ps.DeleteLease(ctx, "f") },
		func() error { return ps.CreateLease(ctx, rec("g")) }, // syncs the lazy delete
	)
	if got := leaseRows(t, b); got != "f" {
		t.Fatalf("rows %q before the crash; want f (the records not applied)", got)
	}
	img := filepath.Join(dir, "img.db")
	CopyCrashImage(t, b, img)
	later := func() time.Time { return time.Now().Add(time.Hour) } // a's leader lease has run out
	c, err := Open(ctx, img, Options{Stack: "s", Clock: later})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, held, err := c.AcquireLeader(ctx, backend.LeaderClaim{Holder: "b", Lease: time.Second}); err != nil || !held {
		t.Fatalf("AcquireLeader after the crash: %v, %v", held, err)
	}
	PauseApplier(c)
	if err := ApplyJournal(c, 3); err != nil {
		t.Fatal(err)
	}
	if got := leaseRows(t, c); got != "g" {
		t.Errorf("rows %q after applying the crashed leader's segment; want g", got)
	}
}

func TestApplyWait(t *testing.T) {
	for _, c := range []struct {
		took    time.Duration
		pending int
		want    time.Duration
	}{
		{500 * time.Microsecond, 1, applyPace * 500 * time.Microsecond}, // the rest of a tick's records: paced
		{time.Millisecond, applyBacklog, applyPace * time.Millisecond},  // at the bound: still paced
		{time.Millisecond, applyBacklog + 1, 0},                         // a backlog: back to back
		{0, 10, 0},
	} {
		if got := applyWait(c.took, c.pending); got != c.want {
			t.Errorf("applyWait(%v, %d) = %v; want %v", c.took, c.pending, got, c.want)
		}
	}
}

// The running applier works through records that take several paced
// transactions on its own: every lease reaches its row.
func TestJournalApplierCatchesUpUnattended(t *testing.T) {
	b, ps, _, _ := lazyLeader(t, filepath.Join(t.TempDir(), "c.db"), nil)
	ctx := context.Background()
	const n = 2*maxApply + 7 // three transactions, the last two paced
	b.j.paused.Store(true)   // the records pile up first
	const writers = 32       // so that the group commit batches them
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			var err error
			for i := w; i < n && err == nil; i += writers {
				err = ps.PutLease(ctx, rec(fmt.Sprintf("u%05d", i)))
			}
			errs <- err
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	b.j.paused.Store(false)
	b.wakeApplier()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := strings.Count(leaseRows(t, b), "u")
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d lease rows after 30 s (%d records not taken by the applier)", got, n, b.pendingRecords())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The lease puts of an apply are written by one statement from a JSON
// array of rows: every field round-trips, and a lease whose strings a JSON
// string would not carry as they are is written by a statement of its own.
func TestJournalBatchedLeasePutsRoundTrip(t *testing.T) {
	b, ps := pausedLeader(t)
	ctx := context.Background()
	odd := []string{`q"uote`, `back\slash`, "ü€😀", "sep\u2028x", "ctl\x01", "nul\x00x", "bad\xffutf8", "del\x7f", "", "[1,2]", `{"a":1}`, "123", "-0", " lead"}
	var want []pools.LeaseRecord
	for i, s := range odd {
		want = append(want, pools.LeaseRecord{
			LeaseID: fmt.Sprintf("l%02d%s", i, s), Pool: s, TaskID: "t" + s, Owner: s,
			Priority: []int{math.MinInt, -1, 0, math.MaxInt}[i%4], Slots: i,
			GrantedAt: time.Unix(0, math.MaxInt64).UTC(), ExpiresAt: []time.Time{{}, time.Unix(-5, 7).UTC()}[i%2],
			TTL: []time.Duration{0, math.MaxInt64, time.Minute}[i%3],
		})
	}
	for _, l := range want {
		if err := ps.CreateLease(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := ApplyJournal(b, 1); err != nil {
		t.Fatal(err)
	}
	if b.journalPending() {
		t.Fatal("records left to apply")
	}
	got, err := b.PoolStore().LoadLeases(ctx) // the table's rows: no record is left in the journal
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(want, func(i, j int) bool { return want[i].LeaseID < want[j].LeaseID })
	if len(got) != len(want) {
		t.Fatalf("%d rows; want %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("row %d:\n got %#v\nwant %#v", i, got[i], want[i])
		}
	}
	if n := column(t, b, `SELECT count(*) FROM pool_leases WHERE stack = ? AND (typeof(priority) != 'integer' OR typeof(granted_ns) != 'integer' OR typeof(lease_id) != 'text' OR typeof(owner) != 'text')`); n != "0" {
		t.Errorf("%s rows with a column of the wrong type", n)
	}
}
