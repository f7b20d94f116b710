package reconcile

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rpdhq/rpd/backend"
)

// fakeBackend is an in-memory QueueAdmin, StateStore and Locker with fault
// injection, for unit tests of the engine. The end-to-end tests in
// cmd/rpd use the real backends.
type fakeBackend struct {
	mu      sync.Mutex
	queues  map[string]*backend.QueueInfo
	doc     []byte
	version int64
	lock    *backend.LockInfo
	now     func() time.Time
	calls   []string
	// fail, when set, is consulted before every call ("CreateQueue q1",
	// "WriteState", …); a non-nil error fails the call without effect.
	fail func(call string) error
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{queues: map[string]*backend.QueueInfo{}, now: time.Now}
}

func (f *fakeBackend) enter(call string) error {
	f.calls = append(f.calls, call)
	if f.fail != nil {
		return f.fail(call)
	}
	return nil
}

func (f *fakeBackend) CreateQueue(ctx context.Context, name string, attrs backend.QueueAttributes) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("CreateQueue " + name); err != nil {
		return err
	}
	if q, ok := f.queues[name]; ok {
		if q.Attributes.VisibilityTimeout != attrs.VisibilityTimeout || q.Attributes.Retention != attrs.Retention || q.Attributes.Delay != attrs.Delay {
			return fmt.Errorf("queue %s already exists with other attributes", name)
		}
		return nil
	}
	attrs.Tags = maps.Clone(attrs.Tags)
	f.queues[name] = &backend.QueueInfo{Name: name, URL: "fake://" + name, Attributes: attrs}
	return nil
}

func (f *fakeBackend) UpdateQueue(ctx context.Context, name string, attrs backend.QueueAttributes) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("UpdateQueue " + name); err != nil {
		return err
	}
	q, ok := f.queues[name]
	if !ok {
		return fmt.Errorf("update %s: %w", name, backend.ErrQueueNotFound)
	}
	tags := q.Attributes.Tags
	if tags == nil {
		tags = map[string]string{}
	}
	maps.Copy(tags, attrs.Tags)
	attrs.Tags = tags
	q.Attributes = attrs
	return nil
}

func (f *fakeBackend) DeleteQueue(ctx context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("DeleteQueue " + name); err != nil {
		return err
	}
	if _, ok := f.queues[name]; !ok {
		return fmt.Errorf("delete %s: %w", name, backend.ErrQueueNotFound)
	}
	delete(f.queues, name)
	return nil
}

func (f *fakeBackend) DescribeQueue(ctx context.Context, name string) (backend.QueueInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("DescribeQueue " + name); err != nil {
		return backend.QueueInfo{}, err
	}
	q, ok := f.queues[name]
	if !ok {
		return backend.QueueInfo{}, fmt.Errorf("describe %s: %w", name, backend.ErrQueueNotFound)
	}
	c := *q
	c.Attributes.Tags = maps.Clone(q.Attributes.Tags)
	return c, nil
}

func (f *fakeBackend) ListQueues(ctx context.Context, prefix string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("ListQueues"); err != nil {
		return nil, err
	}
	var out []string
	for n := range f.queues {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (f *fakeBackend) ReadState(ctx context.Context) ([]byte, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("ReadState"); err != nil {
		return nil, 0, err
	}
	return slices.Clone(f.doc), f.version, nil
}

func (f *fakeBackend) WriteState(ctx context.Context, doc []byte, expect int64) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("WriteState"); err != nil {
		return 0, err
	}
	if expect != f.version {
		return 0, fmt.Errorf("write state (expected %d, have %d): %w", expect, f.version, backend.ErrVersionConflict)
	}
	f.doc = slices.Clone(doc)
	f.version++
	return f.version, nil
}

func (f *fakeBackend) Lock(ctx context.Context, info backend.LockInfo, ttl time.Duration) (backend.LockInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("Lock"); err != nil {
		return backend.LockInfo{}, err
	}
	now := f.now()
	if f.lock != nil && f.lock.Expires.After(now) {
		return backend.LockInfo{}, &backend.LockedError{Holder: *f.lock}
	}
	info.Expires = now.Add(ttl)
	f.lock = &info
	return info, nil
}

func (f *fakeBackend) Renew(ctx context.Context, id string, ttl time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("Renew"); err != nil {
		return err
	}
	if f.lock == nil || f.lock.ID != id {
		return fmt.Errorf("renew %s: not held", id)
	}
	f.lock.Expires = f.now().Add(ttl)
	return nil
}

func (f *fakeBackend) Unlock(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("Unlock"); err != nil {
		return err
	}
	if f.lock == nil || f.lock.ID != id {
		return fmt.Errorf("unlock %s: not held", id)
	}
	f.lock = nil
	return nil
}

func (f *fakeBackend) ForceUnlock(ctx context.Context, id string) error {
	return f.Unlock(ctx, id)
}

func (f *fakeBackend) live() Live { return Live{Queues: f, State: f, Lock: f} }

// setMessages sets a queue's approximate counts.
func (f *fakeBackend) setMessages(name string, visible, inFlight int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queues[name].Visible = visible
	f.queues[name].InFlight = inFlight
}

func (f *fakeBackend) queueNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.queues))
}

func (f *fakeBackend) state() *RuntimeDoc {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.doc == nil {
		return nil
	}
	d, err := DecodeRuntimeDoc(f.doc)
	if err != nil {
		panic(err)
	}
	return d
}
