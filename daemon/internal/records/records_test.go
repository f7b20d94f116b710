package records

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
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

// batchStore deletes in batches and records their sizes; it fails the IDs
// in fail.
type batchStore struct {
	pools.MemoryStore
	mu    sync.Mutex
	sizes []int
	fail  map[string]bool
}

func (b *batchStore) DeleteLeases(ctx context.Context, ids []string) error {
	b.mu.Lock()
	b.sizes = append(b.sizes, len(ids))
	b.mu.Unlock()
	var errs []error
	for _, id := range ids {
		if b.fail[id] {
			errs = append(errs, fmt.Errorf("delete pool lease %s: disk full", id))
			continue
		}
		if err := b.DeleteLease(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// A store with DeleteLeases gets the queued deletes in chunks of at most
// chunkSize, one call each; a failure is logged with the IDs that failed.
func TestAsyncDeleteStoreBatches(t *testing.T) {
	ctx := context.Background()
	bs := &batchStore{fail: map[string]bool{"p/13": true}}
	var logged bytes.Buffer
	var logMu sync.Mutex
	s := NewAsyncDeleteStore(bs, slog.New(slog.NewTextHandler(&lockedWriter{&logMu, &logged}, nil)))
	const n = 1000
	for i := range n {
		id := fmt.Sprintf("p/%d", i)
		if err := s.PutLease(ctx, pools.LeaseRecord{LeaseID: id, Pool: "p", Slots: 1}); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteLease(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	recs, _ := bs.LoadLeases(ctx)
	if len(recs) != 1 || recs[0].LeaseID != "p/13" {
		t.Fatalf("records left after close: %v; want p/13 alone", recs)
	}
	total := 0
	for _, k := range bs.sizes {
		if k < 1 || k > chunkSize {
			t.Errorf("a batch of %d deletes; want 1 to %d", k, chunkSize)
		}
		total += k
	}
	if total != n {
		t.Errorf("%d deletes in %d batches; want %d", total, len(bs.sizes), n)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if !strings.Contains(logged.String(), "delete pool lease p/13: disk full") {
		t.Errorf("the failure is not logged with its ID: %q", logged.String())
	}
	t.Logf("%d deletes in %d batches", total, len(bs.sizes))
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
