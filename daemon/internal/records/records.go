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

// DeleteQueue deletes durable records of released grants in the background:
// a release answers without waiting for its record's delete, which the
// writer goroutine sends with the others queued meanwhile, in chunks of up
// to chunkSize IDs, each one call of the batch delete function. Grants
// (puts) stay synchronous.
//
// Why this is safe: a delete lost to a crash leaves a record of a grant that
// was already released; the next daemon restores it as held until its TTL
// runs out, so the component under-commits for at most one TTL and never
// over-commits. A lost put would over-commit, which is why grants are never
// deferred. Close flushes the queue, so a clean shutdown loses nothing.
type DeleteQueue struct {
	what string // "pool lease", "grant": for the log
	// del deletes the records ids (pools.DeleteLeases,
	// backend.DeleteGrants): one call per chunk, with the failures joined.
	// It must not keep ids.
	del func(ctx context.Context, ids []string) error
	log *slog.Logger

	mu      sync.Mutex
	queue   []string
	spare   []string // the previous batch's slice, reused
	wake    chan struct{}
	closed  bool
	done    chan struct{}
	timeout time.Duration
}

// NewDeleteQueue starts the writer of a queue whose deletes del writes, a
// chunk of IDs per call.
func NewDeleteQueue(what string, del func(ctx context.Context, ids []string) error, log *slog.Logger) *DeleteQueue {
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
		return q.del(ctx, []string{id})
	}
	q.queue = append(q.queue, id)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return nil
}

// chunkSize bounds the deletes of one call of del, which share one
// deadline. A store with a batch delete queues a chunk for its group
// commit at once; another runs the chunk's deletes concurrently (see
// pools.DeleteLeases), so that a backend with group commit still writes a
// backlog in one transaction or batch instead of one round trip each.
const chunkSize = 64

func (q *DeleteQueue) run() {
	defer close(q.done)
	for {
		q.mu.Lock()
		batch := q.queue
		q.queue = q.spare
		closed := q.closed
		q.mu.Unlock()
		for chunk := range slices.Chunk(batch, chunkSize) {
			ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
			if err := q.del(ctx, chunk); err != nil {
				// The records outlive their grants; their TTL (or the
				// next restore) drops them. err names the IDs.
				q.log.Warn("could not delete the records of released "+q.what+"s; their TTL or the next restore drops them", "batch", len(chunk), "err", err)
			}
			cancel()
		}
		clear(batch)
		q.spare = batch[:0]
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

// AsyncDeleteStore wraps the backend's pool lease store so that releases do
// not wait for their record's delete (see DeleteQueue). Its deletes go to s,
// in batches when s has DeleteLeases (pools.DeleteLeases).
type AsyncDeleteStore struct {
	pools.Store
	q *DeleteQueue
}

func NewAsyncDeleteStore(s pools.Store, log *slog.Logger) *AsyncDeleteStore {
	return &AsyncDeleteStore{Store: s, q: NewDeleteQueue("pool lease", func(ctx context.Context, ids []string) error {
		return pools.DeleteLeases(ctx, s, ids)
	}, log)}
}

// DeleteLease queues the delete and returns at once.
func (a *AsyncDeleteStore) DeleteLease(ctx context.Context, leaseID string) error {
	return a.q.Delete(ctx, leaseID)
}

// Close writes every queued delete and stops the writer.
func (a *AsyncDeleteStore) Close() { a.q.Close() }
