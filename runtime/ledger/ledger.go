package ledger

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"
)

// Sentinel errors. Test with errors.Is.
var (
	// ErrUnavailable means nothing can be granted now; ask again later: the
	// "nothing available" answer to a worker.
	ErrUnavailable = errors.New("ledger: no VM available now; ask again later")
	// ErrStale means the ledger has no usage figure younger than StaleAfter
	// and grants nothing until one arrives (fail closed). It wraps
	// ErrUnavailable, so workers that only check ErrUnavailable ask again
	// later, which is right.
	ErrStale = fmt.Errorf("%w (usage figure is stale: check the usage source)", ErrUnavailable)
	// ErrTooLarge means the request asks for more VMs than Max: it could never
	// be granted, so it is refused at once instead of blocking the queue.
	ErrTooLarge = errors.New("ledger: request exceeds the ceiling's max; ask for fewer VMs or raise max")
	// ErrInvalidRequest means a Request had Count < 1, or TryRequest had no
	// WorkerID.
	ErrInvalidRequest = errors.New("ledger: invalid request")
	// ErrQueueFull means the request would have to wait and
	// Config.MaxQueued requests (and tickets) already do; it did not join
	// the queue. Ask again later.
	ErrQueueFull = errors.New("ledger: the queue of waiting requests is full; ask again later or raise max_queued")
	// ErrClaimEnded is returned by Confirm on a claim that already expired,
	// was cancelled, or retired; the VM (if started) is no longer covered by a
	// claim and must show up in the provider's figure.
	ErrClaimEnded = errors.New("ledger: claim has ended")
)

// Request asks for Count VMs (Count >= 1) on behalf of WorkerID.
type Request struct {
	WorkerID string
	Count    int
}

// Ledger guards one VM ceiling. It is safe for concurrent use.
//
// Invariant, enforced in grantLocked and nowhere else: a claim is granted only
// when the figure is fresh and providerActive + localClaims + Count <= Max,
// where localClaims sums every claim that still counts. A claim counts until it
// is cancelled, expires unconfirmed after ClaimTTL, or is confirmed and then
// retired by a figure taken strictly after the confirmation. So every VM a
// grant made possible is covered either by its claim or by the figure.
// (Restore re-creates claims granted by an earlier process; they count
// unconditionally, so the invariant holds across restarts too.)
//
// Fairness: waiting requests (Request callers and TryRequest tickets) form one
// FIFO queue and are served strictly head-of-line: a large request at the head
// blocks smaller ones behind it, so it is never starved.
type Ledger struct {
	clock Clock
	log   *slog.Logger

	mu  sync.Mutex
	cfg Config

	haveUsage      bool
	providerActive int
	lastUsageAt    time.Time // when the last accepted figure was taken
	lastErr        error     // last source error, cleared by a good figure

	nextID    uint64
	claims    map[ClaimID]*Claim // every claim that still counts
	local     int                // sum of Count over claims
	expiry    claimHeap          // unconfirmed claims by expiresAt
	confirmed []*Claim           // confirmed claims awaiting a later figure

	waiters *list.List         // of *waiter, FIFO
	tickets map[string]*waiter // TryRequest places, by WorkerID

	timer    Timer // wakes immediate-mode waiters at the next expiry
	timerAt  time.Time
	timerGen uint64

	stats Stats
}

// waiter is a queued request: a blocked Request call (ready != nil) or a
// TryRequest ticket (ready == nil) that its worker collects later.
type waiter struct {
	req     Request
	ready   chan struct{} // closed when claim is set or err is set
	claim   *Claim
	err     error
	elem    *list.Element // nil once out of the queue
	lastAsk time.Time     // tickets: when the worker last asked
}

// Option configures New.
type Option func(*Ledger)

// WithClock makes the ledger read time from c (default SystemClock()).
func WithClock(c Clock) Option { return func(l *Ledger) { l.clock = c } }

// WithFirstClaimID makes id the ledger's first claim ID (default 1). A daemon
// starts each process at a random ID, so an ID held by a client of an
// earlier process does not name an unrelated claim of this one.
func WithFirstClaimID(id ClaimID) Option { return func(l *Ledger) { l.nextID = uint64(id) - 1 } }

// WithLogger makes the ledger log to log (default: discard).
func WithLogger(log *slog.Logger) Option { return func(l *Ledger) { l.log = log } }

// New returns a ledger for cfg (defaults applied) or an error wrapping
// ErrInvalidConfig. It has no usage figure yet, so it grants nothing until
// ObserveUsage or Run delivers one.
func New(cfg Config, opts ...Option) (*Ledger, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Ledger{
		clock:   SystemClock(),
		log:     slog.New(slog.DiscardHandler),
		cfg:     cfg.WithDefaults(),
		claims:  make(map[ClaimID]*Claim),
		waiters: list.New(),
		tickets: make(map[string]*waiter),
	}
	for _, o := range opts {
		o(l)
	}
	return l, nil
}

// Config returns the active configuration, defaults applied.
func (l *Ledger) Config() Config {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cfg
}

// Reconfigure validates cfg and makes it active. Lowering Max revokes
// nothing: existing claims keep counting and new grants wait until usage
// falls below the new Max. Queued requests larger than the new Max fail with
// ErrTooLarge. A new ClaimTTL applies to claims granted afterwards. On error
// the ledger is unchanged.
func (l *Ledger) Reconfigure(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.WithDefaults()
	l.mu.Lock()
	defer l.mu.Unlock()
	if cfg == l.cfg {
		return nil
	}
	l.cfg = cfg
	for e := l.waiters.Front(); e != nil; {
		next := e.Next()
		if w := e.Value.(*waiter); w.req.Count > cfg.Max {
			l.failWaiterLocked(w, fmt.Errorf("%w (max lowered to %d, request was for %d)", ErrTooLarge, cfg.Max, w.req.Count))
		}
		e = next
	}
	now := l.clock.Now()
	l.sweepLocked(now)
	if cfg.Grant == GrantImmediate {
		l.grantWaitersLocked(now)
	}
	l.armTimerLocked(now)
	return nil
}

// Request grants Count VMs, waiting in FIFO order until it can. In
// GrantNextUsage mode it always waits for the next usage figure; in
// GrantImmediate mode it is granted at once when the queue is empty, the
// figure is fresh and there is room. If ctx ends first, Request returns
// ctx.Err() and leaves no claim or queue entry behind (a claim granted in the
// race is cancelled); only the counters remember it. A request larger than Max fails at once
// with ErrTooLarge, and one that would wait while MaxQueued requests wait
// with ErrQueueFull; neither joins the queue.
func (l *Ledger) Request(ctx context.Context, req Request) (*Claim, error) {
	if req.Count < 1 {
		return nil, fmt.Errorf("%w: count %d; ask for at least 1 VM", ErrInvalidRequest, req.Count)
	}
	l.mu.Lock()
	now := l.clock.Now()
	l.sweepLocked(now)
	if limit := l.cfg.Max; req.Count > limit {
		l.mu.Unlock()
		return nil, fmt.Errorf("%w (max %d, request for %d)", ErrTooLarge, limit, req.Count)
	}
	stale := l.staleLocked(now)
	if l.cfg.Grant == GrantImmediate && l.waiters.Len() == 0 && !stale && l.fitsLocked(req.Count) {
		c := l.grantLocked(req, now)
		l.mu.Unlock()
		return c, nil
	}
	if err := ctx.Err(); err != nil {
		l.mu.Unlock()
		return nil, err
	}
	if err := l.queueFullLocked(); err != nil {
		l.mu.Unlock()
		return nil, err
	}
	if stale {
		l.stats.DeniedStale++
	}
	w := &waiter{req: req, ready: make(chan struct{})}
	l.enqueueLocked(w, now)
	l.mu.Unlock()

	select {
	case <-w.ready:
		return w.claim, w.err
	case <-ctx.Done():
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-w.ready:
		// Granted (or failed) while ctx ended: give the claim back so the
		// caller's error leaves no trace.
		if w.claim != nil {
			l.cancelLocked(w.claim, l.clock.Now())
		}
	default:
		l.removeWaiterLocked(w)
		if l.cfg.Grant == GrantImmediate {
			now := l.clock.Now()
			l.grantWaitersLocked(now) // the head may have been what blocked others
			l.armTimerLocked(now)
		}
	}
	return nil, ctx.Err()
}

// TryRequest never blocks. It returns a claim when one is ready for
// req.WorkerID, and otherwise ErrUnavailable (or ErrStale, which wraps it):
// "nothing available, ask later".
//
// A refused TryRequest leaves a ticket in the FIFO queue under WorkerID, so a
// worker that asks again later keeps its place: when the ticket is granted
// (by the next figure in GrantNextUsage mode) the claim starts counting at
// once and is handed over on the worker's next TryRequest. A ticket whose
// worker has not asked for ClaimTTL is dropped when it reaches the head of the
// queue; a granted ticket that is never collected expires like any
// unconfirmed claim. One worker holds at most one ticket; a later call with a
// different Count does not change it. A new ticket is refused with
// ErrQueueFull while MaxQueued requests wait.
func (l *Ledger) TryRequest(req Request) (*Claim, error) {
	if req.Count < 1 {
		return nil, fmt.Errorf("%w: count %d; ask for at least 1 VM", ErrInvalidRequest, req.Count)
	}
	if req.WorkerID == "" {
		return nil, fmt.Errorf("%w: TryRequest needs a WorkerID to keep the worker's place in the queue", ErrInvalidRequest)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	l.sweepLocked(now)
	if w, ok := l.tickets[req.WorkerID]; ok {
		w.lastAsk = now
		if w.claim == nil && w.err == nil {
			return nil, l.refusalLocked(now)
		}
		delete(l.tickets, req.WorkerID)
		if w.err != nil {
			return nil, w.err
		}
		if w.claim.state == claimCounting || w.claim.state == claimConfirmed {
			return w.claim, nil
		}
		// The grant lapsed before the worker came back; queue afresh below.
	}
	if req.Count > l.cfg.Max {
		return nil, fmt.Errorf("%w (max %d, request for %d)", ErrTooLarge, l.cfg.Max, req.Count)
	}
	stale := l.staleLocked(now)
	if l.cfg.Grant == GrantImmediate && l.waiters.Len() == 0 && !stale && l.fitsLocked(req.Count) {
		return l.grantLocked(req, now), nil
	}
	if err := l.queueFullLocked(); err != nil {
		return nil, err
	}
	if stale {
		l.stats.DeniedStale++
	}
	w := &waiter{req: req, lastAsk: now}
	l.tickets[req.WorkerID] = w
	l.enqueueLocked(w, now)
	return nil, l.refusalLocked(now)
}

// queueFullLocked returns ErrQueueFull when MaxQueued requests wait.
func (l *Ledger) queueFullLocked() error {
	if limit := l.cfg.MaxQueued; limit > 0 && l.waiters.Len() >= limit {
		l.stats.DeniedQueueFull++
		return fmt.Errorf("%w (%d waiting)", ErrQueueFull, l.waiters.Len())
	}
	return nil
}

func (l *Ledger) refusalLocked(now time.Time) error {
	if l.staleLocked(now) {
		return ErrStale
	}
	return ErrUnavailable
}

// ObserveUsage records a usage figure: n VMs active at the provider, as taken
// at time at (zero means now; a future time is clamped to now). Run feeds it
// from a UsageSource; an operator's pushed figure goes here directly. A figure
// not newer than the last accepted one is ignored and returns nil. Accepting a
// figure retires confirmed claims confirmed strictly before at, then grants
// waiting requests that fit, in FIFO order. A figure outside 0..MaxCount is
// refused with an error and changes nothing.
func (l *Ledger) ObserveUsage(n int, at time.Time) error {
	if n < 0 || n > MaxCount {
		return fmt.Errorf("ledger: usage figure %d is out of range; the source must report a count in 0..%d", n, MaxCount)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	if at.IsZero() || at.After(now) {
		at = now
	}
	if l.haveUsage && !at.After(l.lastUsageAt) {
		return nil
	}
	l.haveUsage = true
	l.providerActive = n
	l.lastUsageAt = at
	l.lastErr = nil
	l.stats.Figures++
	kept := l.confirmed[:0]
	for _, c := range l.confirmed {
		if c.confirmedAt.Before(at) {
			l.endLocked(c, claimRetired)
			l.stats.Retired++
		} else {
			kept = append(kept, c)
		}
	}
	clear(l.confirmed[len(kept):])
	l.confirmed = kept
	l.sweepLocked(now)
	l.grantWaitersLocked(now)
	l.armTimerLocked(now)
	return nil
}

// recordSourceError notes a failed poll; the figure ages toward stale.
func (l *Ledger) recordSourceError(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastErr = err
	l.stats.SourceErrors++
}

// Lookup returns the claim with id while it still counts, so an API can
// confirm or cancel by ID. An ended claim is not found.
func (l *Ledger) Lookup(id ClaimID) (*Claim, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweepLocked(l.clock.Now())
	c, ok := l.claims[id]
	return c, ok
}

// Status is a snapshot of a ledger.
type Status struct {
	Max            int
	Grant          GrantMode
	ProviderActive int // last accepted figure (0 before the first)
	LocalClaims    int // VMs covered by claims that still count
	Effective      int // ProviderActive + LocalClaims
	Available      int // Max - Effective, floored at 0; 0 while Stale
	Queued         int // waiting requests and tickets
	LastUsageAt    time.Time
	Stale          bool   // no figure younger than StaleAfter: granting nothing
	LastError      string // last source error since the last good figure, or ""
}

// Status reports the ledger's current state (expiring due claims first).
func (l *Ledger) Status() Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	l.sweepLocked(now)
	s := Status{
		Max:            l.cfg.Max,
		Grant:          l.cfg.Grant,
		ProviderActive: l.providerActive,
		LocalClaims:    l.local,
		Effective:      addSat(l.providerActive, l.local),
		Queued:         l.waiters.Len(),
		LastUsageAt:    l.lastUsageAt,
		Stale:          l.staleLocked(now),
	}
	if !s.Stale && s.Effective < s.Max {
		s.Available = s.Max - s.Effective
	}
	if l.lastErr != nil {
		s.LastError = l.lastErr.Error()
	}
	return s
}

// Stats are cumulative counters since New.
type Stats struct {
	Granted            uint64 // claims created
	Queued             uint64 // requests that had to wait (Request calls and new tickets)
	ExpiredUnconfirmed uint64 // claims that lapsed after ClaimTTL without Confirm
	DeniedStale        uint64 // requests that arrived while the figure was stale
	DeniedQueueFull    uint64 // requests refused because MaxQueued requests waited
	SourceErrors       uint64 // failed polls
	Figures            uint64 // usage figures accepted
	Confirmed          uint64
	Retired            uint64 // confirmed claims retired by a later figure
	Cancelled          uint64
	Restored           uint64 // claims re-created by Restore after a restart
}

// Stats returns the counters.
func (l *Ledger) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweepLocked(l.clock.Now())
	return l.stats
}

func (l *Ledger) staleLocked(now time.Time) bool {
	return !l.haveUsage || now.Sub(l.lastUsageAt) > l.cfg.StaleAfter
}

// fitsLocked reports providerActive + local + count <= Max. It is written
// as subtractions from Max so that no figure, however large, can wrap the
// sum around and make a full ceiling look empty: every operand is >= 0 and
// each difference is taken only when it cannot go below 0.
func (l *Ledger) fitsLocked(count int) bool {
	room := l.cfg.Max
	for _, n := range [...]int{count, l.local, l.providerActive} {
		if n > room {
			return false
		}
		room -= n
	}
	return true
}

// addSat returns a + b for a, b >= 0, saturating at the largest int.
func addSat(a, b int) int {
	if a > math.MaxInt-b {
		return math.MaxInt
	}
	return a + b
}

// grantLocked creates a counting claim. Callers have checked freshness and
// fitsLocked; this is the only place claims are born.
func (l *Ledger) grantLocked(req Request, now time.Time) *Claim {
	l.nextID++
	for l.nextID == 0 || l.claims[ClaimID(l.nextID)] != nil {
		l.nextID++ // skip IDs taken by restored claims (and 0, never an ID)
	}
	c := &Claim{
		l:         l,
		id:        ClaimID(l.nextID),
		workerID:  req.WorkerID,
		count:     req.Count,
		grantedAt: now,
		expiresAt: now.Add(l.cfg.ClaimTTL),
	}
	l.claims[c.id] = c
	l.local += c.count
	l.expiry.push(c)
	l.stats.Granted++
	return c
}

func (l *Ledger) enqueueLocked(w *waiter, now time.Time) {
	w.elem = l.waiters.PushBack(w)
	l.stats.Queued++
	l.armTimerLocked(now)
}

func (l *Ledger) removeWaiterLocked(w *waiter) {
	if w.elem != nil {
		l.waiters.Remove(w.elem)
		w.elem = nil
	}
}

func (l *Ledger) failWaiterLocked(w *waiter, err error) {
	l.removeWaiterLocked(w)
	w.err = err
	if w.ready != nil {
		close(w.ready)
	}
}

// grantWaitersLocked grants from the head of the queue while the head fits.
func (l *Ledger) grantWaitersLocked(now time.Time) {
	if l.staleLocked(now) {
		return
	}
	for e := l.waiters.Front(); e != nil; e = l.waiters.Front() {
		w := e.Value.(*waiter)
		if w.ready == nil && now.Sub(w.lastAsk) > l.cfg.ClaimTTL {
			// An abandoned ticket: its worker stopped asking.
			l.removeWaiterLocked(w)
			delete(l.tickets, w.req.WorkerID)
			continue
		}
		if !l.fitsLocked(w.req.Count) {
			return
		}
		l.removeWaiterLocked(w)
		w.claim = l.grantLocked(w.req, now)
		if w.ready != nil {
			close(w.ready)
		}
	}
}

// sweepLocked ends unconfirmed claims whose TTL has passed.
func (l *Ledger) sweepLocked(now time.Time) {
	for len(l.expiry) > 0 && !l.expiry[0].expiresAt.After(now) {
		c := l.expiry[0]
		l.endLocked(c, claimExpired)
		l.stats.ExpiredUnconfirmed++
		l.log.Debug("ledger: claim expired unconfirmed", "claim", c.id, "worker", c.workerID, "count", c.count)
	}
}

// endLocked stops c counting and forgets it.
func (l *Ledger) endLocked(c *Claim, state claimState) {
	if c.heapIndex >= 0 {
		l.expiry.remove(c.heapIndex)
	}
	delete(l.claims, c.id)
	l.local -= c.count
	c.state = state
}

func (l *Ledger) cancelLocked(c *Claim, now time.Time) {
	if c.state != claimCounting {
		return
	}
	l.endLocked(c, claimCancelled)
	l.stats.Cancelled++
	if l.cfg.Grant == GrantImmediate {
		l.grantWaitersLocked(now)
		l.armTimerLocked(now)
	}
}

// armTimerLocked keeps one clock timer pending for the earliest claim expiry
// while immediate-mode requests wait, so an expiry grants them without
// waiting for the next figure. Other modes and an empty queue need no timer:
// expiry is applied lazily by every operation.
func (l *Ledger) armTimerLocked(now time.Time) {
	want := l.cfg.Grant == GrantImmediate && l.waiters.Len() > 0 && len(l.expiry) > 0
	if !want {
		if l.timer != nil {
			l.timer.Stop()
			l.timer = nil
		}
		return
	}
	at := l.expiry[0].expiresAt
	if l.timer != nil && l.timerAt.Equal(at) {
		return
	}
	if l.timer != nil {
		l.timer.Stop()
	}
	l.timerGen++
	gen := l.timerGen
	l.timerAt = at
	l.timer = l.clock.AfterFunc(at.Sub(now), func() { l.onTimer(gen) })
}

func (l *Ledger) onTimer(gen uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if gen != l.timerGen {
		return
	}
	l.timer = nil
	now := l.clock.Now()
	l.sweepLocked(now)
	if l.cfg.Grant == GrantImmediate {
		l.grantWaitersLocked(now)
	}
	l.armTimerLocked(now)
}
