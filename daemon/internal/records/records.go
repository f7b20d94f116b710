// Package records holds what writes the durable records of grants in the
// background: a release answers without waiting for its record's delete,
// which the store's own writer (a store that queues deletes) or a writer
// goroutine of ours sends (AsyncDeleteStore, DeleteQueue). Puts stay
// synchronous: a grant whose record is not written is given back.
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
// not wait for their record's delete. A store that queues deletes for its
// own writer (QueueDeleteLease: backend/local's group commit, through the
// leader's and the observer's wrappers) gets each delete at once, in order
// with the grants written after it, with no goroutine of ours between: a
// release answers without waking one. Any other store's deletes go
// through a DeleteQueue, in batches when it has DeleteLeases
// (pools.DeleteLeases).
type AsyncDeleteStore struct {
	pools.Store
	q      *DeleteQueue
	direct queueDeleter // nil: s cannot queue
	log    *slog.Logger
	told   func(error) // a.deleted, made once
	// closeWait bounds how long Close waits for the direct deletes.
	closeWait time.Duration

	mu       sync.Mutex
	inflight int       // direct deletes not told their outcome yet
	closed   bool      // Close began: deletes are synchronous
	drained  sync.Cond // on mu: inflight reached 0
}

// queueDeleter is a store that queues a delete and returns at once; false:
// it cannot (nothing was done).
type queueDeleter interface {
	QueueDeleteLease(id string, done func(error)) bool
}

func NewAsyncDeleteStore(s pools.Store, log *slog.Logger) *AsyncDeleteStore {
	a := &AsyncDeleteStore{Store: s, log: log, q: NewDeleteQueue("pool lease", func(ctx context.Context, ids []string) error {
		return pools.DeleteLeases(ctx, s, ids)
	}, log)}
	a.direct, _ = s.(queueDeleter)
	a.closeWait = 5 * time.Second
	a.told = a.deleted
	a.drained.L = &a.mu
	return a
}

// SetStore replaces the store puts and direct deletes go to (tests inject
// faults with it); only while no request is in flight. The DeleteQueue
// keeps deleting through the store it was made with.
func (a *AsyncDeleteStore) SetStore(s pools.Store) {
	a.Store = s
	a.direct, _ = s.(queueDeleter)
}

// CreateLease passes a grant's record to the store as pools.CreateLease
// does.
func (a *AsyncDeleteStore) CreateLease(ctx context.Context, rec pools.LeaseRecord) error {
	return pools.CreateLease(ctx, a.Store, rec)
}

// DeleteLease queues the delete and returns at once (synchronous once
// maxQueued deletes wait, or after Close).
func (a *AsyncDeleteStore) DeleteLease(ctx context.Context, leaseID string) error {
	if a.direct == nil {
		return a.q.Delete(ctx, leaseID)
	}
	a.mu.Lock()
	if a.closed || a.inflight >= maxQueued {
		a.mu.Unlock()
		return a.Store.DeleteLease(ctx, leaseID)
	}
	a.inflight++
	a.mu.Unlock()
	if !a.direct.QueueDeleteLease(leaseID, a.told) {
		a.deleted(nil)
		return a.q.Delete(ctx, leaseID)
	}
	return nil
}

// deleted is told the outcome of a direct delete.
func (a *AsyncDeleteStore) deleted(err error) {
	if err != nil {
		// The record outlives its grant; its TTL (or the next restore)
		// drops it. err names the ID.
		a.log.Warn("could not delete the record of a released pool lease; its TTL or the next restore drops it", "err", err)
	}
	a.mu.Lock()
	if a.inflight--; a.inflight == 0 {
		a.drained.Broadcast()
	}
	a.mu.Unlock()
}

// Close writes every queued delete and stops the writer; it waits for the
// deletes queued in the store (up to 5 s: a store that stopped
// answering leaves their records to their TTL). Later deletes are
// synchronous.
func (a *AsyncDeleteStore) Close() {
	a.q.Close()
	a.mu.Lock()
	a.closed = true
	if a.inflight > 0 {
		gaveUp := false
		stop := time.AfterFunc(a.closeWait, func() {
			a.mu.Lock()
			gaveUp = true
			a.drained.Broadcast()
			a.mu.Unlock()
		})
		for a.inflight > 0 && !gaveUp {
			a.drained.Wait()
		}
		stop.Stop()
		if gaveUp {
			a.log.Warn("gave up waiting for the deletes of released pool leases; their records stay until their TTL or the next restore", "queued", a.inflight)
		}
	}
	a.mu.Unlock()
}
