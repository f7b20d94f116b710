package pools

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// Holder is one held lease as Manager.Holders reports it.
type Holder struct {
	ID       string // as (*Lease).ID
	TaskID   string
	Priority int
	Slots    int
	// GrantedAt is when the lease was granted (zero for a lease without a
	// TTL, a Store or an ID, which records no times).
	GrantedAt time.Time
	// RenewedAt is the last heartbeat, or GrantedAt before the first; zero
	// without a TTL.
	RenewedAt time.Time
	// ExpiresAt is zero without a TTL.
	ExpiresAt time.Time
	// Owner is (*Lease).Owner.
	Owner string
}

// QueuedPriority summarises the requests waiting in a pool at one priority.
type QueuedPriority struct {
	Priority int
	Requests int
	Slots    int           // slots they ask for together
	Oldest   time.Duration // how long the longest-waiting of them has waited
	// TaskIDs are the task IDs of the first MaxListedWaiters of them, in
	// the order they are served (first come first).
	TaskIDs []string
}

// MaxListedWaiters bounds QueuedPriority.TaskIDs, so that a status read
// stays small with thousands waiting.
const MaxListedWaiters = 10

// Holders reports the leases held in pool, oldest grant first (then by ID),
// and its waiting requests by priority, highest first (the order they are
// served in). An unknown pool fails with ErrUnknownPool. It costs
// O(h log h + q) under the pool's lock for h holders and q waiters; like
// (*Lease).ID, it gives an ID to a lease that had none.
func (m *Manager) Holders(pool string) ([]Holder, []QueuedPriority, error) {
	p, err := m.pool(pool)
	if err != nil {
		return nil, nil, err
	}
	now := m.clock.Now()
	p.mu.Lock()
	holders := make([]Holder, 0, len(p.holders))
	for _, l := range p.holders {
		if l.ext == nil {
			l.ext = &leaseExt{}
		}
		if l.ext.id == "" {
			p.assignIDLocked(l)
		}
		h := Holder{ID: l.ext.id, TaskID: l.taskID, Priority: l.priority, Slots: l.slots, GrantedAt: l.ext.grantedAt, ExpiresAt: l.ext.expiresAt, Owner: l.ext.owner}
		if l.ext.ttl > 0 && !l.ext.expiresAt.IsZero() {
			// A heartbeat sets expiresAt to now+TTL, so this is its time.
			h.RenewedAt = l.ext.expiresAt.Add(-l.ext.ttl)
		}
		holders = append(holders, h)
	}
	queued := p.queuedLocked(now)
	p.mu.Unlock()

	slices.SortFunc(holders, func(a, b Holder) int {
		if c := a.GrantedAt.Compare(b.GrantedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return holders, queued, nil
}

// Waiting reports how many leases pool holds and its waiting requests by
// priority, as Holders does, without listing the holders: O(q) for q
// waiters, for a status read that only counts them. An unknown pool fails
// with ErrUnknownPool.
func (m *Manager) Waiting(pool string) (holders int, queued []QueuedPriority, err error) {
	p, err := m.pool(pool)
	if err != nil {
		return 0, nil, err
	}
	now := m.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.holders), p.queuedLocked(now), nil
}

// queuedLocked summarises p's waiters by priority, highest first (the
// order they are served in), naming the first MaxListedWaiters of each.
// p.mu is held.
func (p *pool) queuedLocked(now time.Time) []QueuedPriority {
	byPrio := map[int]*QueuedPriority{}
	type named struct {
		seq    uint64
		taskID string
	}
	first := map[int][]named{} // per priority, the MaxListedWaiters lowest seqs
	for _, w := range p.waiters {
		q := byPrio[w.priority]
		if q == nil {
			q = &QueuedPriority{Priority: w.priority}
			byPrio[w.priority] = q
		}
		q.Requests++
		q.Slots += w.lease.slots
		q.Oldest = max(q.Oldest, now.Sub(w.enqueued))
		f := append(first[w.priority], named{w.seq, w.lease.taskID})
		if len(f) > MaxListedWaiters {
			// Drop the latest: O(MaxListedWaiters) per waiter.
			last := 0
			for i := range f {
				if f[i].seq > f[last].seq {
					last = i
				}
			}
			f = slices.Delete(f, last, last+1)
		}
		first[w.priority] = f
	}
	for prio, f := range first {
		slices.SortFunc(f, func(a, b named) int { return cmp.Compare(a.seq, b.seq) })
		ids := make([]string, len(f))
		for i, n := range f {
			ids[i] = n.taskID
		}
		byPrio[prio].TaskIDs = ids
	}
	queued := make([]QueuedPriority, 0, len(byPrio))
	for _, q := range byPrio {
		queued = append(queued, *q)
	}
	slices.SortFunc(queued, func(a, b QueuedPriority) int { return cmp.Compare(b.Priority, a.Priority) })
	return queued
}
