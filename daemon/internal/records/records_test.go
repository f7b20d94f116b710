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
	"time"

	"github.com/rpdhq/rpd/internal/poolstest"
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
	log, logged := capturedLog()
	s := NewAsyncDeleteStore(bs, log)
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
	if l := logged(); !strings.Contains(l, "delete pool lease p/13: disk full") {
		t.Errorf("the failure is not logged with its ID: %q", l)
	}
	t.Logf("%d deletes in %d batches", total, len(bs.sizes))
}

type lockedWriter struct {
	mu sync.Mutex
	w  bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// capturedLog is a logger and what it has written so far.
func capturedLog() (*slog.Logger, func() string) {
	w := &lockedWriter{}
	return slog.New(slog.NewTextHandler(w, nil)), func() string {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.w.String()
	}
}

// queueStore queues deletes for its own writer goroutine, as
// backend/local's group commit does; hold stops that writer, fail fails
// the IDs in it, refuse makes QueueDeleteLease say it cannot queue.
type queueStore struct {
	pools.MemoryStore
	refuse bool
	fail   map[string]bool
	hold   chan struct{} // non-nil: the writer waits for it to close
	work   chan func()
	queued int
}

func newQueueStore() *queueStore {
	q := &queueStore{work: make(chan func(), 1<<14)}
	go func() {
		for f := range q.work {
			if q.hold != nil {
				<-q.hold
			}
			f()
		}
	}()
	return q
}

func (q *queueStore) QueueDeleteLease(id string, done func(error)) bool {
	if q.refuse {
		return false
	}
	q.queued++
	q.work <- func() {
		var err error
		if q.fail[id] {
			err = fmt.Errorf("delete pool lease %s: disk full", id)
		} else {
			err = q.DeleteLease(context.Background(), id)
		}
		done(err)
	}
	return true
}

// A store that queues its own deletes gets every delete directly (no
// DeleteQueue), a failure is logged with its ID, and Close waits until
// every queued delete was told its outcome.
func TestAsyncDeleteStoreQueuesInTheStore(t *testing.T) {
	ctx := context.Background()
	qs := newQueueStore()
	qs.fail = map[string]bool{"p/7": true}
	qs.hold = make(chan struct{})
	log, logged := capturedLog()
	s := NewAsyncDeleteStore(qs, log)
	const n = 100
	for i := range n {
		id := fmt.Sprintf("p/%d", i)
		_ = s.PutLease(ctx, pools.LeaseRecord{LeaseID: id, Pool: "p", Slots: 1})
		if err := s.DeleteLease(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if qs.queued != n {
		t.Fatalf("%d deletes queued in the store, want all %d", qs.queued, n)
	}
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while the store's writer still held the deletes")
	case <-time.After(50 * time.Millisecond):
	}
	close(qs.hold)
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return once the deletes were written")
	}
	recs, _ := qs.LoadLeases(ctx)
	if len(recs) != 1 || recs[0].LeaseID != "p/7" {
		t.Fatalf("records left after close: %v; want p/7 alone", recs)
	}
	if l := logged(); !strings.Contains(l, "delete pool lease p/7: disk full") {
		t.Errorf("the failure is not logged with its ID: %q", l)
	}
}

// Close gives up on a store whose writer never answers, saying so, and
// later deletes are synchronous.
func TestAsyncDeleteStoreCloseGivesUp(t *testing.T) {
	ctx := context.Background()
	qs := newQueueStore()
	qs.hold = make(chan struct{}) // never closed
	log, logged := capturedLog()
	s := NewAsyncDeleteStore(qs, log)
	s.closeWait = 50 * time.Millisecond
	_ = s.PutLease(ctx, pools.LeaseRecord{LeaseID: "p/1", Pool: "p", Slots: 1})
	_ = s.DeleteLease(ctx, "p/1")
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited past its bound for a store that never answers")
	}
	if l := logged(); !strings.Contains(l, "gave up waiting") {
		t.Errorf("giving up is not logged: %q", l)
	}
	_ = s.PutLease(ctx, pools.LeaseRecord{LeaseID: "p/2", Pool: "p", Slots: 1})
	if err := s.DeleteLease(ctx, "p/2"); err != nil {
		t.Fatal(err)
	}
	if qs.queued != 1 {
		t.Fatalf("a delete after Close was queued (%d queued), want it synchronous", qs.queued)
	}
	if recs, _ := qs.LoadLeases(ctx); len(recs) != 1 || recs[0].LeaseID != "p/1" {
		t.Fatalf("records: %v; want p/1 alone (its delete never ran)", recs)
	}
}

// A store that says it cannot queue gets its deletes through the
// DeleteQueue.
func TestAsyncDeleteStoreFallsBack(t *testing.T) {
	ctx := context.Background()
	qs := newQueueStore()
	qs.refuse = true
	s := NewAsyncDeleteStore(qs, slog.New(slog.DiscardHandler))
	for i := range 50 {
		id := fmt.Sprintf("p/%d", i)
		_ = s.PutLease(ctx, pools.LeaseRecord{LeaseID: id, Pool: "p", Slots: 1})
		if err := s.DeleteLease(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if recs, _ := qs.LoadLeases(ctx); len(recs) != 0 {
		t.Fatalf("%d records left after close, want 0", len(recs))
	}
}

// A grant's record reaches the wrapped store as a CreateLease.
func TestAsyncDeleteStoreCreateLease(t *testing.T) {
	inner := &poolstest.CreatingStore{}
	s := NewAsyncDeleteStore(inner, slog.New(slog.DiscardHandler))
	defer s.Close()
	if err := pools.CreateLease(context.Background(), s, pools.LeaseRecord{LeaseID: "p/a", Pool: "p", Slots: 1}); err != nil {
		t.Fatal(err)
	}
	if len(inner.Created) != 1 || inner.Created[0] != "p/a" {
		t.Fatalf("CreateLease calls %v; want [p/a]", inner.Created)
	}
}
