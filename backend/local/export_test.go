package local

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// JournalHeader is the size of a journal segment's header.
const JournalHeader = headerSize

// PauseApplier stops b's journal applier (until Close), so that the
// journal's records stay unapplied (and lazy deletes unsynced).
func PauseApplier(b *Backend) { b.j.paused.Store(true) }

// SetSegmentSize sets the journal segments' preallocation (the first
// segment's and the smallest) until the test ends.
func SetSegmentSize(t *testing.T, n int64) {
	old, oldFirst := segmentSize, firstSegmentSize
	segmentSize, firstSegmentSize = n, n
	t.Cleanup(func() { segmentSize, firstSegmentSize = old, oldFirst })
}

// ApplyJournal runs the applier's work n times on the caller's goroutine.
func ApplyJournal(b *Backend, n int) error {
	for range n {
		if err := b.applyJournal(context.Background()); err != nil {
			return err
		}
	}
	return nil
}

// JournalEnd is the end of b's confirmed journal records.
func JournalEnd(b *Backend) int64 {
	b.j.mu.Lock()
	defer b.j.mu.Unlock()
	return b.j.confirmed
}

// JournalSegment is the file of a journal segment of the database at path.
func JournalSegment(path, stack string, epoch, seq int64) string {
	return segmentName(path, stack, epoch, seq)
}

// CopyCrashImage copies b's database, its WAL and its journal segments to
// dst, as a crash would leave them: b must be idle (no write under way,
// its applier paused).
func CopyCrashImage(t *testing.T, b *Backend, dst string) {
	t.Helper()
	cp := func(from, to string) {
		in, err := os.Open(from)
		if os.IsNotExist(err) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		out, err := os.Create(to)
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
	}
	cp(b.path, dst)
	cp(b.path+"-wal", dst+"-wal")
	files, err := filepath.Glob(filepath.Join(journalDir(b.path), "*"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(journalDir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		cp(f, filepath.Join(journalDir(dst), filepath.Base(f)))
	}
}
