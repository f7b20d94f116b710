package pools

import (
	"container/heap"
	"fmt"
	"sync"
	"time"
)

// pool is one named pool. Everything below mu is guarded by it.
//
// Fairness policy (strict head of line): waiting requests form a max-heap on
// Priority, ties broken by arrival sequence (FIFO). Slots go to the head
// only; while the head does not fit, nobody behind it is granted, even a
// smaller request that would fit. Backfilling small requests past a large
// one is what starves large high-priority requests (Airflow's priority
// inversion reports), so it is not done. A request is granted on arrival
// only if nobody is waiting and enough slots are free.
type pool struct {
	m    *Manager
	name string

	mu          sync.Mutex
	description string
	total       int
	used        int
	maxQueued   int
	leaseTTL    time.Duration
	deleted     bool
	seq         uint64   // arrival sequence, for FIFO among equal priorities
	holders     []*Lease // held leases; each knows its index
	waiters     waiterHeap
	queuedSlots int
	stats       PoolStats
	spare       []Lease // the unused rest of the current lease block
}

// leaseBlockSize leases are allocated at once (with the allocator's header
// they fill its 1 KiB size class), which takes the allocator off most
// acquisitions: the uncontended acquire+release costs about a fifth less.
// Each lease is handed out once and never reused, so a stale *Lease can
// never act on another holder's grant; the price is that a lease held for
// long keeps its block alive.
const leaseBlockSize = 15

// newLeaseLocked returns a zero Lease from the pool's current block.
func (p *pool) newLeaseLocked() *Lease {
	if len(p.spare) == 0 {
		p.spare = make([]Lease, leaseBlockSize)
	}
	l := &p.spare[0]
	p.spare = p.spare[1:]
	return l
}

func newPool(m *Manager, cfg PoolConfig) *pool {
	return &pool{m: m, name: cfg.Name, description: cfg.Description, total: cfg.Slots, maxQueued: cfg.MaxQueued, leaseTTL: cfg.LeaseTTL}
}

// waiter is a queued request. state moves from waiting to exactly one of
// granted or failed, under the pool's lock; ready is closed at that moment.
type waiter struct {
	// priority and seq are copied from the lease so that heap comparisons
	// touch only the waiter: one cache miss per element, not two.
	priority int
	seq      uint64
	lease    *Lease
	index    int // in the heap, -1 once removed
	enqueued time.Time
	ready    chan struct{}
	state    waiterState
	err      error
	timer    Timer // Request.Timeout, if any
}

type waiterState uint8

const (
	waiting waiterState = iota
	granted
	failed
)

// waiterHeap is a container/heap max-heap on (priority desc, seq asc).
type waiterHeap []*waiter

func (h waiterHeap) Len() int { return len(h) }
func (h waiterHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	return a.seq < b.seq
}
func (h waiterHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *waiterHeap) Push(x any) {
	w := x.(*waiter)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *waiterHeap) Pop() any {
	old := *h
	n := len(old)
	w := old[n-1]
	old[n-1] = nil
	w.index = -1
	*h = old[:n-1]
	return w
}

// holdLocked grants l now: stamps it and adds it to the holders.
func (p *pool) holdLocked(l *Lease) {
	var now time.Time
	if x := l.ext; x != nil {
		now = p.m.clock.Now()
		x.grantedAt = now
		if x.ttl > 0 {
			x.expiresAt = now.Add(x.ttl)
		}
	}
	p.insertLocked(l, now)
}

// insertLocked adds a stamped lease (fresh or restored) to the holders;
// now is the clock's time, read by the caller (set when l has an ext).
func (p *pool) insertLocked(l *Lease, now time.Time) {
	p.used += l.slots
	l.index = len(p.holders)
	p.holders = append(p.holders, l)
	if x := l.ext; x != nil {
		if p.m.store != nil || x.id != "" {
			p.assignIDLocked(l)
		}
		if !x.expiresAt.IsZero() {
			l.armExpiryLocked(now)
		}
	}
}

// dropLocked removes l from the holders (swap with the last one) and returns
// its slots. The caller counts the reason and calls grantLocked.
func (p *pool) dropLocked(l *Lease) {
	last := len(p.holders) - 1
	moved := p.holders[last]
	p.holders[l.index] = moved
	moved.index = l.index
	p.holders[last] = nil
	p.holders = p.holders[:last]
	l.index = -1
	p.used -= l.slots
	if x := l.ext; x != nil {
		if x.timer != nil {
			x.timer.Stop()
		}
		if x.id != "" {
			p.m.idMu.Lock()
			delete(p.m.ids, x.id)
			p.m.idMu.Unlock()
		}
	}
}

// grantLocked grants waiting requests from the head of the heap while the
// head fits (strict head of line; see pool). O(log n) per grant.
func (p *pool) grantLocked() {
	for len(p.waiters) > 0 {
		w := p.waiters[0]
		if w.lease.slots > p.total-p.used {
			return
		}
		heap.Pop(&p.waiters)
		p.queuedSlots -= w.lease.slots
		p.holdLocked(w.lease)
		w.state = granted
		close(w.ready)
	}
}

// failLocked removes a waiting request with err; the caller calls grantLocked.
func (p *pool) failLocked(w *waiter, err error) {
	heap.Remove(&p.waiters, w.index)
	p.queuedSlots -= w.lease.slots
	w.state = failed
	w.err = err
	close(w.ready)
}

func (p *pool) resizeLocked(slots int) {
	p.total = slots
	// Requests larger than the new total could never be granted: fail them
	// now rather than leave them (and everyone behind them) waiting forever.
	var doomed []*waiter
	for _, w := range p.waiters {
		if w.lease.slots > slots {
			doomed = append(doomed, w)
		}
	}
	for _, w := range doomed {
		p.failLocked(w, fmt.Errorf("pools: pool %q shrank to %d slot(s) while task %q waited for %d: %w", p.name, slots, w.lease.taskID, w.lease.slots, ErrExceedsCapacity))
		p.stats.Rejected++
	}
	if len(doomed) > 0 {
		p.m.log.Info("pools: pool shrank below queued requests", "pool", p.name, "slots", slots, "failed_requests", len(doomed))
	}
	p.grantLocked()
}

func (p *pool) status(now time.Time) PoolStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := PoolStatus{
		Name:        p.name,
		Description: p.description,
		Total:       p.total,
		Used:        p.used,
		Available:   max(p.total-p.used, 0),
		Queued:      len(p.waiters),
		QueuedSlots: p.queuedSlots,
		MaxQueued:   p.maxQueued,
		LeaseTTL:    p.leaseTTL,
		Stats:       p.stats,
	}
	for _, w := range p.waiters {
		st.OldestWait = max(st.OldestWait, now.Sub(w.enqueued))
	}
	return st
}

// assignIDLocked gives l (which has its ext) its durable ID, if it has none
// yet, and indexes it for Manager.Lease while held.
func (p *pool) assignIDLocked(l *Lease) {
	if l.ext.id == "" {
		l.ext.id = fmt.Sprintf("%s/%s-%d", p.name, p.m.idPrefix, l.seq)
	}
	if l.index >= 0 {
		p.m.idMu.Lock()
		p.m.ids[l.ext.id] = l
		p.m.idMu.Unlock()
	}
}
