package pickup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// maxBatch is SQS's receive and batch limit.
const maxBatch = 10

// Manager is the Pickup Manager of one runner class: it serves concurrent
// Pickup requests from the class queue, classifies messages against each
// request's Requirements, claims matches in the instance table and gives
// misfits back. It is safe for concurrent use.
//
// Requests share the queue through a leader: the goroutine of one waiting
// request receives a batch sized to the number of waiting requests (at most
// 10) and classifies every message against all of them, first come first
// served; each request claims its match in its own goroutine, so claims run
// in parallel. When the leader's own request is served it hands the role to
// the next waiting request. No goroutine outlives a call.
type Manager struct {
	q     Queue
	t     InstanceTable
	log   *slog.Logger
	clock Clock
	depth func(context.Context) (int, error)

	cfg atomic.Pointer[Config]

	mu      sync.Mutex
	waiting []*waiter // requests that need a message, in arrival order
	leader  *waiter   // the request whose goroutine receives; nil when none
	// settled are lease-mode messages whose claim committed: the leader
	// deletes them with its next batch, saving a call per pass-on. Whoever
	// leaves the manager without a leader deletes them at once.
	settled []Message
	// held are misfits kept received for later requests, oldest first
	// (hold.go). No held entry meets a waiting request: a request checks
	// them when it joins, a misfit is checked against every waiting request
	// before it is held.
	held      []held
	holdTimer *time.Timer // gives back what is held too long; armed while held is non-empty
	// owners are the retry keys with a Pickup in progress: a second call
	// with the same owner waits for the first.
	owners map[string]chan struct{}
	// returning counts give-backs and scan receives outside the leader's
	// rounds: messages that are in flight but neither visible nor held. An
	// empty receive is confirmed only once they are done.
	returning inflight
	// withdrawn are instances Withdraw took out of the pool, until when
	// their messages are still deleted on sight (withdraw.go).
	withdrawn map[string]time.Time

	stats counters
	lat   latencies
}

// NewManager returns a manager for the class cfg describes, receiving from q
// and claiming in t. It fails only on an invalid cfg.
func NewManager(cfg Config, q Queue, t InstanceTable, opts Options) (*Manager, error) {
	if q == nil || t == nil {
		return nil, errors.New("pickup: NewManager needs a Queue and an InstanceTable")
	}
	m := &Manager{q: q, t: t, log: opts.Logger, clock: opts.Clock, depth: opts.Depth, owners: map[string]chan struct{}{}}
	if m.log == nil {
		m.log = slog.Default()
	}
	if m.clock == nil {
		m.clock = wallClock{}
	}
	if err := m.Reconfigure(cfg); err != nil {
		return nil, err
	}
	return m, nil
}

// Reconfigure validates cfg and makes it the manager's configuration for
// every decision from now on; requests in progress keep their frequency
// maps. The class name cannot change (a manager serves one queue). On error
// the old configuration stays.
func (m *Manager) Reconfigure(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	if old := m.cfg.Load(); old != nil && old.Class != cfg.Class {
		return fmt.Errorf("pickup: cannot reconfigure class %q as %q: build a new Manager for another class", old.Class, cfg.Class)
	}
	m.cfg.Store(&cfg)
	return nil
}

func (m *Manager) config() *Config { return m.cfg.Load() }

// Config returns the configuration in effect, defaults applied.
func (m *Manager) Config() Config {
	c := *m.config()
	c.InstanceTypes = append([]string(nil), c.InstanceTypes...)
	return c
}

type waiter struct {
	req   Requirements
	owner string
	start time.Time
	ch    chan event // capacity 1: see send
	// releases tracks the give-backs of the rounds this request led.
	releases sync.WaitGroup

	// Guarded by Manager.mu.
	listed bool
	seen   map[string]int // instanceId -> misfit sightings in this request
}

type eventKind int

const (
	evLead     eventKind = iota // you receive for everyone now
	evAssigned                  // claim this candidate
	evDone                      // the request ends with err
)

type event struct {
	kind eventKind
	cand candidate
	err  error
}

// candidate is a message that passed classification for one request.
type candidate struct {
	msg   Message
	entry Entry
}

// send delivers ev. A listed waiter holds at most an evLead, and only the
// leader sends evAssigned/evDone (to waiters it unlists, never to a waiter
// with a pending evLead, since that waiter would be the leader): one slot
// suffices, and a full channel is a bug.
func (w *waiter) send(ev event) {
	select {
	case w.ch <- ev:
	default:
		panic("pickup: internal error: second event for a waiting request")
	}
}

// Pickup finds, claims and returns an idle instance of the class that meets
// req, with owner recorded as its claimant. owner is the request's retry
// key: when owner already holds a claimed instance of the class that meets
// req, Pickup returns that instance instead of claiming another, so a
// request cut off after its claim committed (a dropped connection, a
// restarted daemon) is retried safely with the same owner. Calls with the
// same owner run one after the other. The returned instance is claimed:
// confirm it (Confirm, when Config.ClaimTTL is set) and give it back with
// Release.
//
// Errors: an *ExhaustedError (errors.Is ErrExhausted) when the pool has
// nothing for req, after waiting up to req.Wait for something to appear;
// ctx.Err() when ctx ends first, in which case any message the request held
// is given back and no claim is left behind; otherwise a backend error that
// outlasted the retries, after which the message it concerned has been
// given back. Once the claim commits, Pickup returns the instance even if
// ctx has ended meanwhile.
func (m *Manager) Pickup(ctx context.Context, req Requirements, owner string) (Instance, error) {
	if err := req.Validate(); err != nil {
		return Instance{}, err
	}
	if owner == "" {
		return Instance{}, errors.New("pickup: owner is empty: name the claimant (e.g. the workflow run) so the claim can be released")
	}
	if err := ctx.Err(); err != nil {
		return Instance{}, err
	}
	unlock, err := m.lockOwner(ctx, owner)
	if err != nil {
		return Instance{}, err
	}
	defer unlock()
	if inst, ok, err := m.resume(ctx, req, owner); err != nil || ok {
		return inst, err
	}
	deadline := m.clock.Now().Add(req.Wait)
	for {
		inst, err := m.pickupOnce(ctx, req, owner)
		var ex *ExhaustedError
		if !errors.As(err, &ex) {
			return inst, err
		}
		left := deadline.Sub(m.clock.Now())
		if left <= 0 {
			if ex.Kind == Local {
				m.stats.exhaustedLocal.Add(1)
			} else {
				m.stats.exhaustedGlobal.Add(1)
			}
			return Instance{}, err
		}
		if err := m.sleep(ctx, min(left, waitPoll)); err != nil {
			return Instance{}, err
		}
	}
}

// lockOwner waits until no other Pickup of owner is in progress and marks
// one as in progress; the returned func ends it.
func (m *Manager) lockOwner(ctx context.Context, owner string) (func(), error) {
	m.mu.Lock()
	for {
		busy, ok := m.owners[owner]
		if !ok {
			break
		}
		m.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		m.mu.Lock()
	}
	mine := make(chan struct{})
	m.owners[owner] = mine
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		delete(m.owners, owner)
		m.mu.Unlock()
		close(mine)
	}, nil
}

// resume returns the claimed instance of the class owner already holds
// that meets req: the answer to a retried request. It reads the instance
// table, so it also finds claims made by an earlier daemon.
func (m *Manager) resume(ctx context.Context, req Requirements, owner string) (Instance, bool, error) {
	cfg := m.config()
	var claims []Instance
	err := m.retry(ctx, cfg, "claimed-by", func() error {
		var err error
		claims, err = m.t.ClaimedBy(ctx, cfg.Class, owner)
		return err
	})
	if err != nil {
		return Instance{}, false, fmt.Errorf("pickup: looking up the claims of %q in class %q failed; retry the pickup with the same owner later: %w", owner, cfg.Class, err)
	}
	for _, inst := range claims {
		if inst.State == StateClaimed && inst.Owner == owner && req.Matches(EntryFor(inst)) {
			m.stats.resumed.Add(1)
			return inst, true, nil
		}
	}
	return Instance{}, false, nil
}

// pickupOnce is one attempt of Pickup: it ends with a claimed instance, an
// error, or an *ExhaustedError.
func (m *Manager) pickupOnce(ctx context.Context, req Requirements, owner string) (Instance, error) {
	w := &waiter{req: req, owner: owner, start: m.clock.Now(), ch: make(chan event, 1)}
	defer w.releases.Wait()
	for {
		m.join(w)
		ev, err := m.await(ctx, w)
		if err != nil {
			return Instance{}, err
		}
		if ev.kind == evDone {
			return Instance{}, ev.err
		}
		inst, err := m.claim(ctx, w, ev.cand)
		if errors.Is(err, errStale) {
			if err := ctx.Err(); err != nil {
				return Instance{}, err
			}
			continue // the hint was stale: pick again
		}
		return inst, err
	}
}

// join assigns w a held misfit that meets it, or else lists w as waiting,
// making it the leader when there is none.
func (m *Manager) join(w *waiter) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h, ok := m.takeHeldLocked(w.req); ok {
		m.stats.passed.Add(1)
		w.send(event{kind: evAssigned, cand: candidate{msg: h.msg, entry: h.entry}})
		return
	}
	w.listed = true
	m.waiting = append(m.waiting, w)
	if m.leader == nil {
		m.leader = w
		w.send(event{kind: evLead})
	}
}

// unlistLocked removes w from the waiting list.
func (m *Manager) unlistLocked(w *waiter) {
	w.listed = false
	for i, x := range m.waiting {
		if x == w {
			m.waiting = append(m.waiting[:i], m.waiting[i+1:]...)
			return
		}
	}
}

// handOffLocked makes the first waiting request other than skip the
// leader. With nobody to lead it returns the settled messages, which the
// caller must delete (flushSettled) after unlocking.
func (m *Manager) handOffLocked(skip *waiter) []Message {
	m.leader = nil
	for _, x := range m.waiting {
		if x != skip {
			m.leader = x
			x.send(event{kind: evLead})
			return nil
		}
	}
	s := m.settled
	m.settled = nil
	return s
}

// settle deletes msgs (del: settled messages nobody else will delete) or
// makes them visible again at once (misfits given back), on a context
// detached from ctx's cancellation and bounded by ReleaseTimeout.
func (m *Manager) settle(ctx context.Context, cfg *Config, msgs []Message, del bool) {
	if len(msgs) == 0 {
		return
	}
	rel := releaseCtx(ctx, cfg)
	defer rel.cancel()
	m.batch(rel.ctx, cfg, msgs, 0, del)
}

// await blocks until w is assigned a candidate or done, leading the
// receives while it is the leader.
func (m *Manager) await(ctx context.Context, w *waiter) (event, error) {
	for {
		select {
		case ev := <-w.ch:
			if ev.kind == evLead {
				m.lead(ctx, w)
				continue
			}
			return ev, nil
		case <-ctx.Done():
			m.mu.Lock()
			if w.listed {
				m.unlistLocked(w)
				var settled []Message
				if m.leader == w {
					settled = m.handOffLocked(w)
				}
				m.mu.Unlock()
				m.settle(ctx, m.config(), settled, true)
				return event{}, ctx.Err()
			}
			m.mu.Unlock()
			// The leader unlisted w and sent (or is about to send under
			// the lock we just held) its outcome: take it, and give back
			// what it held.
			if ev := <-w.ch; ev.kind == evAssigned {
				_ = m.giveBack(ctx, m.config(), ev.cand, "") // no claim was attempted: nothing to undo
			}
			return event{}, ctx.Err()
		}
	}
}

// lead receives and classifies rounds of messages until w no longer waits
// or ctx ends, then hands the role on.
//
// A round's give-back calls run while the next round receives (they concern
// messages that are in flight, so the next receive cannot see them anyway)
// and while the leader claims its own match; at most one round's
// give-backs are outstanding per leader, and Pickup waits for them before
// it returns.
func (m *Manager) lead(ctx context.Context, w *waiter) {
	for {
		m.mu.Lock()
		if !w.listed || ctx.Err() != nil {
			settled := m.handOffLocked(w)
			m.mu.Unlock()
			m.settle(ctx, m.config(), settled, true)
			return
		}
		n := min(len(m.waiting), maxBatch)
		m.mu.Unlock()
		m.round(ctx, n, &w.releases)
	}
}

// round receives up to n messages and decides each; the give-backs go to
// releases once the previous round's are done.
func (m *Manager) round(ctx context.Context, n int, releases *sync.WaitGroup) {
	cfg := m.config()
	msgs, err := m.receive(ctx, cfg, n, releases)
	if err != nil {
		if ctx.Err() == nil {
			m.endAll(fmt.Errorf("pickup: receiving from class %q's queue failed %d times; retry later: %w", cfg.Class, cfg.ClaimAttempts, err), nil)
		}
		return
	}
	if len(msgs) == 0 {
		m.endAll(nil, &ExhaustedError{Class: cfg.Class, Kind: Global})
		return
	}
	rel := releaseCtx(ctx, cfg)
	if cfg.Mode == ModeDelete {
		// Seed 000 step 2: delete at once; from here the message lives
		// only in memory. A message whose delete failed is left alone: it
		// reappears when its visibility times out.
		failed := m.batch(rel.ctx, cfg, msgs, 0, true)
		msgs = deleteFunc(msgs, func(msg Message) bool { return failed[msg.ReceiptHandle] })
	}

	now := m.clock.Now()
	hold := cfg.HoldMisfits > 0
	var discards, requeues, spare []Message
	var discarded []*DiscardError
	m.mu.Lock()
	deletes := m.settled
	m.settled = nil
	returns := m.expireHeldLocked(now) // held misfits go back at once, in either mode
	for _, msg := range msgs {
		e, d := m.admit(cfg, msg, now)
		if d != nil {
			discards = append(discards, msg)
			discarded = append(discarded, d)
			continue
		}
		if len(m.waiting) == 0 { // everyone left: not a decision
			if hold {
				ret, dup := m.holdLocked(cfg, msg, e, now, true)
				returns, deletes = append(returns, ret...), append(deletes, dup...)
			} else {
				spare = append(spare, msg)
			}
			continue
		}
		if w := m.firstMatchLocked(e); w != nil {
			m.unlistLocked(w)
			m.stats.passed.Add(1)
			w.send(event{kind: evAssigned, cand: candidate{msg: msg, entry: e}})
			continue
		}
		m.stats.requeued.Add(1)
		m.sightLocked(cfg, e.InstanceID)
		if hold {
			ret, dup := m.holdLocked(cfg, msg, e, now, true)
			returns, deletes = append(returns, ret...), append(deletes, dup...)
		} else {
			requeues = append(requeues, msg)
		}
	}
	m.mu.Unlock()

	for i, d := range discarded {
		m.log.Warn("pickup: discarded message", "class", cfg.Class, "reason", d.Reason.String(),
			"instance", d.InstanceID, "detail", d.Detail, "message_id", discards[i].ID)
	}
	releases.Wait()
	releases.Go(func() {
		defer rel.cancel()
		var wg sync.WaitGroup
		wg.Go(func() { m.batch(rel.ctx, cfg, returns, 0, false) })
		if cfg.Mode == ModeLease {
			wg.Go(func() { m.batch(rel.ctx, cfg, append(deletes, discards...), 0, true) })
			wg.Go(func() { m.batch(rel.ctx, cfg, requeues, cfg.RequeueDelay, false) })
			wg.Go(func() { m.batch(rel.ctx, cfg, spare, 0, false) })
		} else {
			// Settled messages from before a switch to delete mode.
			wg.Go(func() { m.batch(rel.ctx, cfg, deletes, 0, true) })
			for _, msg := range requeues {
				wg.Go(func() { m.resend(rel.ctx, cfg, msg, cfg.RequeueDelay) })
			}
			for _, msg := range spare {
				wg.Go(func() { m.resend(rel.ctx, cfg, msg, 0) })
			}
		}
		wg.Wait()
	})
}

func (m *Manager) firstMatchLocked(e Entry) *waiter {
	for _, w := range m.waiting {
		if w.req.Matches(e) {
			return w
		}
	}
	return nil
}

// sightLocked records a misfit sighting of id in every waiting request and
// ends those it exhausts locally. The map lives in the request and dies with
// it; MaxTracked bounds it.
func (m *Manager) sightLocked(cfg *Config, id string) {
	for i := 0; i < len(m.waiting); {
		w := m.waiting[i]
		if w.seen == nil {
			w.seen = make(map[string]int)
		}
		n, known := w.seen[id]
		var ex *ExhaustedError
		switch {
		case !known && len(w.seen) >= cfg.MaxTracked:
			ex = &ExhaustedError{Class: cfg.Class, Kind: Local, Seen: len(w.seen)}
		case n+1 > cfg.LocalExhaustion:
			ex = &ExhaustedError{Class: cfg.Class, Kind: Local, InstanceID: id, Seen: n + 1}
		default:
			w.seen[id] = n + 1
			i++
			continue
		}
		m.unlistLocked(w)
		w.send(event{kind: evDone, err: ex})
	}
}

// endAll ends every waiting request, with err or, when err is nil, with ex.
func (m *Manager) endAll(err error, ex *ExhaustedError) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range m.waiting {
		w.listed = false
		if ex != nil {
			w.send(event{kind: evDone, err: ex})
		} else {
			w.send(event{kind: evDone, err: err})
		}
	}
	m.waiting = m.waiting[:0]
}

// receive receives up to n messages; an empty short poll is confirmed by a
// second receive before it counts as empty (SQS short polls sample only
// some servers and may come back empty while the queue is not). Either way
// an empty result is confirmed only after the previous round's give-backs,
// and those of held misfits, have landed, so that messages this manager is
// handing back count.
func (m *Manager) receive(ctx context.Context, cfg *Config, n int, releases *sync.WaitGroup) ([]Message, error) {
	msgs, err := m.receiveRetry(ctx, cfg, n, cfg.ReceiveWait)
	if err != nil || len(msgs) > 0 {
		return msgs, err
	}
	releases.Wait()
	m.returning.wait(ctx)
	wait := cfg.confirmWait()
	if cfg.ReceiveWait >= time.Second {
		wait = 0 // the first receive was a long poll; just recheck
	}
	return m.receiveRetry(ctx, cfg, n, wait)
}

func (m *Manager) receiveRetry(ctx context.Context, cfg *Config, n int, wait time.Duration) ([]Message, error) {
	var msgs []Message
	err := m.retry(ctx, cfg, "receive", func() error {
		var err error
		msgs, err = m.q.Receive(ctx, n, cfg.Visibility, wait)
		if err != nil {
			m.stats.receiveErrors.Add(1)
		}
		return err
	})
	return msgs, err
}

// retry runs f until it succeeds, ctx ends or cfg.ClaimAttempts attempts
// failed, sleeping an exponential backoff between attempts.
func (m *Manager) retry(ctx context.Context, cfg *Config, what string, f func() error) error {
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil {
			return nil
		}
		if p, ok := err.(permanent); ok {
			return p.error
		}
		if ctx.Err() != nil {
			return err
		}
		if attempt >= cfg.ClaimAttempts {
			return err
		}
		m.log.Warn("pickup: backend call failed; retrying", "class", cfg.Class, "call", what, "attempt", attempt, "err", err)
		if m.sleep(ctx, backoff(cfg, attempt)) != nil {
			return err
		}
	}
}

// permanent marks an error that retry returns at once, unwrapped.
type permanent struct{ error }

func backoff(cfg *Config, attempt int) time.Duration {
	return cfg.Backoff << min(attempt-1, 8)
}

func (m *Manager) sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-m.clock.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// detached is a context for calls that give messages back: they must run
// even when the request's context has ended, bounded by ReleaseTimeout.
type detached struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func releaseCtx(ctx context.Context, cfg *Config) detached {
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ReleaseTimeout)
	return detached{c, cancel}
}

// batch deletes msgs (del) or changes their visibility to timeout, in
// batches of 10, retrying entries that failed for reasons other than a
// stale handle. It returns the handles that did not succeed; a failure is
// logged and counted but harmless in lease mode: the message reappears when
// its visibility times out.
func (m *Manager) batch(ctx context.Context, cfg *Config, msgs []Message, timeout time.Duration, del bool) map[string]bool {
	var failed map[string]bool
	for len(msgs) > 0 {
		chunk := msgs[:min(len(msgs), maxBatch)]
		msgs = msgs[len(chunk):]
		pending := make([]string, len(chunk))
		for i, msg := range chunk {
			pending[i] = msg.ReceiptHandle
		}
		var last map[string]error
		_ = m.retry(ctx, cfg, "batch", func() error {
			var err error
			if del {
				err = m.q.DeleteBatch(ctx, pending)
			} else {
				err = m.q.ChangeVisibilityBatch(ctx, pending, timeout)
			}
			last = nil
			if err == nil {
				pending = nil
				return nil
			}
			var be *BatchError
			if !errors.As(err, &be) {
				last = make(map[string]error, len(pending))
				for _, h := range pending {
					last[h] = err
				}
				return err
			}
			last = be.Failed
			pending = pending[:0]
			for h, cause := range be.Failed {
				if !errors.Is(cause, ErrStaleHandle) {
					pending = append(pending, h)
				}
			}
			if len(pending) == 0 {
				return nil
			}
			return err
		})
		for h, cause := range last {
			if failed == nil {
				failed = make(map[string]bool)
			}
			failed[h] = true
			if !errors.Is(cause, ErrStaleHandle) {
				m.stats.releaseErrors.Add(1)
				m.log.Warn("pickup: batch call failed; the message reappears after its visibility timeout",
					"class", cfg.Class, "delete", del, "err", cause)
			}
		}
	}
	return failed
}

// resend puts a delete-mode message back after the requeue delay. If every
// attempt fails the runner is lost from the queue: the weakness of delete
// mode, logged at error level.
func (m *Manager) resend(ctx context.Context, cfg *Config, msg Message, delay time.Duration) {
	err := m.retry(ctx, cfg, "send", func() error { return m.q.Send(ctx, msg.Body, delay) })
	if err != nil {
		m.stats.releaseErrors.Add(1)
		m.log.Error("pickup: re-sending a deleted message failed; the idle runner is no longer in the queue (delete mode); Offer it again",
			"class", cfg.Class, "message_id", msg.ID, "err", err)
	}
}

func deleteFunc(msgs []Message, drop func(Message) bool) []Message {
	out := msgs[:0]
	for _, msg := range msgs {
		if !drop(msg) {
			out = append(out, msg)
		}
	}
	return out
}

// admit parses msg's entry and checks it against the class; a message to
// discard is counted under its reason and answered with why.
func (m *Manager) admit(cfg *Config, msg Message, now time.Time) (Entry, *DiscardError) {
	e, d := validEntry(cfg, msg.Body, now)
	if d == nil && m.withdrawnLocked(e.InstanceID, now) {
		d = &DiscardError{Reason: ReasonWithdrawn, InstanceID: e.InstanceID, Detail: "the instance was taken out of the pool to be terminated"}
	}
	if d != nil {
		m.stats.discarded[d.Reason].Add(1)
		return Entry{}, d
	}
	return e, nil
}
