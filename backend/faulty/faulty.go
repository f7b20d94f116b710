package faulty

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/runtime/pickup"
)

// ErrInjected is the transient error an injected failure returns (wrapped
// with the operation and call number). It wraps neither ErrStaleHandle nor
// ErrConditionFailed, so callers must treat it as "retry".
var ErrInjected = errors.New("faulty: injected transient failure")

// Op names a wrapped method.
type Op string

// The wrapped methods.
const (
	Send                  Op = "Send"
	Receive               Op = "Receive"
	Delete                Op = "Delete"
	ChangeVisibility      Op = "ChangeVisibility"
	DeleteBatch           Op = "DeleteBatch"
	ChangeVisibilityBatch Op = "ChangeVisibilityBatch"
	Put                   Op = "Put"
	Get                   Op = "Get"
	Transition            Op = "Transition"
	List                  Op = "List"
	ClaimedBy             Op = "ClaimedBy"
	PutGrant              Op = "PutGrant"
	DeleteGrant           Op = "DeleteGrant"
	LoadGrants            Op = "LoadGrants"
)

// Fault is what happens to one call of Op.
type Fault struct {
	Op Op
	// Call is the 1-based number of the call of Op it applies to; 0 means
	// every call.
	Call int
	// Delay waits this long (or until the context ends) before the call.
	Delay time.Duration
	// Fail makes the call return an error wrapping ErrInjected. Before the
	// call is made unless AfterEffect is set, in which case the call is
	// made (its effect persists) and its result is replaced by the error —
	// a response lost on the way back.
	Fail        bool
	AfterEffect bool
	// Duplicate (Receive only) returns this call's messages once more,
	// ahead of the next Receive's: a duplicate delivery, with the same
	// receipt handles.
	Duplicate bool
}

// Injector counts calls and applies faults; share one between a queue and
// an instance table to script a scenario. It is safe for concurrent use.
type Injector struct {
	mu      sync.Mutex
	calls   map[Op]int
	faults  []Fault
	pending []pickup.Message // duplicates to deliver on the next Receive
}

// New returns an injector with the given faults.
func New(faults ...Fault) *Injector {
	return &Injector{calls: map[Op]int{}, faults: faults}
}

// Add adds a fault.
func (in *Injector) Add(f Fault) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.faults = append(in.faults, f)
}

// Calls returns how many calls of op were made through the injector.
func (in *Injector) Calls(op Op) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.calls[op]
}

// begin counts a call of op and returns the faults that apply to it.
func (in *Injector) begin(op Op) (n int, f Fault) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.calls[op]++
	n = in.calls[op]
	for _, x := range in.faults {
		if x.Op == op && (x.Call == 0 || x.Call == n) {
			f.Delay += x.Delay
			f.Fail = f.Fail || x.Fail
			f.AfterEffect = f.AfterEffect || x.AfterEffect
			f.Duplicate = f.Duplicate || x.Duplicate
		}
	}
	return n, f
}

// do runs call under the faults for one call of op.
func (in *Injector) do(ctx context.Context, op Op, call func() error) error {
	n, f := in.begin(op)
	return in.apply(ctx, op, n, f, call)
}

// apply runs call under fault f, for call n of op.
func (in *Injector) apply(ctx context.Context, op Op, n int, f Fault, call func() error) error {
	if f.Delay > 0 {
		t := time.NewTimer(f.Delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("faulty: %s call %d: %w", op, n, ctx.Err())
		case <-t.C:
		}
	}
	injected := fmt.Errorf("%s call %d: %w", op, n, ErrInjected)
	if f.Fail && !f.AfterEffect {
		return injected
	}
	err := call()
	if f.Fail {
		return injected
	}
	return err
}

// Queue wraps q.
func (in *Injector) Queue(q pickup.Queue) *Queue { return &Queue{in: in, q: q} }

// Instances wraps t.
func (in *Injector) Instances(t pickup.InstanceTable) *InstanceTable {
	return &InstanceTable{in: in, t: t}
}

// Queue is a pickup.Queue with injected faults.
type Queue struct {
	in *Injector
	q  pickup.Queue
}

var _ pickup.Queue = (*Queue)(nil)

func (q *Queue) Send(ctx context.Context, body string, delay time.Duration) error {
	return q.in.do(ctx, Send, func() error { return q.q.Send(ctx, body, delay) })
}

// Receive delivers pending duplicates first (without calling the backend
// when they fill max), then the backend's messages.
func (q *Queue) Receive(ctx context.Context, max int, visibility, wait time.Duration) ([]pickup.Message, error) {
	n, f := q.in.begin(Receive)
	var out []pickup.Message
	err := q.in.apply(ctx, Receive, n, f, func() error {
		q.in.mu.Lock()
		k := min(max, len(q.in.pending))
		out = append(out, q.in.pending[:k]...)
		q.in.pending = q.in.pending[k:]
		q.in.mu.Unlock()
		if len(out) == max {
			return nil
		}
		msgs, err := q.q.Receive(ctx, max-len(out), visibility, wait)
		out = append(out, msgs...)
		return err
	})
	if err != nil {
		return nil, err
	}
	if f.Duplicate {
		q.in.mu.Lock()
		for _, m := range out {
			m.ReceiveCount++
			q.in.pending = append(q.in.pending, m)
		}
		q.in.mu.Unlock()
	}
	return out, nil
}

func (q *Queue) Delete(ctx context.Context, h string) error {
	return q.in.do(ctx, Delete, func() error { return q.q.Delete(ctx, h) })
}

func (q *Queue) ChangeVisibility(ctx context.Context, h string, timeout time.Duration) error {
	return q.in.do(ctx, ChangeVisibility, func() error { return q.q.ChangeVisibility(ctx, h, timeout) })
}

func (q *Queue) DeleteBatch(ctx context.Context, hs []string) error {
	return q.in.do(ctx, DeleteBatch, func() error { return q.q.DeleteBatch(ctx, hs) })
}

func (q *Queue) ChangeVisibilityBatch(ctx context.Context, hs []string, timeout time.Duration) error {
	return q.in.do(ctx, ChangeVisibilityBatch, func() error { return q.q.ChangeVisibilityBatch(ctx, hs, timeout) })
}

// InstanceTable is a pickup.InstanceTable with injected faults.
type InstanceTable struct {
	in *Injector
	t  pickup.InstanceTable
}

var _ pickup.InstanceTable = (*InstanceTable)(nil)

func (t *InstanceTable) Put(ctx context.Context, inst pickup.Instance) error {
	return t.in.do(ctx, Put, func() error { return t.t.Put(ctx, inst) })
}

func (t *InstanceTable) Get(ctx context.Context, id string) (pickup.Instance, error) {
	var out pickup.Instance
	err := t.in.do(ctx, Get, func() (err error) { out, err = t.t.Get(ctx, id); return err })
	if err != nil {
		return pickup.Instance{}, err
	}
	return out, nil
}

func (t *InstanceTable) Transition(ctx context.Context, tr pickup.Transition) (pickup.Instance, error) {
	var out pickup.Instance
	err := t.in.do(ctx, Transition, func() (err error) { out, err = t.t.Transition(ctx, tr); return err })
	if err != nil {
		return pickup.Instance{}, err
	}
	return out, nil
}

func (t *InstanceTable) List(ctx context.Context, class string, state pickup.State) ([]pickup.Instance, error) {
	var out []pickup.Instance
	err := t.in.do(ctx, List, func() (err error) { out, err = t.t.List(ctx, class, state); return err })
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (t *InstanceTable) ClaimedBy(ctx context.Context, class, owner string) ([]pickup.Instance, error) {
	var out []pickup.Instance
	err := t.in.do(ctx, ClaimedBy, func() (err error) { out, err = t.t.ClaimedBy(ctx, class, owner); return err })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Grants wraps g.
func (in *Injector) Grants(g backend.GrantStore) *GrantStore { return &GrantStore{in: in, g: g} }

// GrantStore is a backend.GrantStore with injected faults: a failing
// PutGrant is what a grant meets on a read-only database or a full disk.
type GrantStore struct {
	in *Injector
	g  backend.GrantStore
}

var _ backend.GrantStore = (*GrantStore)(nil)

func (g *GrantStore) PutGrant(ctx context.Context, id string, body []byte) error {
	return g.in.do(ctx, PutGrant, func() error { return g.g.PutGrant(ctx, id, body) })
}

func (g *GrantStore) DeleteGrant(ctx context.Context, id string) error {
	return g.in.do(ctx, DeleteGrant, func() error { return g.g.DeleteGrant(ctx, id) })
}

func (g *GrantStore) LoadGrants(ctx context.Context) (map[string][]byte, error) {
	var out map[string][]byte
	err := g.in.do(ctx, LoadGrants, func() (err error) { out, err = g.g.LoadGrants(ctx); return err })
	if err != nil {
		return nil, err
	}
	return out, nil
}
