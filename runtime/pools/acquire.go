package pools

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"time"
)

// Request describes what Acquire asks for.
type Request struct {
	// TaskID names the holder, for Manager.Release and for records; it may
	// be empty when the caller releases through the Lease. Task IDs need not
	// be unique.
	TaskID string
	// Priority orders waiting requests: higher first, FIFO among equals.
	Priority int
	// Slots is how many slots the request needs; 0 means 1.
	Slots int
	// TTL makes the lease expire unless heartbeated within it; 0 means the
	// pool's LeaseTTL (itself 0 = no expiry).
	TTL time.Duration
	// Timeout bounds the wait (measured on the Manager's clock); 0 means
	// wait until ctx ends. When it elapses Acquire fails with ErrTimeout.
	Timeout time.Duration
	// ID, when set, is the lease's ID (see (*Lease).ID) instead of a
	// generated one, so that a caller can find the grant of a retried
	// request with Manager.Lease, across Restore too. It must not name a
	// held lease: the caller serialises requests with the same ID.
	ID string
	// Owner names who takes the lease (the daemon's authenticated
	// principal): opaque to this package, kept with the lease, recorded
	// and restored with it. "" names nobody.
	Owner string
}

// Acquire waits until req.Slots slots of the named pool ("" means
// default_pool) are granted and returns the lease; the caller must Release it.
//
// It fails at once, without queuing, with ErrUnknownPool, ErrInvalidRequest,
// ErrExceedsCapacity (more slots than the pool's total) or ErrQueueFull
// (MaxQueued reached), and with ctx's error if ctx is already done. While
// waiting it fails with ErrExceedsCapacity if the pool shrinks below the
// request, ErrTimeout when req.Timeout elapses, or ctx's error (wrapped) when
// ctx ends; in every failure case nothing is held: a grant that races the
// cancellation is handed back to the pool, and a request leaving the head of
// the queue lets the next one be granted. The ordering (strict head of line)
// is described in the package documentation.
//
// With a Store, the grant is recorded (PutLease, with ctx) before Acquire
// returns. If recording fails the grant is rolled back, the slots go to the
// next waiters, and the error wraps ErrStore: the caller holds nothing and
// may retry.
func (m *Manager) Acquire(ctx context.Context, pool string, req Request) (*Lease, error) {
	p := m.lookup(pool)
	if p == nil {
		return nil, fmt.Errorf("pools: pool %q: %w (create it first, or omit the name for %s)", pool, ErrUnknownPool, DefaultPool)
	}
	slots := req.Slots
	if slots == 0 {
		slots = 1
	}
	if slots < 0 || req.TTL < 0 || req.Timeout < 0 {
		return nil, fmt.Errorf("pools: task %q in pool %q: slots %d, TTL %v, timeout %v: %w (none may be negative)", req.TaskID, p.name, req.Slots, req.TTL, req.Timeout, ErrInvalidRequest)
	}
	if err := ctx.Err(); err != nil {
		p.mu.Lock()
		p.stats.Cancelled++
		p.mu.Unlock()
		return nil, fmt.Errorf("pools: task %q in pool %q: %w", req.TaskID, p.name, err)
	}
	p.mu.Lock()
	if p.deleted {
		p.mu.Unlock()
		return nil, fmt.Errorf("pools: pool %q: %w (deleted)", p.name, ErrUnknownPool)
	}
	if slots > p.total {
		p.stats.Rejected++
		total := p.total
		p.mu.Unlock()
		return nil, fmt.Errorf("pools: task %q asks for %d slot(s), pool %q has %d in total: %w (ask for fewer or grow the pool)", req.TaskID, slots, p.name, total, ErrExceedsCapacity)
	}
	l := p.newLeaseLocked()
	*l = Lease{p: p, taskID: req.TaskID, priority: req.Priority, slots: slots, index: -1}
	if ttl := cmp.Or(req.TTL, p.leaseTTL); ttl > 0 || m.store != nil || req.ID != "" || req.Owner != "" {
		l.ext = &leaseExt{ttl: ttl, id: req.ID, owner: req.Owner}
	}
	p.seq++
	l.seq = p.seq
	if len(p.waiters) == 0 && slots <= p.total-p.used {
		p.holdLocked(l)
		if m.store == nil {
			p.stats.Granted++
			p.mu.Unlock()
			return l, nil
		}
		p.mu.Unlock()
		return m.confirm(ctx, l, nil)
	}
	if p.maxQueued > 0 && len(p.waiters) >= p.maxQueued {
		p.stats.Rejected++
		queued := len(p.waiters)
		p.mu.Unlock()
		return nil, fmt.Errorf("pools: task %q: pool %q already has %d queued request(s): %w (retry later or raise max_queued)", req.TaskID, p.name, queued, ErrQueueFull)
	}
	w := p.enqueueLocked(l)
	if req.Timeout > 0 {
		w.timer = m.clock.AfterFunc(req.Timeout, func() { p.timeout(w, req.Timeout) })
	}
	p.mu.Unlock()
	return m.wait(ctx, w)
}

func (p *pool) enqueueLocked(l *Lease) *waiter {
	w := &waiter{priority: l.priority, seq: l.seq, lease: l, enqueued: p.m.clock.Now(), ready: make(chan struct{})}
	heap.Push(&p.waiters, w)
	p.queuedSlots += l.slots
	return w
}

// timeout runs on a request's Timeout timer.
func (p *pool) timeout(w *waiter, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w.state != waiting {
		return
	}
	p.failLocked(w, fmt.Errorf("pools: task %q waited %v for %d slot(s) in pool %q: %w", w.lease.taskID, d, w.lease.slots, p.name, ErrTimeout))
	p.stats.TimedOut++
	p.grantLocked()
}

func (m *Manager) wait(ctx context.Context, w *waiter) (*Lease, error) {
	l := w.lease
	p := l.p
	select {
	case <-w.ready:
	case <-ctx.Done():
		p.mu.Lock()
		switch w.state {
		case waiting:
			p.failLocked(w, nil)
		case granted:
			// The grant raced the cancellation: hand the slots back.
			p.dropLocked(l)
		case failed:
			p.mu.Unlock()
			return m.settle(ctx, w)
		}
		p.stats.Cancelled++
		p.grantLocked() // the request may have been the head
		p.mu.Unlock()
		if w.timer != nil {
			w.timer.Stop()
		}
		return nil, fmt.Errorf("pools: task %q waiting for %d slot(s) in pool %q: %w", l.taskID, l.slots, p.name, ctx.Err())
	}
	return m.settle(ctx, w)
}

// settle finishes a request whose state is final (granted or failed).
func (m *Manager) settle(ctx context.Context, w *waiter) (*Lease, error) {
	if w.timer != nil {
		w.timer.Stop()
	}
	if w.state == failed {
		return nil, w.err
	}
	return m.confirm(ctx, w.lease, w)
}

// confirm records a grant (persisting it with a Store) and counts it; w is
// the waiter if the request queued. On a store failure it rolls the grant back.
func (m *Manager) confirm(ctx context.Context, l *Lease, w *waiter) (*Lease, error) {
	p := l.p
	var err error
	if m.store != nil {
		err = m.persist(ctx, l, true)
	}
	p.mu.Lock()
	if err != nil {
		if l.index >= 0 {
			p.dropLocked(l)
			p.grantLocked()
		}
		if ctx.Err() != nil {
			p.stats.Cancelled++
		} else {
			p.stats.Rejected++
		}
		p.mu.Unlock()
		// The put may have landed even though it reported failure.
		if derr := m.unpersist(l); derr != nil {
			m.log.Error("pools: deleting record of rolled-back grant", "lease", l.ext.id, "err", derr)
		}
		return nil, fmt.Errorf("pools: recording lease for task %q in pool %q: %w: %w (the grant was rolled back; retry)", l.taskID, p.name, ErrStore, err)
	}
	p.stats.Granted++
	if w != nil {
		d := m.clock.Now().Sub(w.enqueued)
		p.stats.Wait.Count++
		p.stats.Wait.Sum += d
		p.stats.Wait.Max = max(p.stats.Wait.Max, d)
	}
	p.mu.Unlock()
	return l, nil
}

// Release frees every lease held by taskID in the named pool and grants
// waiting requests that now fit. A task holding nothing is not an error, so
// Release is idempotent; an empty taskID fails with ErrInvalidRequest and an
// unknown pool with ErrUnknownPool. It scans the pool's holders, O(held
// leases); hot paths release through the Lease. Store failures are returned
// joined, wrapping ErrStore, after the slots are freed.
func (m *Manager) Release(pool, taskID string) error {
	p, err := m.pool(pool)
	if err != nil {
		return err
	}
	if taskID == "" {
		return fmt.Errorf("pools: release in pool %q: empty task ID: %w (release through the Lease instead)", p.name, ErrInvalidRequest)
	}
	var dropped []*Lease
	p.mu.Lock()
	for i := 0; i < len(p.holders); {
		l := p.holders[i]
		if l.taskID != taskID {
			i++
			continue
		}
		p.dropLocked(l) // moves the last holder into i
		p.stats.Released++
		dropped = append(dropped, l)
	}
	p.grantLocked()
	p.mu.Unlock()
	if m.store == nil {
		return nil
	}
	var errs []error
	for _, l := range dropped {
		if err := m.unpersist(l); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
