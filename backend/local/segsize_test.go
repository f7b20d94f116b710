package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestNextSegmentSize(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		size int64
		took time.Duration
		want int64
	}{
		{8 * mib, time.Second, 16 * mib},                       // busy: grows
		{32 * mib, segmentFillTarget - 1, 64 * mib},            // just under the target
		{64 * mib, time.Second, 64 * mib},                      // at the bound
		{16 * mib, segmentFillTarget, 16 * mib},                // on target: stays
		{16 * mib, shrinkAfter * segmentFillTarget, 16 * mib},  // slow, not past the bound
		{16 * mib, shrinkAfter*segmentFillTarget + 1, 8 * mib}, // quiet: shrinks
		{8 * mib, time.Hour, 8 * mib},                          // never below segmentSize
		{3 * mib, time.Hour, 8 * mib},                          // a smaller file (an older build's) comes back up
		{512 * mib, segmentFillTarget, 64 * mib},               // a larger one down to the bound
	} {
		if got := nextSegmentSize(c.size, c.took); got != c.want {
			t.Errorf("nextSegmentSize(%d MiB, %v) = %d MiB; want %d MiB", c.size/mib, c.took, got/mib, c.want/mib)
		}
	}
}

// A stack whose segments fill fast gets larger ones, twice as large each
// rotation up to maxSegmentGrowth times segmentSize (the applier's spare
// and a segment the writer creates itself follow the same rule), from a
// first segment of firstSegmentSize; every grant is read back, and each
// segment file has the size the writer uses.
func TestJournalSegmentsGrowWhenBusy(t *testing.T) {
	for _, first := range []int64{1, 4} { // firstSegmentSize in segmentSizes
		t.Run(fmt.Sprintf("first=%dx", first), func(t *testing.T) {
			SetSegmentSize(t, 16<<10)
			firstSegmentSize = first * segmentSize
			path := filepath.Join(t.TempDir(), "c.db")
			b, ps, _, epoch := lazyLeader(t, path, nil)
			ctx := context.Background()
			var sizes []int64
			seen := map[int64]bool{}
			for i := range 5000 {
				if err := ps.PutLease(ctx, rec(fmt.Sprint("l", i))); err != nil {
					t.Fatal(err)
				}
				b.j.mu.Lock()
				own, size := b.j.own, b.j.ownSize
				b.j.mu.Unlock()
				if !seen[own.seq] {
					seen[own.seq] = true
					sizes = append(sizes, size)
					if fi, err := os.Stat(segmentName(path, "s", epoch, own.seq)); err != nil || fi.Size() != size {
						t.Fatalf("segment %d: %v, %v; want a file of %d bytes", own.seq, fi, err, size)
					}
				}
			}
			max := maxSegmentGrowth * segmentSize
			var want []int64
			for s := firstSegmentSize; s < max; s *= 2 {
				want = append(want, s)
			}
			want = append(want, max)
			if len(sizes) < len(want)+1 || !slices.Equal(sizes[:len(want)], want) {
				t.Fatalf("segment sizes %v; want %v, then %d", sizes, want, max)
			}
			for _, s := range sizes[len(want):] {
				if s != max {
					t.Fatalf("segment sizes %v: past the bound %d", sizes, max)
				}
			}
			if n := len(leaseIDs(t, b)); n != 5000 {
				t.Errorf("%d lease records read back; want 5000", n)
			}
		})
	}
}
