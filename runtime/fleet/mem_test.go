package fleet_test

// An in-memory queue and instance table with SQS and DynamoDB semantics,
// for the engine's property tests and the day simulation (the behaviour
// tests of these semantics run on the real backends, in runtime/pickup).

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/rpdhq/rpd/runtime/pickup"
)

// memQueue is an in-memory queue with SQS semantics (delay, visibility,
// per-delivery receipt handles), for unit tests only: the behaviour tests
// run on the real backends.
type memQueue struct {
	mu     sync.Mutex
	now    func() time.Time
	seq    int
	msgs   map[string]*memMsg // by ID
	order  []string
	tokens int
}

type memMsg struct {
	id, body, receipt string
	visibleAt         time.Time
	receives          int
}

func newMemQueue(now func() time.Time) *memQueue {
	return &memQueue{now: now, msgs: map[string]*memMsg{}}
}

func (q *memQueue) Send(ctx context.Context, body string, delay time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.seq++
	id := fmt.Sprintf("m%06d", q.seq)
	q.msgs[id] = &memMsg{id: id, body: body, visibleAt: q.now().Add(delay)}
	q.order = append(q.order, id)
	return nil
}

func (q *memQueue) Receive(ctx context.Context, max int, visibility, wait time.Duration) ([]pickup.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if max < 1 || max > 10 {
		return nil, fmt.Errorf("receive max %d out of range", max)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	var out []pickup.Message
	for _, id := range q.order {
		m, ok := q.msgs[id]
		if !ok || m.visibleAt.After(now) {
			continue
		}
		q.tokens++
		m.receipt = fmt.Sprintf("%s.%d", id, q.tokens)
		m.visibleAt = now.Add(visibility)
		m.receives++
		out = append(out, pickup.Message{ID: id, Body: m.body, ReceiptHandle: m.receipt, ReceiveCount: m.receives})
		if len(out) == max {
			break
		}
	}
	// Keep order compact: drop deleted IDs.
	live := q.order[:0]
	for _, id := range q.order {
		if _, ok := q.msgs[id]; ok {
			live = append(live, id)
		}
	}
	q.order = live
	return out, nil
}

func (q *memQueue) lookup(h string) (*memMsg, error) {
	for _, m := range q.msgs {
		if m.receipt == h && h != "" {
			return m, nil
		}
	}
	return nil, fmt.Errorf("handle %s: %w", h, pickup.ErrStaleHandle)
}

func (q *memQueue) Delete(ctx context.Context, h string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	m, err := q.lookup(h)
	if err != nil {
		return err
	}
	delete(q.msgs, m.id)
	return nil
}

func (q *memQueue) ChangeVisibility(ctx context.Context, h string, timeout time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	m, err := q.lookup(h)
	if err != nil {
		return err
	}
	m.visibleAt = q.now().Add(timeout)
	return nil
}

func (q *memQueue) eachHandle(ctx context.Context, hs []string, f func(string) error) error {
	if len(hs) < 1 || len(hs) > 10 {
		return fmt.Errorf("batch of %d out of range", len(hs))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	be := &pickup.BatchError{Failed: map[string]error{}}
	for _, h := range hs {
		if err := f(h); err != nil {
			be.Failed[h] = err
		}
	}
	if len(be.Failed) > 0 {
		return be
	}
	return nil
}

func (q *memQueue) DeleteBatch(ctx context.Context, hs []string) error {
	return q.eachHandle(ctx, hs, func(h string) error { return q.Delete(ctx, h) })
}

func (q *memQueue) ChangeVisibilityBatch(ctx context.Context, hs []string, timeout time.Duration) error {
	return q.eachHandle(ctx, hs, func(h string) error { return q.ChangeVisibility(ctx, h, timeout) })
}

// memTable is an in-memory instance table, for unit tests only.
type memTable struct {
	mu   sync.Mutex
	now  func() time.Time
	recs map[string]pickup.Instance
}

func newMemTable(now func() time.Time) *memTable {
	return &memTable{now: now, recs: map[string]pickup.Instance{}}
}

func (t *memTable) Put(ctx context.Context, in pickup.Instance) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.recs[in.ID] = in
	return nil
}

func (t *memTable) Get(ctx context.Context, id string) (pickup.Instance, error) {
	if err := ctx.Err(); err != nil {
		return pickup.Instance{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	in, ok := t.recs[id]
	if !ok {
		return pickup.Instance{}, fmt.Errorf("instance %s: %w", id, pickup.ErrNotFound)
	}
	return in, nil
}

func (t *memTable) Transition(ctx context.Context, tr pickup.Transition) (pickup.Instance, error) {
	if err := ctx.Err(); err != nil {
		return pickup.Instance{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	in, ok := t.recs[tr.ID]
	lapsed := tr.LapsedBy.IsZero() || (!in.ClaimExpires.IsZero() && !in.ClaimExpires.After(tr.LapsedBy))
	if !ok || in.State != tr.From || in.Owner != tr.ExpectOwner || (!tr.Now.IsZero() && !in.Threshold.After(tr.Now)) || !lapsed {
		return pickup.Instance{}, fmt.Errorf("instance %s: %w", tr.ID, pickup.ErrConditionFailed)
	}
	in.State, in.Owner, in.ClaimExpires = tr.To, tr.Owner, tr.ClaimExpires
	in.UpdatedAt = tr.Now
	if in.UpdatedAt.IsZero() {
		in.UpdatedAt = t.now()
	}
	t.recs[tr.ID] = in
	return in, nil
}

func (t *memTable) List(ctx context.Context, class string, state pickup.State) ([]pickup.Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []pickup.Instance
	for _, in := range t.recs {
		if in.Class == class && (state == "" || in.State == state) {
			out = append(out, in)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (t *memTable) ClaimedBy(ctx context.Context, class, owner string) ([]pickup.Instance, error) {
	all, err := t.List(ctx, class, pickup.StateClaimed)
	var out []pickup.Instance
	for _, in := range all {
		if in.Owner == owner {
			out = append(out, in)
		}
	}
	return out, err
}

var (
	_ pickup.Queue         = (*memQueue)(nil)
	_ pickup.InstanceTable = (*memTable)(nil)
)
