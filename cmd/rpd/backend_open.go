package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/aws"
	"github.com/rpdhq/rpd/backend/local"
	"github.com/rpdhq/rpd/reconcile"
	"github.com/rpdhq/rpd/runtime/pools"
)

// openedBackend is a configured backend, opened, as reconcile sees it.
type openedBackend struct {
	live  reconcile.Live
	where string // for messages: "local backend .rpd/state.db"
	close func() error
}

// openBackend opens the backend a configuration (or a saved plan) names,
// for stack. The local backend creates its file; the aws backend makes no
// call until used and creates nothing before apply.
func openBackend(ctx context.Context, stack string, b reconcile.BackendConfig) (*openedBackend, error) {
	switch b.Type {
	case "", "local":
		path := b.Path
		if path == "" {
			path = local.DefaultPath
		}
		lb, err := local.Open(ctx, path, local.Options{Stack: stack})
		if err != nil {
			return nil, err
		}
		return &openedBackend{
			live: reconcile.Live{
				Queues: lb, State: lb, Lock: lb,
				Held: heldSlots(lb.PoolStore(), time.Now),
			},
			where: "local backend " + path,
			close: lb.Close,
		}, nil
	case "aws":
		ab, err := aws.Open(ctx, aws.Options{Stack: stack, Region: b.Region, Profile: b.Profile, TablePrefix: b.TablePrefix})
		if err != nil {
			return nil, err
		}
		return &openedBackend{
			live: reconcile.Live{
				Queues: ab, State: ab, Lock: ab,
				Tables: ab,
				Held:   heldSlotsUnlessMissing(ab, heldSlots(ab.PoolStore(), time.Now)),
			},
			where: "aws backend (table prefix " + b.TablePrefix + ")",
			close: func() error { return nil },
		}, nil
	}
	return nil, fmt.Errorf("unknown backend type %q: use \"local\" or \"aws\"", b.Type)
}

// heldSlots sums the unexpired leases of each pool.
func heldSlots(store pools.Store, now func() time.Time) reconcile.HeldSlotsFunc {
	return func(ctx context.Context) (map[string]int, error) {
		recs, err := store.LoadLeases(ctx)
		if err != nil {
			return nil, err
		}
		t := now()
		held := map[string]int{}
		for _, r := range recs {
			if r.ExpiresAt.IsZero() || r.ExpiresAt.After(t) {
				held[r.Pool] += r.Slots
			}
		}
		return held, nil
	}
}

// heldSlotsUnlessMissing reports no held slots while the stack's tables do
// not exist yet (nothing can be held before the first apply).
func heldSlotsUnlessMissing(b *aws.Backend, next reconcile.HeldSlotsFunc) reconcile.HeldSlotsFunc {
	return func(ctx context.Context) (map[string]int, error) {
		infos, err := b.TableStatus(ctx)
		if err != nil {
			return nil, err
		}
		for _, i := range infos {
			if i.Role == aws.RoleLeases && !i.Exists {
				return map[string]int{}, nil
			}
		}
		return next(ctx)
	}
}

// openBackendReadOnly is openBackend for commands that only read (plan):
// a local database file that does not exist yet is not created; it reads as
// a backend holding nothing.
func openBackendReadOnly(ctx context.Context, stack string, b reconcile.BackendConfig) (*openedBackend, error) {
	if b.Type == "" || b.Type == "local" {
		path := b.Path
		if path == "" {
			path = local.DefaultPath
		}
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			var none emptyBackend
			return &openedBackend{
				live:  reconcile.Live{Queues: none, State: none},
				where: "local backend " + path + " (not created yet)",
				close: func() error { return nil },
			}, nil
		}
	}
	return openBackend(ctx, stack, b)
}

// emptyBackend is a backend with nothing in it: what a local database that
// was never written holds.
type emptyBackend struct{}

func (emptyBackend) CreateQueue(context.Context, string, backend.QueueAttributes) error {
	return errors.New("the empty backend is read-only")
}
func (emptyBackend) UpdateQueue(context.Context, string, backend.QueueAttributes) error {
	return errors.New("the empty backend is read-only")
}
func (emptyBackend) DeleteQueue(_ context.Context, name string) error {
	return fmt.Errorf("queue %s: %w", name, backend.ErrQueueNotFound)
}
func (emptyBackend) DescribeQueue(_ context.Context, name string) (backend.QueueInfo, error) {
	return backend.QueueInfo{}, fmt.Errorf("queue %s: %w", name, backend.ErrQueueNotFound)
}
func (emptyBackend) ListQueues(context.Context, string) ([]string, error) { return nil, nil }
func (emptyBackend) ReadState(context.Context) ([]byte, int64, error)     { return nil, 0, nil }
func (emptyBackend) WriteState(context.Context, []byte, int64) (int64, error) {
	return 0, errors.New("the empty backend is read-only")
}
