package daemon

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/rpdhq/rpd/runtime/pools"
)

// asyncDeleteStore wraps the backend's pool lease store so that releases
// do not wait for their record's delete: grants (PutLease) stay
// synchronous, deletes are queued and written by one background goroutine.
//
// Why this is safe: a delete lost to a crash leaves a record of a lease
// that was already released; the next daemon restores it as held until its
// TTL runs out, so the pool under-commits for at most one TTL and never
// over-commits. A lost PutLease would over-commit, which is why grants are
// never deferred. close flushes the queue, so a clean shutdown loses
// nothing.
type asyncDeleteStore struct {
	pools.Store
	log *slog.Logger

	mu      sync.Mutex
	queue   []string
	wake    chan struct{}
	closed  bool
	done    chan struct{}
	timeout time.Duration
}

func newAsyncDeleteStore(s pools.Store, log *slog.Logger) *asyncDeleteStore {
	a := &asyncDeleteStore{Store: s, log: log, wake: make(chan struct{}, 1), done: make(chan struct{}), timeout: 5 * time.Second}
	go a.run()
	return a
}

// maxQueued bounds the backlog: beyond it a delete is written synchronously.
const maxQueued = 4096

// DeleteLease queues the delete and returns at once.
func (a *asyncDeleteStore) DeleteLease(ctx context.Context, leaseID string) error {
	a.mu.Lock()
	if a.closed || len(a.queue) >= maxQueued {
		a.mu.Unlock()
		return a.Store.DeleteLease(ctx, leaseID)
	}
	a.queue = append(a.queue, leaseID)
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
	return nil
}

func (a *asyncDeleteStore) run() {
	defer close(a.done)
	for {
		a.mu.Lock()
		batch := a.queue
		a.queue = nil
		closed := a.closed
		a.mu.Unlock()
		for _, id := range batch {
			ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
			if err := a.Store.DeleteLease(ctx, id); err != nil {
				// The record outlives its lease; its TTL (or the next
				// Restore) drops it.
				a.log.Warn("could not delete a released pool lease's record", "lease", id, "err", err)
			}
			cancel()
		}
		if closed && len(batch) == 0 {
			return
		}
		if len(batch) == 0 {
			<-a.wake
		}
	}
}

// close writes every queued delete and stops the writer.
func (a *asyncDeleteStore) close() {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.closed = true
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
	<-a.done
}
