package local

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A power loss keeps what was synced and any prefix of what was not, torn
// anywhere (the unsynced blocks of the preallocated segment read back as
// zeros, or garbage where a sector was half written). Grants are synced
// before they are answered, releases lazily (journalwriter.go): after the
// loss every lease granted and not released is counted, a release synced
// before the loss (by a later grant's fdatasync) stays released, and a
// release after the last sync may come back (its record then lasts until
// its TTL). No other record appears.
func TestJournalPowerLoss(t *testing.T) {
	for seed := range 24 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(seed), 7))
			dir := t.TempDir()
			b, ps, _, epoch := lazyLeader(t, filepath.Join(dir, "c.db"), nil)
			PauseApplier(b)
			ctx := context.Background()
			held := map[string]bool{} // granted, not released
			gone := map[string]bool{} // released, and synced since
			var pending []string      // released after the last sync
			synced := JournalEnd(b)   // the durable end of the segment
			release := func() {
				ids := make([]string, 0, len(held))
				for id := range held {
					ids = append(ids, id)
				}
				slices.Sort(ids)
				id := ids[r.IntN(len(ids))]
				before := b.j.syncs.Load()
				if err := ps.DeleteLease(ctx, id); err != nil {
					t.Fatal(err)
				}
				if b.j.syncs.Load() != before {
					t.Fatalf("release of %s synced the journal; releases are lazy", id)
				}
				delete(held, id)
				pending = append(pending, id)
			}
			for i := range 5 + r.IntN(40) {
				if len(held) > 0 && r.IntN(5) < 2 {
					release()
					continue
				}
				id := fmt.Sprintf("l%02d", i)
				before := b.j.syncs.Load()
				if err := ps.CreateLease(ctx, rec(id)); err != nil {
					t.Fatal(err)
				}
				if b.j.syncs.Load() == before {
					t.Fatalf("grant %s answered without a fdatasync of the journal", id)
				}
				held[id] = true
				synced = JournalEnd(b) // the grant's fdatasync covered the whole file
				for _, p := range pending {
					gone[p] = true
				}
				pending = pending[:0]
			}
			for range r.IntN(4) { // the loss strikes after a few releases
				if len(held) > 0 {
					release()
				}
			}
			end := JournalEnd(b)
			cut := synced + r.Int64N(end-synced+1)
			img := filepath.Join(dir, "img.db")
			CopyCrashImage(t, b, img)
			seg := JournalSegment(img, "s", epoch, 0)
			lost := make([]byte, end-cut)
			if len(lost) > 0 && r.IntN(2) == 0 {
				n := 1 + r.IntN(min(len(lost), 512)) // a sector half written
				for i := range n {
					lost[i] = byte(r.Uint32())
				}
			}
			f, err := os.OpenFile(seg, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(lost, cut); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}

			c := openAt(t, img)
			got := map[string]bool{}
			for _, id := range leaseIDs(t, c) {
				got[id] = true
			}
			for id := range held {
				if !got[id] {
					t.Errorf("lease %s, granted and never released, is lost (synced to %d, cut at %d of %d)", id, synced, cut, end)
				}
			}
			for id := range got {
				switch {
				case gone[id]:
					t.Errorf("lease %s, released and synced before the loss, is counted again", id)
				case !held[id] && !slices.Contains(pending, id):
					t.Errorf("lease %s was never granted", id)
				}
			}
			if cut == synced && len(pending) > 0 {
				for _, id := range pending {
					if !got[id] {
						t.Errorf("lease %s: its release never reached the disk, yet it is not counted", id)
					}
				}
			}
		})
	}
}
