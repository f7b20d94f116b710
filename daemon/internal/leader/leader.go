package leader

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/daemon/internal/httpapi"
	"github.com/rpdhq/rpd/runtime/pools"
)

// grantMargin is how long before its lease runs out a leader stops
// granting: a leader that could not renew for lease − grantMargin (by its
// own monotonic clock, counted from when it sent its last successful
// renewal) writes nothing more, so a standby whose clock runs up to
// grantMargin ahead of the leader's still takes over only after the last
// grant. Fencing makes a grant past that point fail anyway; the margin
// keeps the stale leader from even trying.
const grantMargin = time.Second

// ErrSteppedDown is what Daemon.Run returns when the daemon lost the
// leadership of its stack (another daemon took the lease while this one
// was paused, partitioned or could not renew): it drained and closed, and
// holds nothing. Start a new Daemon: it comes back as a standby.
var ErrSteppedDown = errors.New("lost the leadership of the stack; stepped down")

// elector holds (or waits for) the stack's leader lease. The leader renews
// every renew; a standby tries to take the lease every renew, and at the
// instant the lease it saw runs out. Only the leader arbitrates grants,
// and only while leading() (epoch > 0 and its lease − grantMargin not yet
// run out): every grant record write goes through leaderPools or
// leaderGrants, which fence it with the epoch.
type Elector struct {
	store backend.LeaderStore
	lease time.Duration
	renew time.Duration
	log   *slog.Logger
	// configHash returns the hash of the active configuration, recorded
	// with the lease so that standbys can compare theirs.
	configHash func() string

	Holder, Address, mode string

	// base anchors validUntil on the monotonic clock.
	base       time.Time
	epoch      atomic.Int64 // > 0 while this daemon holds the lease
	validUntil atomic.Int64 // nanoseconds after base
	Changes    atomic.Int64 // epoch changes seen

	mu   sync.Mutex
	seen backend.Leader // the record as last read or written
	// seenCtx ends when a record with another holder or epoch than seen
	// is read: forwards to the old leader are cancelled then.
	seenCtx    context.Context
	seenCancel context.CancelFunc
	// predecessor is the record as seen before this daemon took the
	// lease: the previous leader's last renewal bounds the time its
	// holders had nobody to heartbeat to (restoreOptions).
	predecessor backend.Leader

	lostOnce sync.Once
	Lost     chan struct{} // closed when the leadership is lost
	nudge    chan struct{}
}

func NewElector(store backend.LeaderStore, lease, renew time.Duration, address, mode string, configHash func() string, log *slog.Logger) *Elector {
	return &Elector{
		store: store, lease: lease, renew: renew, log: log, configHash: configHash,
		Holder: newHolderID(), Address: address, mode: mode,
		base: time.Now(), Lost: make(chan struct{}), nudge: make(chan struct{}, 1),
	}
}

// newHolderID names this process: host, pid and a random suffix, so that a
// restarted daemon never renews its predecessor's lease.
func newHolderID() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Leading returns the epoch this daemon leads under, or httpapi.ErrNotLeader when
// it does not lead or may no longer grant.
func (e *Elector) Leading() (int64, error) {
	epoch := e.epoch.Load()
	if epoch == 0 || time.Since(e.base).Nanoseconds() >= e.validUntil.Load() {
		return 0, httpapi.ErrNotLeader
	}
	return epoch, nil
}

// Check passes err through, stepping down when it says the daemon was
// fenced: another daemon took over and this one must not grant again.
func (e *Elector) Check(err error) error {
	if errors.Is(err, backend.ErrFenced) {
		e.Lose("a grant record write was fenced: another daemon leads the stack now")
	}
	return err
}

// Lose ends the leadership: nothing more is granted, and Run steps down.
func (e *Elector) Lose(reason string) {
	e.epoch.Store(0)
	e.lostOnce.Do(func() {
		e.log.Warn("stepping down: lost the leadership of the stack", "reason", reason, "holder", e.Holder)
		close(e.Lost)
	})
}

// Attempt renews the lease (leader) or tries to take it (standby) once. It
// reports whether this call made the daemon leader.
func (e *Elector) Attempt(ctx context.Context) (gained bool, err error) {
	sent := time.Since(e.base)
	l, held, err := e.store.AcquireLeader(ctx, backend.LeaderClaim{Holder: e.Holder, Address: e.Address, Mode: e.mode, ConfigHash: e.configHash(), Lease: e.lease})
	cur := e.epoch.Load()
	if err != nil {
		if cur != 0 && time.Since(e.base).Nanoseconds() >= e.validUntil.Load() {
			e.Lose(fmt.Sprintf("could not renew the lease for %s: %v", e.lease-grantMargin, err))
		}
		return false, err
	}
	e.mu.Lock()
	prev := e.seen
	if l.Epoch != e.seen.Epoch && e.seen.Epoch != 0 {
		e.Changes.Add(1)
	}
	if (l.Epoch != e.seen.Epoch || l.Holder != e.seen.Holder) && e.seenCancel != nil {
		e.seenCancel()
		e.seenCtx, e.seenCancel = nil, nil
	}
	e.seen = l
	e.mu.Unlock()
	switch {
	case held && (cur == 0 || cur == l.Epoch):
		if cur == 0 {
			select {
			case <-e.Lost:
				return false, nil // stepped down: a new Daemon leads, not this one
			default:
			}
			e.mu.Lock()
			e.predecessor = prev
			e.mu.Unlock()
		}
		e.validUntil.Store((sent + e.lease - grantMargin).Nanoseconds())
		e.epoch.Store(l.Epoch)
		return cur == 0, nil
	case cur != 0:
		e.Lose(fmt.Sprintf("the lease is held by %s at epoch %d", l.Holder, l.Epoch))
	}
	return false, nil
}

// Observe reads the leader record into the view, so that a daemon that
// takes the lease at its first attempt knows its predecessor's.
func (e *Elector) Observe(ctx context.Context) {
	l, err := e.store.ReadLeader(ctx)
	if err != nil {
		return // a missing table, an unreachable backend: the attempt says
	}
	e.mu.Lock()
	if e.seen.Epoch == 0 {
		e.seen = l
	}
	e.mu.Unlock()
}

// RestoreOptions is how the grants are restored by this daemon, which
// just took the lease: the holders of leases that ran out after the
// predecessor's last renewal had nobody to heartbeat to, so they get one
// leader lease from now to reach this daemon (none when there was no
// predecessor).
func (e *Elector) RestoreOptions() pools.RestoreOptions {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.predecessor
	if p.Epoch == 0 || p.RenewedAt.IsZero() {
		return pools.RestoreOptions{}
	}
	return pools.RestoreOptions{Since: p.RenewedAt, Grace: e.lease}
}

// View returns the leader record as last seen.
func (e *Elector) View() backend.Leader {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.seen
}

// LeaderView returns the leader record as last seen and a context that
// ends when another holder or epoch is seen.
func (e *Elector) LeaderView() (backend.Leader, context.Context) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.seenCtx == nil {
		e.seenCtx, e.seenCancel = context.WithCancel(context.Background())
	}
	return e.seen, e.seenCtx
}

// Wake makes the loop try again now (a forward to the leader failed: it
// may have released the lease).
func (e *Elector) Wake() {
	select {
	case e.nudge <- struct{}{}:
	default:
	}
}

// Loop renews or contends until ctx ends or the leadership is lost;
// gained runs (synchronously) each time this daemon takes the lease, and
// its error steps the daemon down.
func (e *Elector) Loop(ctx context.Context, gained func(context.Context) error) {
	t := time.NewTimer(e.renew)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.Lost:
			return
		case <-t.C:
		case <-e.nudge:
		}
		actx, cancel := context.WithTimeout(ctx, e.renew)
		won, err := e.Attempt(actx)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			e.log.Warn("leader election: the backend did not answer", "err", err)
		case won:
			if err := gained(ctx); err != nil {
				e.Lose("taking over failed: " + err.Error())
				return
			}
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(e.Next())
	}
}

// Next is the wait before the next attempt: renew, or for a standby the
// instant the lease it saw runs out, if sooner.
func (e *Elector) Next() time.Duration {
	if e.epoch.Load() != 0 {
		return e.renew
	}
	l := e.View()
	if !l.Live(time.Now()) {
		return e.renew
	}
	if d := time.Until(l.ExpiresAt) + 5*time.Millisecond; d < e.renew {
		return d
	}
	return e.renew
}

// Resign releases the lease (a graceful shutdown), so that a standby takes
// over at its next attempt instead of waiting the lease out.
func (e *Elector) Resign(ctx context.Context) error {
	epoch := e.epoch.Swap(0)
	if epoch == 0 {
		return nil
	}
	if err := e.store.ReleaseLeader(ctx, e.Holder, epoch); err != nil {
		return err
	}
	e.log.Info("released the leader lease; a standby takes over at once", "epoch", epoch)
	return nil
}

// leaderPools is the pools.Store of the daemon's pool manager: the
// backend's store fenced with the epoch this daemon leads under.
type Pools struct {
	e     *Elector
	fence *Fenced[pools.Store]
	plain pools.Store
}

func (s Pools) PutLease(ctx context.Context, rec pools.LeaseRecord) error {
	epoch, err := s.e.Leading()
	if err != nil {
		return err
	}
	return s.e.Check(s.fence.at(epoch).PutLease(ctx, rec))
}

// CreateLease is PutLease for a lease granted just now
// (pools.CreateLease), through the store fenced with the epoch.
func (s Pools) CreateLease(ctx context.Context, rec pools.LeaseRecord) error {
	epoch, err := s.e.Leading()
	if err != nil {
		return err
	}
	return s.e.Check(pools.CreateLease(ctx, s.fence.at(epoch), rec))
}

func (s Pools) DeleteLease(ctx context.Context, id string) error {
	epoch, err := s.e.Leading()
	if err != nil {
		return err
	}
	return s.e.Check(s.fence.at(epoch).DeleteLease(ctx, id))
}

// DeleteLeases checks the epoch once and deletes ids through the store
// fenced with it, in one batch when it can (pools.DeleteLeases).
func (s Pools) DeleteLeases(ctx context.Context, ids []string) error {
	epoch, err := s.e.Leading()
	if err != nil {
		return err
	}
	return s.e.Check(pools.DeleteLeases(ctx, s.fence.at(epoch), ids))
}

// QueueDeleteLease checks the epoch now and queues the delete in the store
// fenced with it when that store can queue (backend/local's); false when
// it cannot (nothing was done). done gets the outcome, a fenced one having
// ended the leadership as DeleteLease's does.
func (s Pools) QueueDeleteLease(id string, done func(error)) bool {
	epoch, err := s.e.Leading()
	if err != nil {
		if done != nil {
			done(err)
		}
		return true
	}
	q, ok := s.fence.at(epoch).(interface {
		QueueDeleteLease(id string, done func(error)) bool
	})
	if !ok {
		return false
	}
	return q.QueueDeleteLease(id, func(err error) {
		err = s.e.Check(err)
		if done != nil {
			done(err)
		}
	})
}

func (s Pools) LoadLeases(ctx context.Context) ([]pools.LeaseRecord, error) {
	return s.plain.LoadLeases(ctx)
}

// leaderGrants is leaderPools for the permit and claim records.
type Grants struct {
	e     *Elector
	fence *Fenced[backend.GrantStore]
	plain backend.GrantStore
}

func (s Grants) PutGrant(ctx context.Context, id string, body []byte) error {
	epoch, err := s.e.Leading()
	if err != nil {
		return err
	}
	return s.e.Check(s.fence.at(epoch).PutGrant(ctx, id, body))
}

func (s Grants) DeleteGrant(ctx context.Context, id string) error {
	epoch, err := s.e.Leading()
	if err != nil {
		return err
	}
	return s.e.Check(s.fence.at(epoch).DeleteGrant(ctx, id))
}

// DeleteGrants is Pools.DeleteLeases for the grant records.
func (s Grants) DeleteGrants(ctx context.Context, ids []string) error {
	epoch, err := s.e.Leading()
	if err != nil {
		return err
	}
	return s.e.Check(backend.DeleteGrants(ctx, s.fence.at(epoch), ids))
}

func (s Grants) LoadGrants(ctx context.Context) (map[string][]byte, error) {
	return s.plain.LoadGrants(ctx)
}

// fenced keeps the store fenced at the latest epoch, so that a write makes
// a new one only when the epoch changed (a takeover), not every time.
type Fenced[S any] struct {
	fence func(epoch int64) S
	cur   atomic.Pointer[FencedAt[S]]
}

type FencedAt[S any] struct {
	epoch int64
	store S
}

func NewFenced[S any](fence func(epoch int64) S) *Fenced[S] { return &Fenced[S]{fence: fence} }

func (f *Fenced[S]) at(epoch int64) S {
	if c := f.cur.Load(); c != nil && c.epoch == epoch {
		return c.store
	}
	c := &FencedAt[S]{epoch: epoch, store: f.fence(epoch)}
	f.cur.Store(c)
	return c.store
}

var (
	_ pools.Store        = Pools{}
	_ backend.GrantStore = Grants{}
)

// NewPools is the pool lease store a leader writes through: plain's
// reads, and writes through fence(epoch) under the epoch e leads by.
func NewPools(e *Elector, fence func(epoch int64) pools.Store, plain pools.Store) Pools {
	return Pools{e: e, fence: NewFenced(fence), plain: plain}
}

// NewGrants is NewPools for the grant records.
func NewGrants(e *Elector, fence func(epoch int64) backend.GrantStore, plain backend.GrantStore) Grants {
	return Grants{e: e, fence: NewFenced(fence), plain: plain}
}
