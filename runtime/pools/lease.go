package pools

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Lease is a grant of Slots slots in one pool, held until Release, until the
// pool's Manager.Release for its task, or, with a TTL, until it expires for
// want of Heartbeat. Its methods are safe for concurrent use.
//
// The struct holds only what the fast path needs (64 bytes, taken from a
// block of leases allocated together, see leaseBlockSize); TTL, ID and
// store state live in a leaseExt allocated only for leases that have them.
type Lease struct {
	p        *pool
	taskID   string
	priority int
	slots    int
	seq      uint64    // arrival in the pool: FIFO order and ID
	index    int       // in p.holders; -1 when not held. Guarded by p.mu.
	ext      *leaseExt // nil unless TTL, Store or ID; set under p.mu
}

// leaseExt is the part of a Lease that only leases with a TTL, a Store or
// a requested ID have. Guarded by the pool's mu, except storeMu.
type leaseExt struct {
	ttl       time.Duration
	expired   bool
	id        string
	owner     string    // Request.Owner
	grantedAt time.Time // set with a TTL or a Store
	expiresAt time.Time // zero without a TTL
	timer     Timer     // expiry, with a TTL

	// storeMu orders this lease's store writes, so a heartbeat's PutLease
	// cannot land after the release's DeleteLease and resurrect the record.
	storeMu sync.Mutex
}

// Pool is the name of the lease's pool.
func (l *Lease) Pool() string { return l.p.name }

// TaskID is the task the lease was granted to (may be empty).
func (l *Lease) TaskID() string { return l.taskID }

// Owner is Request.Owner, as granted or restored ("" for nobody named).
func (l *Lease) Owner() string {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	if l.ext == nil {
		return ""
	}
	return l.ext.owner
}

// Priority is the priority the lease was requested with.
func (l *Lease) Priority() int { return l.priority }

// Slots is the number of slots the lease holds.
func (l *Lease) Slots() int { return l.slots }

// TTL is the lease's time to live; 0 means it never expires.
func (l *Lease) TTL() time.Duration {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	if l.ext == nil {
		return 0
	}
	return l.ext.ttl
}

// ID is the lease's durable identifier, "<pool>/<manager>-<n>", stable
// across Restore; Manager.Lease finds a held lease by it. Without a Store the
// ID is made on the first call, which keeps it off the acquire path.
func (l *Lease) ID() string {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.idLocked()
}

// idLocked returns l's ID, made first if it has none yet.
func (l *Lease) idLocked() string {
	if l.ext == nil {
		l.ext = &leaseExt{}
	}
	if l.ext.id == "" {
		l.p.assignIDLocked(l)
	}
	return l.ext.id
}

// Record is the lease as its Store record says it (ID, pool, task,
// priority, slots, times, TTL, owner), read under one lock instead of one
// per accessor; like ID it makes the ID of a lease that has none yet.
func (l *Lease) Record() LeaseRecord {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	l.idLocked()
	return l.recordLocked()
}

// ExpiresAt is when the lease expires unless heartbeated; zero without a TTL.
func (l *Lease) ExpiresAt() time.Time {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	if l.ext == nil {
		return time.Time{}
	}
	return l.ext.expiresAt
}

// Held reports whether the lease still holds its slots.
func (l *Lease) Held() bool {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.index >= 0
}

// Release returns the lease's slots to the pool and grants waiting requests
// that now fit. Releasing again, or after expiry, does nothing and returns
// nil. With a Store, the record is deleted after the slots are freed (bounded
// by Options.StoreTimeout, up to 1/64 more); a failure of that delete is returned wrapping
// ErrStore, the slots stay freed, and the stale record is dropped by its TTL
// or counted again by a later Restore.
func (l *Lease) Release() error {
	p := l.p
	p.mu.Lock()
	if l.index < 0 {
		p.mu.Unlock()
		return nil
	}
	p.dropLocked(l)
	p.stats.Released++
	if len(p.waiters) > 0 {
		p.grantLocked()
	}
	p.mu.Unlock()
	if p.m.store != nil {
		return p.m.unpersist(l)
	}
	return nil
}

// Heartbeat extends a lease with a TTL to now+TTL; without a TTL it only
// confirms the lease is held. It fails with ErrLeaseExpired once the TTL has
// elapsed (the slots are gone: acquire again) and ErrLeaseReleased after a
// release. With a Store the new expiry is written with ctx; if that fails the
// error wraps ErrStore and the in-memory extension stands.
func (l *Lease) Heartbeat(ctx context.Context) error {
	p := l.p
	p.mu.Lock()
	if l.index < 0 {
		expired := l.ext != nil && l.ext.expired
		p.mu.Unlock()
		if expired {
			return fmt.Errorf("pools: lease for task %q in pool %q: %w (acquire again)", l.taskID, p.name, ErrLeaseExpired)
		}
		return fmt.Errorf("pools: lease for task %q in pool %q: %w", l.taskID, p.name, ErrLeaseReleased)
	}
	if x := l.ext; x != nil && x.ttl > 0 {
		x.expiresAt = p.m.clock.Now().Add(x.ttl)
		x.timer.Reset(x.ttl)
	}
	p.mu.Unlock()
	if p.m.store != nil {
		if err := p.m.persist(ctx, l, false); err != nil {
			return fmt.Errorf("pools: recording heartbeat of lease %q: %w: %w", l.ext.id, ErrStore, err)
		}
	}
	return nil
}

// armExpiryLocked starts the expiry timer for l.expiresAt; now is the
// clock's time.
func (l *Lease) armExpiryLocked(now time.Time) {
	l.ext.timer = l.p.m.clock.AfterFunc(l.ext.expiresAt.Sub(now), l.expire)
}

// expire runs on the expiry timer. A heartbeat that raced the timer moved
// expiresAt forward, so the check against the clock makes a stale firing
// harmless.
func (l *Lease) expire() {
	p := l.p
	p.mu.Lock()
	if l.index < 0 || p.m.clock.Now().Before(l.ext.expiresAt) {
		p.mu.Unlock()
		return
	}
	p.dropLocked(l)
	l.ext.expired = true
	p.stats.Expired++
	p.grantLocked()
	p.mu.Unlock()
	p.m.log.Warn("pools: lease expired without heartbeat; slots returned", "pool", p.name, "task", l.taskID, "slots", l.slots, "lease", l.ext.id)
	if p.m.store != nil {
		if err := p.m.unpersist(l); err != nil {
			p.m.log.Error("pools: deleting expired lease record", "lease", l.ext.id, "err", err)
		}
	}
}

func (l *Lease) recordLocked() LeaseRecord {
	return LeaseRecord{
		LeaseID:   l.ext.id,
		Pool:      l.p.name,
		TaskID:    l.taskID,
		Priority:  l.priority,
		Slots:     l.slots,
		GrantedAt: l.ext.grantedAt,
		ExpiresAt: l.ext.expiresAt,
		TTL:       l.ext.ttl,
		Owner:     l.ext.owner,
	}
}

// persist writes l's record if l is still held: created at its grant
// (CreateLease), replaced after (PutLease). With a Store every lease has
// its ext from the start.
func (m *Manager) persist(ctx context.Context, l *Lease, created bool) error {
	l.ext.storeMu.Lock()
	defer l.ext.storeMu.Unlock()
	l.p.mu.Lock()
	if l.index < 0 {
		l.p.mu.Unlock()
		return nil
	}
	rec := l.recordLocked()
	l.p.mu.Unlock()
	if created {
		return CreateLease(ctx, m.store, rec)
	}
	return m.store.PutLease(ctx, rec)
}

// unpersist deletes l's record; its ID was fixed at grant.
func (m *Manager) unpersist(l *Lease) error {
	l.ext.storeMu.Lock()
	defer l.ext.storeMu.Unlock()
	if err := m.store.DeleteLease(m.storeContext(), l.ext.id); err != nil {
		return fmt.Errorf("pools: deleting record of lease %q: %w: %w", l.ext.id, ErrStore, err)
	}
	return nil
}

// storeWindows is how many store contexts a store timeout spans: the
// calls of one window share one (see storeContext).
const storeWindows = 64

// sharedContext is a store context and the end of the window it serves.
type sharedContext struct {
	ctx    context.Context
	cancel context.CancelFunc // never called: the deadline releases it
	until  time.Time
}

// storeContext is the context of a store call that has no caller's (the
// DeleteLease of a release or an expiry): it ends between StoreTimeout
// and StoreTimeout*(1+1/storeWindows) from now. The calls of a window of
// StoreTimeout/storeWindows share one, instead of a context and a timer
// each on the release path.
func (m *Manager) storeContext() context.Context {
	now := time.Now()
	if c := m.storeCtx.Load(); c != nil && now.Before(c.until) {
		return c.ctx
	}
	window := m.storeTimeout / storeWindows
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(m.storeTimeout+window))
	m.storeCtx.Store(&sharedContext{ctx: ctx, cancel: cancel, until: now.Add(window)})
	return ctx
}
