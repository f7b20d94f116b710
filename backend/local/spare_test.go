package local

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// The spare segment the applier prepares never replaces the segment the
// writer just created for itself: with segments rotating every few
// batches, spares prepared as often as possible, every grant written is
// read back and no write fails.
func TestJournalSpareNeverTruncatesTheLiveSegment(t *testing.T) {
	SetSegmentSize(t, 16<<10)
	b, ps, _, _ := lazyLeader(t, filepath.Join(t.TempDir(), "c.db"), nil)
	ctx := context.Background()
	var done atomic.Bool
	var spares sync.WaitGroup
	spares.Go(func() {
		for i := 0; i < 1_000_000 && !done.Load(); i++ {
			b.prepareSpare()
		}
	})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 300 {
				if err := ps.PutLease(ctx, rec(fmt.Sprintf("g%d-%d", g, i))); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	done.Store(true)
	spares.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(leaseIDs(t, b)); n != 8*300 {
		t.Errorf("%d lease records read back; want %d", n, 8*300)
	}
}

// createSegment leaves alone a segment file another writer holds: it
// fails instead of truncating it.
func TestCreateSegmentLeavesAHeldFileAlone(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("segment files are locked with flock on Linux only")
	}
	b := openCommitTest(t, nil)
	w, err := b.createSegment(9, 0, segmentSize, false)
	if err != nil {
		t.Fatal(err)
	}
	defer w.f.Close()
	if _, err := w.f.WriteAt([]byte("records"), headerSize); err != nil {
		t.Fatal(err)
	}
	if _, err := b.createSegment(9, 0, segmentSize, false); err == nil || !strings.Contains(err.Error(), "is a writer using it?") {
		t.Fatalf("createSegment of a held file: %v; want a lock error", err)
	}
	got := make([]byte, 7)
	if _, err := w.f.ReadAt(got, headerSize); err != nil || string(got) != "records" {
		t.Fatalf("the held file reads %q, %v after the failed create; want its records", got, err)
	}
	head := make([]byte, len(segmentMagic))
	if _, err := w.f.ReadAt(head, 0); err != nil || string(head) != string(segmentMagic) {
		t.Fatalf("the held file's header reads %q, %v; want the magic", head, err)
	}
}
