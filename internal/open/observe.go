package open

import (
	"context"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/runtime/pickup"
	"github.com/rpdhq/rpd/runtime/pools"
)

// Observer receives every backend call a daemon makes at run time: the
// operation ("pools.put_lease", "queue.receive", ...), how long it took and
// its error (nil on success; a refused condition such as
// backend.ErrFenced or pickup.ErrConditionFailed is an error here too, and
// the observer tells them apart).
type Observer func(op string, took time.Duration, err error)

// Observe makes every call through the run-time stores of b (state,
// leader, pool leases, grants, instances, queues, fenced or not) report to
// fn. Call it once, before the stores are handed out. The administrative
// stores (queue admin, lock, tables) that plan and apply use are left
// alone.
func (b *Backend) Observe(fn Observer) {
	if b.State != nil {
		b.State = observedState{b.State, fn}
	}
	if b.Leader != nil {
		b.Leader = observedLeader{b.Leader, fn}
	}
	if b.Pools != nil {
		b.Pools = observedPools{b.Pools, fn}
	}
	if fp := b.FencedPools; fp != nil {
		b.FencedPools = func(epoch int64) pools.Store { return observedPools{fp(epoch), fn} }
	}
	if b.Grants != nil {
		b.Grants = observedGrants{b.Grants, fn}
	}
	if fg := b.FencedGrants; fg != nil {
		b.FencedGrants = func(epoch int64) backend.GrantStore { return observedGrants{fg(epoch), fn} }
	}
	if b.Instances != nil {
		b.Instances = observedInstances{b.Instances, fn}
	}
	if q := b.Queue; q != nil {
		b.Queue = func(name string) pickup.Queue { return observedQueue{q(name), fn} }
	}
}

func since(fn Observer, op string, start time.Time, err error) { fn(op, time.Since(start), err) }

type observedState struct {
	s  backend.StateStore
	fn Observer
}

func (o observedState) ReadState(ctx context.Context) (doc []byte, version int64, err error) {
	defer func(t time.Time) { since(o.fn, "state.read", t, err) }(time.Now())
	return o.s.ReadState(ctx)
}

func (o observedState) WriteState(ctx context.Context, doc []byte, expect int64) (v int64, err error) {
	defer func(t time.Time) { since(o.fn, "state.write", t, err) }(time.Now())
	return o.s.WriteState(ctx, doc, expect)
}

type observedLeader struct {
	s  backend.LeaderStore
	fn Observer
}

func (o observedLeader) AcquireLeader(ctx context.Context, c backend.LeaderClaim) (l backend.Leader, held bool, err error) {
	defer func(t time.Time) { since(o.fn, "leader.acquire", t, err) }(time.Now())
	return o.s.AcquireLeader(ctx, c)
}

func (o observedLeader) ReleaseLeader(ctx context.Context, holder string, epoch int64) (err error) {
	defer func(t time.Time) { since(o.fn, "leader.release", t, err) }(time.Now())
	return o.s.ReleaseLeader(ctx, holder, epoch)
}

func (o observedLeader) ReadLeader(ctx context.Context) (l backend.Leader, err error) {
	defer func(t time.Time) { since(o.fn, "leader.read", t, err) }(time.Now())
	return o.s.ReadLeader(ctx)
}

type observedPools struct {
	s  pools.Store
	fn Observer
}

func (o observedPools) PutLease(ctx context.Context, rec pools.LeaseRecord) (err error) {
	defer func(t time.Time) { since(o.fn, "pools.put_lease", t, err) }(time.Now())
	return o.s.PutLease(ctx, rec)
}

// CreateLease is observed as "pools.put_lease", as PutLease is.
func (o observedPools) CreateLease(ctx context.Context, rec pools.LeaseRecord) (err error) {
	defer func(t time.Time) { since(o.fn, "pools.put_lease", t, err) }(time.Now())
	return pools.CreateLease(ctx, o.s, rec)
}

func (o observedPools) DeleteLease(ctx context.Context, id string) (err error) {
	defer func(t time.Time) { since(o.fn, "pools.delete_lease", t, err) }(time.Now())
	return o.s.DeleteLease(ctx, id)
}

// DeleteLeases is one observation, "pools.delete_leases", when the store
// deletes a batch in one call; otherwise each DeleteLease is observed as
// before.
func (o observedPools) DeleteLeases(ctx context.Context, ids []string) (err error) {
	if _, ok := o.s.(interface {
		DeleteLeases(context.Context, []string) error
	}); !ok {
		return pools.DeleteLeases(ctx, struct{ pools.Store }{o}, ids)
	}
	defer func(t time.Time) { since(o.fn, "pools.delete_leases", t, err) }(time.Now())
	return pools.DeleteLeases(ctx, o.s, ids)
}

// queueDeleter is a pool lease store that can queue a delete and return
// at once (backend/local's PoolStore).
type queueDeleter interface {
	QueueDeleteLease(id string, done func(error)) bool
}

// QueueDeleteLease queues the delete in the store when it can, observed as
// "pools.delete_lease" from the call to its outcome; false when the store
// cannot queue (nothing was done).
func (o observedPools) QueueDeleteLease(id string, done func(error)) bool {
	q, ok := o.s.(queueDeleter)
	if !ok {
		return false
	}
	start := time.Now()
	return q.QueueDeleteLease(id, func(err error) {
		since(o.fn, "pools.delete_lease", start, err)
		if done != nil {
			done(err)
		}
	})
}

func (o observedPools) LoadLeases(ctx context.Context) (recs []pools.LeaseRecord, err error) {
	defer func(t time.Time) { since(o.fn, "pools.load_leases", t, err) }(time.Now())
	return o.s.LoadLeases(ctx)
}

type observedGrants struct {
	s  backend.GrantStore
	fn Observer
}

func (o observedGrants) PutGrant(ctx context.Context, id string, body []byte) (err error) {
	defer func(t time.Time) { since(o.fn, "grants.put", t, err) }(time.Now())
	return o.s.PutGrant(ctx, id, body)
}

func (o observedGrants) DeleteGrant(ctx context.Context, id string) (err error) {
	defer func(t time.Time) { since(o.fn, "grants.delete", t, err) }(time.Now())
	return o.s.DeleteGrant(ctx, id)
}

// DeleteGrants is one observation, "grants.delete_batch", when the store
// deletes a batch in one call; otherwise each DeleteGrant is observed as
// before.
func (o observedGrants) DeleteGrants(ctx context.Context, ids []string) (err error) {
	if _, ok := o.s.(interface {
		DeleteGrants(context.Context, []string) error
	}); !ok {
		return backend.DeleteGrants(ctx, struct{ backend.GrantStore }{o}, ids)
	}
	defer func(t time.Time) { since(o.fn, "grants.delete_batch", t, err) }(time.Now())
	return backend.DeleteGrants(ctx, o.s, ids)
}

func (o observedGrants) LoadGrants(ctx context.Context) (m map[string][]byte, err error) {
	defer func(t time.Time) { since(o.fn, "grants.load", t, err) }(time.Now())
	return o.s.LoadGrants(ctx)
}

type observedInstances struct {
	s  pickup.InstanceTable
	fn Observer
}

func (o observedInstances) Put(ctx context.Context, inst pickup.Instance) (err error) {
	defer func(t time.Time) { since(o.fn, "instances.put", t, err) }(time.Now())
	return o.s.Put(ctx, inst)
}

func (o observedInstances) Get(ctx context.Context, id string) (inst pickup.Instance, err error) {
	defer func(t time.Time) { since(o.fn, "instances.get", t, err) }(time.Now())
	return o.s.Get(ctx, id)
}

func (o observedInstances) Transition(ctx context.Context, tr pickup.Transition) (inst pickup.Instance, err error) {
	defer func(t time.Time) { since(o.fn, "instances.transition", t, err) }(time.Now())
	return o.s.Transition(ctx, tr)
}

func (o observedInstances) List(ctx context.Context, class string, state pickup.State) (out []pickup.Instance, err error) {
	defer func(t time.Time) { since(o.fn, "instances.list", t, err) }(time.Now())
	return o.s.List(ctx, class, state)
}

func (o observedInstances) ClaimedBy(ctx context.Context, class, owner string) (out []pickup.Instance, err error) {
	defer func(t time.Time) { since(o.fn, "instances.claimed_by", t, err) }(time.Now())
	return o.s.ClaimedBy(ctx, class, owner)
}

type observedQueue struct {
	q  pickup.Queue
	fn Observer
}

func (o observedQueue) Send(ctx context.Context, body string, delay time.Duration) (err error) {
	defer func(t time.Time) { since(o.fn, "queue.send", t, err) }(time.Now())
	return o.q.Send(ctx, body, delay)
}

func (o observedQueue) Receive(ctx context.Context, max int, visibility, wait time.Duration) (m []pickup.Message, err error) {
	defer func(t time.Time) { since(o.fn, "queue.receive", t, err) }(time.Now())
	return o.q.Receive(ctx, max, visibility, wait)
}

func (o observedQueue) Delete(ctx context.Context, handle string) (err error) {
	defer func(t time.Time) { since(o.fn, "queue.delete", t, err) }(time.Now())
	return o.q.Delete(ctx, handle)
}

func (o observedQueue) ChangeVisibility(ctx context.Context, handle string, timeout time.Duration) (err error) {
	defer func(t time.Time) { since(o.fn, "queue.change_visibility", t, err) }(time.Now())
	return o.q.ChangeVisibility(ctx, handle, timeout)
}

func (o observedQueue) DeleteBatch(ctx context.Context, handles []string) (err error) {
	defer func(t time.Time) { since(o.fn, "queue.delete_batch", t, err) }(time.Now())
	return o.q.DeleteBatch(ctx, handles)
}

func (o observedQueue) ChangeVisibilityBatch(ctx context.Context, handles []string, timeout time.Duration) (err error) {
	defer func(t time.Time) { since(o.fn, "queue.change_visibility_batch", t, err) }(time.Now())
	return o.q.ChangeVisibilityBatch(ctx, handles, timeout)
}

var (
	_ backend.StateStore   = observedState{}
	_ backend.LeaderStore  = observedLeader{}
	_ pools.Store          = observedPools{}
	_ backend.GrantStore   = observedGrants{}
	_ pickup.InstanceTable = observedInstances{}
	_ pickup.Queue         = observedQueue{}
)
