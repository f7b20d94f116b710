package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/reconcile"
)

// errInjected is the fault the wrappers below inject.
var errInjected = errors.New("injected fault")

// faults wraps a backend's reconcile interfaces and fails the calls its
// rule picks, before they reach the backend (a failed call has no effect).
// Calls are named "CreateQueue NAME", "UpdateQueue NAME", "DeleteQueue
// NAME", "WriteState", "Lock", …; every call is counted in order.
type faults struct {
	mu    sync.Mutex
	calls []string
	rule  func(n int, call string) bool // n counts the calls so far, from 1
}

func (f *faults) check(call string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	if f.rule != nil && f.rule(len(f.calls), call) {
		return fmt.Errorf("%s: %w", call, errInjected)
	}
	return nil
}

// wrap returns live with its queue admin, state store and lock going
// through f.
func (f *faults) wrap(live reconcile.Live) reconcile.Live {
	live.Queues = faultyQueues{live.Queues, f}
	live.State = faultyState{live.State, f}
	live.Lock = faultyLock{live.Lock, f}
	return live
}

type faultyQueues struct {
	next backend.QueueAdmin
	f    *faults
}

func (q faultyQueues) CreateQueue(ctx context.Context, name string, a backend.QueueAttributes) error {
	if err := q.f.check("CreateQueue " + name); err != nil {
		return err
	}
	return q.next.CreateQueue(ctx, name, a)
}

func (q faultyQueues) UpdateQueue(ctx context.Context, name string, a backend.QueueAttributes) error {
	if err := q.f.check("UpdateQueue " + name); err != nil {
		return err
	}
	return q.next.UpdateQueue(ctx, name, a)
}

func (q faultyQueues) DeleteQueue(ctx context.Context, name string) error {
	if err := q.f.check("DeleteQueue " + name); err != nil {
		return err
	}
	return q.next.DeleteQueue(ctx, name)
}

func (q faultyQueues) DescribeQueue(ctx context.Context, name string) (backend.QueueInfo, error) {
	if err := q.f.check("DescribeQueue " + name); err != nil {
		return backend.QueueInfo{}, err
	}
	return q.next.DescribeQueue(ctx, name)
}

func (q faultyQueues) ListQueues(ctx context.Context, prefix string) ([]string, error) {
	if err := q.f.check("ListQueues"); err != nil {
		return nil, err
	}
	return q.next.ListQueues(ctx, prefix)
}

type faultyState struct {
	next backend.StateStore
	f    *faults
}

func (s faultyState) ReadState(ctx context.Context) ([]byte, int64, error) {
	if err := s.f.check("ReadState"); err != nil {
		return nil, 0, err
	}
	return s.next.ReadState(ctx)
}

func (s faultyState) WriteState(ctx context.Context, doc []byte, v int64) (int64, error) {
	if err := s.f.check("WriteState"); err != nil {
		return 0, err
	}
	return s.next.WriteState(ctx, doc, v)
}

type faultyLock struct {
	next backend.Locker
	f    *faults
}

func (l faultyLock) Lock(ctx context.Context, info backend.LockInfo, ttl time.Duration) (backend.LockInfo, error) {
	if err := l.f.check("Lock"); err != nil {
		return backend.LockInfo{}, err
	}
	return l.next.Lock(ctx, info, ttl)
}

func (l faultyLock) Renew(ctx context.Context, id string, ttl time.Duration) error {
	if err := l.f.check("Renew"); err != nil {
		return err
	}
	return l.next.Renew(ctx, id, ttl)
}

func (l faultyLock) Unlock(ctx context.Context, id string) error {
	if err := l.f.check("Unlock"); err != nil {
		return err
	}
	return l.next.Unlock(ctx, id)
}

func (l faultyLock) ForceUnlock(ctx context.Context, id string) error {
	return l.next.ForceUnlock(ctx, id)
}
