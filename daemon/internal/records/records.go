// Package records holds what writes the durable records of grants in the
// background: a release answers without waiting for its record's delete,
// which a writer goroutine sends (DeleteQueue, AsyncDeleteStore). Puts
// stay synchronous: a grant whose record is not written is given back.
package records

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/rpdhq/rpd/runtime/pools"
)

// deleteQueue deletes durable records of released grants in the background:
// a release answers without waiting for its record's delete, which a
// writer goroutine sends (up to inFlight at once). Grants (puts) stay
// synchronous.
//
// Why this is safe: a delete lost to a crash leaves a record of a grant that
// was already released; the next daemon restores it as held until its TTL
// runs out, so the component under-commits for at most one TTL and never
// over-commits. A lost put would over-commit, which is why grants are never
// deferred. close flushes the queue, so a clean shutdown loses nothing.
type DeleteQueue struct {
	what string // "pool lease", "grant": for the log
	del  func(ctx context.Context, id string) error
	log  *slog.Logger

	mu      sync.Mutex
	queue   []string
	wake    chan struct{}
	closed  bool
	done    chan struct{}
	timeout time.Duration
}

func NewDeleteQueue(what string, del func(context.Context, string) error, log *slog.Logger) *DeleteQueue {
	q := &DeleteQueue{what: what, del: del, log: log, wake: make(chan struct{}, 1), done: make(chan struct{}), timeout: 5 * time.Second}
	go q.run()
	return q
}

// maxQueued bounds the backlog: beyond it a delete is written synchronously.
const maxQueued = 4096

// Delete queues the delete of id and returns at once (or, with the queue
// full or closed, deletes synchronously).
func (q *DeleteQueue) Delete(ctx context.Context, id string) error {
	q.mu.Lock()
	if q.closed || len(q.queue) >= maxQueued {
		q.mu.Unlock()
		return q.del(ctx, id)
	}
	q.queue = append(q.queue, id)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return nil
}

// inFlight bounds the deletes the writer has under way at once. They are
// sent concurrently so that a backend with group commit writes a backlog in
// one transaction or batch instead of one round trip each.
const inFlight = 64

func (q *DeleteQueue) run() {
	defer close(q.done)
	var wg sync.WaitGroup
	for {
		q.mu.Lock()
		batch := q.queue
		q.queue = nil
		closed := q.closed
		q.mu.Unlock()
		// The deletes of a chunk run at once and share one deadline.
		for chunk := range slices.Chunk(batch, inFlight) {
			ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
			for _, id := range chunk {
				wg.Go(func() {
					if err := q.del(ctx, id); err != nil {
						// The record outlives its grant; its TTL (or the
						// next restore) drops it.
						q.log.Warn("could not delete the record of a released "+q.what, "id", id, "err", err)
					}
				})
			}
			wg.Wait()
			cancel()
		}
		if closed && len(batch) == 0 {
			return
		}
		if len(batch) == 0 {
			<-q.wake
		}
	}
}

// Close writes every queued delete and stops the writer. Later deletes are
// synchronous.
func (q *DeleteQueue) Close() {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.closed = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	<-q.done
}

// asyncDeleteStore wraps the backend's pool lease store so that releases do
// not wait for their record's delete (see deleteQueue).
type AsyncDeleteStore struct {
	pools.Store
	q *DeleteQueue
}

func NewAsyncDeleteStore(s pools.Store, log *slog.Logger) *AsyncDeleteStore {
	return &AsyncDeleteStore{Store: s, q: NewDeleteQueue("pool lease", s.DeleteLease, log)}
}

// DeleteLease queues the delete and returns at once.
func (a *AsyncDeleteStore) DeleteLease(ctx context.Context, leaseID string) error {
	return a.q.Delete(ctx, leaseID)
}

// Close writes every queued delete and stops the writer.
func (a *AsyncDeleteStore) Close() { a.q.Close() }
