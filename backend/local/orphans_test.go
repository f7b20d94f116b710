package local

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// removeOrphans removes the segment files nothing will read: a spare of a
// fenced epoch that no row names, and the file of a folded segment. It
// keeps the current leader's spare, the files of unfolded segments, a file
// another writer holds, and whatever is not a segment of this stack.
func TestRemoveOrphans(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	ctx := context.Background()
	b, ps, _, _ := lazyLeader(t, path, nil)
	b.j.paused.Store(true) // the test calls removeOrphans itself
	if err := ps.PutLease(ctx, rec("l1")); err != nil {
		t.Fatal(err)
	}
	own := segmentName(path, "s", b.j.own.epoch, b.j.own.seq)
	// A takeover by epoch 5 (this writer is fenced from here on).
	if _, err := b.wdb.Exec(`UPDATE leaders SET epoch = 5 WHERE stack = 's'`); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ epoch, seq, folded int64 }{{3, 0, 1}, {4, 0, 0}} {
		if _, err := b.wdb.Exec(`INSERT INTO journals (stack, epoch, seq, applied, sealed, folded) VALUES ('s', ?, ?, 16, 16, ?)`, r.epoch, r.seq, r.folded); err != nil {
			t.Fatal(err)
		}
	}
	dir := journalDir(path)
	touch := func(name string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("rpdjrnl1"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	spareOfFenced := touch("s.3.1")  // no row, epoch 3 < 5: removed
	currentSpare := touch("s.5.2")   // no row, the leader's epoch: kept
	folded := touch("s.3.0")         // row folded: removed
	unfolded := touch("s.4.0")       // row not folded: kept
	held := touch("s.2.7")           // no row, fenced, but locked: kept for now
	otherStack := touch("other.3.1") // not this stack's
	notSegment := touch("s.3.x")     // not a segment name
	hf, err := os.OpenFile(held, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	locked := runtime.GOOS == "linux"
	if locked {
		if err := syscall.Flock(int(hf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			t.Fatal(err)
		}
	}
	n, err := b.removeOrphans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	for _, p := range []string{spareOfFenced, folded} {
		if exists(p) {
			t.Errorf("%s is still there; it is an orphan", filepath.Base(p))
		}
	}
	keep := []string{currentSpare, unfolded, otherStack, notSegment, own}
	if locked {
		keep = append(keep, held)
	}
	for _, p := range keep {
		if !exists(p) {
			t.Errorf("%s was removed; it must stay", filepath.Base(p))
		}
	}
	if want := 2 + map[bool]int{true: 0, false: 1}[locked]; n != want {
		t.Errorf("removed %d, want %d", n, want)
	}
	hf.Close() // its writer is gone: the next look removes it
	if _, err := b.removeOrphans(ctx); err != nil {
		t.Fatal(err)
	}
	if exists(held) {
		t.Error("the fenced spare is still there once its writer let go")
	}
}

// The applier looks for orphans at its first tick: a spare left by a stop
// of an older leader is gone shortly after the next open.
func TestApplierRemovesOrphansAtOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	b, _, _, _ := lazyLeader(t, path, nil)
	leftover := segmentName(path, "s", 1, 9) // epoch 1's spare, never taken
	if err := os.MkdirAll(journalDir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(leftover, []byte("rpdjrnl1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := b.wdb.Exec(`UPDATE leaders SET epoch = 2 WHERE stack = 's'`); err != nil {
		t.Fatal(err)
	}
	b.Close()
	b2, err := Open(context.Background(), path, Options{Stack: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(leftover); os.IsNotExist(err) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the orphaned spare is still there 10 s after open")
}

// dropPending keeps the records after the ones the applier took, in order,
// whether it moves them to the front (few left) or reslices (many left).
func TestDropPending(t *testing.T) {
	var b Backend
	for i := range 10 {
		b.j.pending = append(b.j.pending, pendRec{rec: jrec{id: string(rune('a' + i))}, end: int64(i)})
	}
	ids := func() (s string) {
		for _, p := range b.j.pending {
			s += p.rec.id
		}
		return s
	}
	b.dropPending(3) // 7 left > 3 taken: resliced
	if got := ids(); got != "defghij" {
		t.Fatalf("after taking 3: %q", got)
	}
	b.dropPending(5) // 2 left <= 5 taken: moved to the front
	if got := ids(); got != "ij" || cap(b.j.pending) < 7 {
		t.Fatalf("after taking 5 more: %q (cap %d, want the array kept)", got, cap(b.j.pending))
	}
	b.dropPending(2)
	if len(b.j.pending) != 0 {
		t.Fatalf("after taking the rest: %d left", len(b.j.pending))
	}
}
