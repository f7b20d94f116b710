package fatjob

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// ErrExceedsCapacity is wrapped by Acquire when a request is larger than the
// pool's total budget of some resource, so that it could never be granted:
// at the call, or for a queued request, after a Reconfigure shrank the pool.
var ErrExceedsCapacity = errors.New("fatjob: request exceeds the pool's total capacity")

// ErrQueueFull is wrapped by Acquire when the request would have to wait
// and Config.MaxQueued requests already do; it never joined the queue.
var ErrQueueFull = errors.New("fatjob: the queue of waiting requests is full")

// Pool is a system-wide budget of scan-ring bytes, delta-cache bytes and
// spill slots, handed out as all-or-nothing Permits. It is safe for
// concurrent use; create it with New.
//
// # Fairness
//
// Acquire waits in one FIFO queue. When resources are released, queued
// requests are granted strictly in arrival order: if the request at the head
// does not fit, none behind it is considered, even one that would fit. This
// is what keeps a large job from being starved by a stream of small ones, and
// it is the policy of
// golang.org/x/sync/semaphore. The trade-off: while a large request waits at
// the head, free capacity it cannot use yet stays idle, and small requests
// behind it wait too. TryAcquire never jumps the queue either: while any
// request is queued it fails (except for the empty Request, which takes
// nothing and so cannot delay anyone).
//
// # How it is built
//
// The three budgets are atomic counters of what is available (the spill
// slots share a word with the permit count, see claims.go). When no request
// is queued and no Reconfigure is running, TryAcquire, Acquire and Release
// touch only these counters (three compare-and-swap loops in the fixed order
// scan ring → delta cache → spill slot, with rollback, and three adds to
// release) plus the permit's release flag and two reads of a gate word, and
// never take the mutex. Queued requests, Reconfigure
// and the hand-off to waiters run under the mutex. The gate's low 32 bits
// count queued requests plus a running Reconfigure, and its high 32 bits are
// a version bumped with every change: a lock-free acquisition that sees the
// gate move while it holds resources gives them back and retries under the
// mutex, so it can never overtake a request that was queued in the meantime,
// nor mix two configurations. A Release or rollback always reads the gate
// after returning resources, and a request always raises the gate before its
// last attempt ahead of queueing; with sequentially consistent atomics one
// of the two sees the other, so no release is missed by a waiter.
type Pool struct {
	// Available scan-ring and delta-cache bytes: total minus held. Negative
	// after a Reconfigure shrank a budget below what is held; a grant never
	// makes them negative.
	scan, delta atomic.Int64
	// claims packs the available spill slots (low bits) with the count of
	// permits handed out (high bits), so that one compare-and-swap takes a
	// slot and numbers the permit; see claims.go.
	claims atomic.Uint64
	// gate: low 32 bits = queued requests + running Reconfigure (the
	// lock-free path is closed while non-zero); high 32 bits = version.
	gate           atomic.Uint64
	spillUnlimited atomic.Bool

	// claimWraps counts overflows of the claim counter; unclaimed counts
	// claimed permits that never reached a caller (rolled back or handed
	// back after a cancellation).
	claimWraps, unclaimed atomic.Uint64

	denied, waited, waitNanos, cancelled atomic.Uint64

	// floor[i] is the available amount of budget i right after New or the
	// last Reconfigure (written under mu). Until the next Reconfigure the
	// available amount never falls below min(0, floor[i]): releases raise
	// it and grants never take it below 0. The tests check this invariant,
	// which is sum(held) ≤ total whenever no shrink left more held.
	floor [3]atomic.Int64

	now func() time.Time

	mu    sync.Mutex
	cfg   Config    // guarded by mu; SpillSlots points to the pool's own copy
	queue list.List // guarded by mu; of *waiter, FIFO
}

const (
	gateEnter = 1<<32 + 1 // version+1, count+1
	gateLeave = 1<<32 - 1 // version+1, count-1 (the borrow carries into the version)
)

// Indexes of floor.
const (
	resScan = iota
	resDelta
	resSpill
)

type waiter struct {
	req   Request
	since time.Time
	elem  *list.Element
	// ready is closed once granted or err is set (under Pool.mu).
	ready   chan struct{}
	granted grant
	err     error
	waited  time.Duration
}

// Option configures a Pool at New.
type Option func(*Pool)

// WithClock sets the clock used to measure how long requests wait
// (Stats.WaitTime); the default is time.Now.
func WithClock(now func() time.Time) Option {
	return func(p *Pool) { p.now = now }
}

// New returns a full pool with the budgets of cfg, or the error of
// cfg.Validate.
func New(cfg Config, opts ...Option) (*Pool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Pool{now: time.Now}
	for _, opt := range opts {
		opt(p)
	}
	cfg = cfg.clone()
	p.cfg = cfg
	p.scan.Store(int64(cfg.ScanRingBytes))
	p.delta.Store(int64(cfg.DeltaCacheBytes))
	p.claims.Store(spillBias + uint64(cfg.spillTotal()))
	p.spillUnlimited.Store(cfg.SpillSlots == nil)
	p.floor[resScan].Store(p.scan.Load())
	p.floor[resDelta].Store(p.delta.Load())
	p.floor[resSpill].Store(p.spillAvailable())
	return p, nil
}

func (c Config) clone() Config {
	if c.SpillSlots != nil {
		c.SpillSlots = LimitedSpill(*c.SpillSlots)
	}
	return c
}

// TryAcquire takes everything r asks for, or nothing. It never blocks and
// never overtakes a queued Acquire. On success it returns the permit and
// true; otherwise nil and false, and the pool is unchanged.
//
// Resources are taken in the fixed order scan ring → delta cache → spill
// slot; when one is short, those already taken are put back.
func (p *Pool) TryAcquire(r Request) (*Permit, bool) {
	// Kept small enough to be inlined, so that the permit is allocated in
	// the caller's frame (see newPermit).
	if g := p.takeNow(r, true); g.pool != nil {
		return &Permit{grant: g}, true
	}
	return nil, false
}

// takeNow takes r's resources if that needs no waiting, and returns the
// grant, or no grant and the pool unchanged. It tries the lock-free path
// first. When that is closed or raced (see Pool), a TryAcquire (forTry)
// retries under the mutex if nobody is queued, and counts a denial if r
// does not fit; Acquire goes on to acquireSlow instead.
func (p *Pool) takeNow(r Request, forTry bool) grant {
	if r.isEmpty() {
		p.claim(false)
		return p.grantOf(r, SpillNotRequested)
	}
	raced := true
	if g := p.gate.Load(); uint32(g) == 0 {
		spill, ok := p.take(r, p.spillUnlimited.Load())
		if ok && p.gate.Load() == g {
			return p.grantOf(r, spill)
		}
		if ok {
			// The gate moved while we held r: give it back.
			p.put(r.ScanRingBytes, r.DeltaCacheBytes, spill == SpillLimited)
			p.unclaimed.Add(1)
		} else {
			raced = false
		}
		p.wakeIfQueued()
	}
	if !forTry {
		return grant{}
	}
	if raced {
		p.mu.Lock()
		spill, ok := SpillGrant(0), false
		if p.queue.Len() == 0 {
			// With mu held and the queue empty, only lock-free acquirers
			// compete with us, through the same CAS loops.
			spill, ok = p.take(r, p.cfg.SpillSlots == nil)
		}
		p.mu.Unlock()
		if ok {
			return p.grantOf(r, spill)
		}
	}
	p.denied.Add(1)
	return grant{}
}

// Acquire takes everything r asks for, waiting in FIFO order until it fits
// or ctx is done.
//
// On success it returns the permit. If ctx is done before the request is
// granted, it returns ctx.Err() and leaves the pool unchanged: a grant that
// races the cancellation is given back (and passed on to the next waiters),
// and a cancelled request at the head of the queue lets the ones behind it
// be considered. A ctx that is already done fails even if the request would
// fit. A request larger than the pool's total of some resource fails at once
// with an error wrapping ErrExceedsCapacity, and so does a queued request
// when a Reconfigure shrinks the pool below it.
func (p *Pool) Acquire(ctx context.Context, r Request) (perm *Permit, err error) {
	// Inlined like TryAcquire, so the permit is allocated in the caller's
	// frame.
	g, err := p.acquire(ctx, r)
	if g.pool != nil {
		perm = &Permit{grant: g}
	}
	return perm, err
}

// acquire is Acquire without the permit: it returns the grant, or no grant
// and an error, leaving the pool unchanged.
func (p *Pool) acquire(ctx context.Context, r Request) (grant, error) {
	done := ctx.Done()
	if done != nil {
		select {
		case <-done:
			p.cancelled.Add(1)
			return grant{}, ctx.Err()
		default:
		}
	}
	if g := p.takeNow(r, false); g.pool != nil {
		return g, nil
	}
	return p.acquireSlow(ctx, done, r)
}

func (p *Pool) acquireSlow(ctx context.Context, done <-chan struct{}, r Request) (grant, error) {
	p.mu.Lock()
	select {
	case <-done:
		// ctx became done before we could take the lock: prefer to fail,
		// as x/sync/semaphore does.
		p.mu.Unlock()
		p.cancelled.Add(1)
		return grant{}, ctx.Err()
	default:
	}
	if err := p.exceedsLocked(r); err != nil {
		p.mu.Unlock()
		p.denied.Add(1)
		return grant{}, err
	}
	// Raise the gate before the last attempt, so that a concurrent Release
	// either is seen by this attempt or sees the gate and hands off to us.
	p.gate.Add(gateEnter)
	if p.queue.Len() == 0 {
		if spill, ok := p.take(r, p.cfg.SpillSlots == nil); ok {
			p.gate.Add(gateLeave)
			p.mu.Unlock()
			return p.grantOf(r, spill), nil
		}
	}
	if limit := p.cfg.MaxQueued; limit > 0 && p.queue.Len() >= limit {
		p.gate.Add(gateLeave)
		p.mu.Unlock()
		p.denied.Add(1)
		// No release is missed: the queue is not empty, so releases hand
		// off to it whatever the gate said while we held it up.
		return grant{}, fmt.Errorf("%w: %d requests already wait (max_queued); retry later or raise it", ErrQueueFull, limit)
	}
	w := &waiter{req: r, since: p.now(), ready: make(chan struct{})}
	w.elem = p.queue.PushBack(w)
	p.mu.Unlock()

	select {
	case <-done:
		p.mu.Lock()
		select {
		case <-w.ready:
			if w.err != nil {
				// Failed (pool shrank) before we saw the cancellation.
				p.mu.Unlock()
				return grant{}, w.err
			}
			// Granted after we were cancelled: the grant never reached a
			// caller, so give its resources straight back.
			w.granted.put()
			p.unclaimed.Add(1)
			p.dispatchLocked()
		default:
			isFront := p.queue.Front() == w.elem
			p.queue.Remove(w.elem)
			p.gate.Add(gateLeave)
			if isFront {
				p.dispatchLocked()
			}
		}
		p.mu.Unlock()
		p.cancelled.Add(1)
		return grant{}, ctx.Err()

	case <-w.ready:
		if w.err != nil {
			return grant{}, w.err
		}
		select {
		case <-done:
			// Granted, but ctx is done too: cancellation wins.
			w.granted.put()
			p.wakeIfQueued()
			p.unclaimed.Add(1)
			p.cancelled.Add(1)
			return grant{}, ctx.Err()
		default:
		}
		p.waited.Add(1)
		p.waitNanos.Add(uint64(w.waited))
		return w.granted, nil
	}
}

// take takes all of r from the counters and counts a grant, or, if some
// resource is short, takes nothing (putting back what it took). It does not
// wake waiters.
func (p *Pool) take(r Request, spillUnlimited bool) (spill SpillGrant, ok bool) {
	if !takeFrom(&p.scan, r.ScanRingBytes) {
		return 0, false
	}
	if !takeFrom(&p.delta, r.DeltaCacheBytes) {
		p.put(r.ScanRingBytes, 0, false)
		return 0, false
	}
	spill = SpillNotRequested
	if r.NeedsSpillSlot {
		spill = SpillLimited
		if spillUnlimited {
			spill = SpillUnlimited
		}
	}
	if !p.claim(spill == SpillLimited) {
		p.put(r.ScanRingBytes, r.DeltaCacheBytes, false)
		return 0, false
	}
	return spill, true
}

// takeFrom subtracts n from a unless that would leave it negative.
func takeFrom(a *atomic.Int64, n uint64) bool {
	if n == 0 {
		return true
	}
	if n > math.MaxInt64 {
		return false
	}
	need := int64(n)
	for {
		cur := a.Load()
		if cur < need {
			return false
		}
		if a.CompareAndSwap(cur, cur-need) {
			return true
		}
	}
}

// put returns resources to the counters. It does not wake waiters.
func (p *Pool) put(scan, delta uint64, spillSlot bool) {
	if scan != 0 {
		p.scan.Add(int64(scan))
	}
	if delta != 0 {
		p.delta.Add(int64(delta))
	}
	if spillSlot {
		p.claims.Add(1)
	}
}

// wakeIfQueued hands released resources to queued requests. Call it after
// put; the gate read must follow the counter updates (see Pool).
func (p *Pool) wakeIfQueued() {
	if uint32(p.gate.Load()) != 0 {
		p.wake()
	}
}

func (p *Pool) wake() {
	p.mu.Lock()
	p.dispatchLocked()
	p.mu.Unlock()
}

// dispatchLocked grants queued requests in FIFO order while the head fits.
func (p *Pool) dispatchLocked() {
	unlimited := p.cfg.SpillSlots == nil
	for e := p.queue.Front(); e != nil; e = p.queue.Front() {
		w := e.Value.(*waiter)
		spill, ok := p.take(w.req, unlimited)
		if !ok {
			// The head waits; nobody overtakes it (see Pool, Fairness).
			return
		}
		p.queue.Remove(e)
		p.gate.Add(gateLeave)
		w.granted = p.grantOf(w.req, spill)
		w.waited = p.now().Sub(w.since)
		close(w.ready)
	}
}

func (p *Pool) exceedsLocked(r Request) error {
	if r.ScanRingBytes > p.cfg.ScanRingBytes {
		return fmt.Errorf("%w: the request needs %d scan-ring bytes, the pool has %d in total; ask for less or raise the scan-ring budget",
			ErrExceedsCapacity, r.ScanRingBytes, p.cfg.ScanRingBytes)
	}
	if r.DeltaCacheBytes > p.cfg.DeltaCacheBytes {
		return fmt.Errorf("%w: the request needs %d delta-cache bytes, the pool has %d in total; ask for less or raise the delta-cache budget",
			ErrExceedsCapacity, r.DeltaCacheBytes, p.cfg.DeltaCacheBytes)
	}
	return nil
}

// Reconfigure changes the pool's budgets in place, while permits are held.
// It returns the error of cfg.Validate and leaves the pool unchanged if cfg
// is invalid; an unchanged cfg is a no-op.
//
// Permits already granted keep what they hold: shrinking a budget below what
// is held revokes nothing, it only makes new requests wait (or TryAcquire
// fail) until enough is released; the available amount reads as 0 meanwhile.
// Growing a budget grants queued requests that now fit. Queued requests that
// exceed the new totals fail with ErrExceedsCapacity. Switching spill slots
// between limited and unlimited affects new permits only: a permit keeps the
// SpillGrant it was given, and a counted slot released after the switch is
// counted back correctly.
func (p *Pool) Reconfigure(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.clone()
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.cfg
	if old.ScanRingBytes == cfg.ScanRingBytes && old.DeltaCacheBytes == cfg.DeltaCacheBytes &&
		(old.SpillSlots == nil) == (cfg.SpillSlots == nil) && old.spillTotal() == cfg.spillTotal() {
		// At most the queue bound changed; lowering it drops no waiter.
		p.cfg.MaxQueued = cfg.MaxQueued
		return nil
	}
	// Close the gate: lock-free acquirers in flight will see it move and
	// retry under the mutex, so none mixes the old and new configuration.
	p.gate.Add(gateEnter)
	p.floor[resScan].Store(p.scan.Add(int64(cfg.ScanRingBytes) - int64(old.ScanRingBytes)))
	p.floor[resDelta].Store(p.delta.Add(int64(cfg.DeltaCacheBytes) - int64(old.DeltaCacheBytes)))
	// When unlimited, the counted total is 0, so slots still held from a
	// limited configuration drive the counter negative and return it to 0.
	// Adding a negative delta in two's complement cannot borrow from the
	// claim count: the biased slot field stays positive (see claims.go).
	p.floor[resSpill].Store(spillField(p.claims.Add(uint64(cfg.spillTotal() - old.spillTotal()))))
	p.spillUnlimited.Store(cfg.SpillSlots == nil)
	p.cfg = cfg
	p.gate.Add(gateLeave)

	for e := p.queue.Front(); e != nil; {
		next := e.Next()
		w := e.Value.(*waiter)
		if err := p.exceedsLocked(w.req); err != nil {
			p.queue.Remove(e)
			p.gate.Add(gateLeave)
			w.err = err
			close(w.ready)
			p.denied.Add(1)
		}
		e = next
	}
	p.dispatchLocked()
	return nil
}

// Config returns the pool's current configuration.
func (p *Pool) Config() Config {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.clone()
}

// available reports a counter as seen by callers: never negative.
func available(a *atomic.Int64) uint64 {
	return uint64(max(0, a.Load()))
}

// ScanRingAvailable returns the scan-ring bytes that can be acquired now.
// It is 0, never negative, while a shrink leaves more held than the total.
func (p *Pool) ScanRingAvailable() uint64 { return available(&p.scan) }

// ScanRingTotal returns the scan-ring budget.
func (p *Pool) ScanRingTotal() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.ScanRingBytes
}

// DeltaCacheAvailable returns the delta-cache bytes that can be acquired now
// (0, never negative, after a shrink below what is held).
func (p *Pool) DeltaCacheAvailable() uint64 { return available(&p.delta) }

// DeltaCacheTotal returns the delta-cache budget.
func (p *Pool) DeltaCacheTotal() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.DeltaCacheBytes
}

// SpillSlotsAvailable returns the spill slots that can be acquired now and
// limited=true, or 0 and limited=false when spilling is unlimited.
func (p *Pool) SpillSlotsAvailable() (n int, limited bool) {
	if p.spillUnlimited.Load() {
		return 0, false
	}
	return int(max(0, p.spillAvailable())), true
}

// SpillSlotsTotal returns the number of spill slots and limited=true, or 0
// and limited=false when spilling is unlimited.
func (p *Pool) SpillSlotsTotal() (n int, limited bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cfg.SpillSlots == nil {
		return 0, false
	}
	return *p.cfg.SpillSlots, true
}
