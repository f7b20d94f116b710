package records

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/rpdhq/rpd/runtime/pools"
)

func TestAsyncDeleteStoreFlushesOnClose(t *testing.T) {
	ctx := context.Background()
	var mem pools.MemoryStore
	s := NewAsyncDeleteStore(&mem, slog.New(slog.DiscardHandler))
	const n = 5000 // beyond maxQueued: some deletes go synchronously
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Go(func() {
			for i := 0; i < n/4; i++ {
				id := fmt.Sprintf("p/%d-%d", w, i)
				if err := s.PutLease(ctx, pools.LeaseRecord{LeaseID: id, Pool: "p", Slots: 1}); err != nil {
					t.Error(err)
					return
				}
				if err := s.DeleteLease(ctx, id); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	s.Close()
	recs, _ := mem.LoadLeases(ctx)
	if len(recs) != 0 {
		t.Fatalf("%d records left after close, want 0", len(recs))
	}
	// After close, deletes are synchronous.
	_ = s.PutLease(ctx, pools.LeaseRecord{LeaseID: "p/x", Pool: "p", Slots: 1})
	_ = s.DeleteLease(ctx, "p/x")
	if recs, _ := mem.LoadLeases(ctx); len(recs) != 0 {
		t.Fatalf("a delete after close was lost: %v", recs)
	}
	s.Close() // idempotent
}
