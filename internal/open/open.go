package open

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/aws"
	"github.com/rpdhq/rpd/backend/local"
	"github.com/rpdhq/rpd/reconcile"
	"github.com/rpdhq/rpd/runtime/pickup"
	"github.com/rpdhq/rpd/runtime/pools"
)

// Options tune Open.
type Options struct {
	// ReadOnly is for commands that only read (plan, force-unlock): a local
	// database file that does not exist yet is not created, and the
	// Backend reads as one holding nothing (see Backend.Exists).
	ReadOnly bool
	// Logger receives the backend's logs; nil discards them.
	Logger *slog.Logger
}

// Backend is an open backend, seen through the interfaces its callers use.
// Every field is set, except where its comment says otherwise.
type Backend struct {
	// Config is the configuration opened, with its defaults applied.
	Config backend.Config
	// Where names the backend in messages: "local backend .rpd/state.db".
	Where string
	// Exists is false for a read-only local backend whose file does not
	// exist yet: Queues and State read as empty and refuse writes, and
	// every other interface is nil.
	Exists bool

	Queues backend.QueueAdmin
	State  backend.StateStore
	Lock   backend.Locker
	// Tables is set on aws only: its stack's tables are resources that
	// apply creates.
	Tables backend.TableAdmin
	Leader backend.LeaderStore

	// Pools keeps pool leases and Grants budget permits and VM-ceiling
	// claims; FencedPools and FencedGrants return the same stores whose
	// writes succeed only while epoch is the stack's leader epoch.
	Pools        pools.Store
	FencedPools  func(epoch int64) pools.Store
	Grants       backend.GrantStore
	FencedGrants func(epoch int64) backend.GrantStore
	// PrepareWrites, when set, readies the fenced stores' writes of a new
	// leader epoch before they come (the local backend opens its grant
	// journal segment); a failure only means the first write does it.
	PrepareWrites func(ctx context.Context, epoch int64) error
	// Queue returns the named runner queue; Instances is the instance table.
	Queue     func(name string) pickup.Queue
	Instances pickup.InstanceTable

	close func() error
	// held sums the unexpired pool leases per pool (Live().Held); nil for
	// a backend that does not exist.
	held reconcile.HeldSlotsFunc
}

// Open opens the backend cfg names, for stack, with cfg's defaults applied.
// The local backend creates its file (unless opts.ReadOnly); the aws backend
// makes no call until used and creates nothing before apply.
func Open(ctx context.Context, stack string, cfg backend.Config, opts Options) (*Backend, error) {
	cfg = cfg.WithDefaults(stack)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	switch cfg.Type {
	case "local":
		if opts.ReadOnly {
			if _, err := os.Stat(cfg.Path); errors.Is(err, fs.ErrNotExist) {
				var none emptyBackend
				return &Backend{
					Config: cfg, Where: "local backend " + cfg.Path + " (not created yet)",
					Queues: none, State: none,
					close: func() error { return nil },
				}, nil
			}
		}
		lb, err := local.Open(ctx, cfg.Path, local.Options{Stack: stack, Logger: log.With("backend", "local"), NormalPrioritySync: cfg.NormalPrioritySync})
		if err != nil {
			return nil, err
		}
		b := Local(lb)
		b.Config = cfg
		return b, nil
	case "aws":
		ab, err := aws.Open(ctx, aws.Options{Stack: stack, Region: cfg.Region, Profile: cfg.Profile,
			TablePrefix: cfg.TablePrefix, Logger: log.With("backend", "aws")})
		if err != nil {
			return nil, err
		}
		b := AWS(ab)
		b.Config = cfg
		return b, nil
	}
	return nil, fmt.Errorf("unknown backend type %q: use \"local\" or \"aws\"", cfg.Type)
}

// Local is lb seen as a Backend; closing it closes lb. Open uses it, and
// tests that open a local backend themselves.
func Local(lb *local.Backend) *Backend {
	return &Backend{
		Config: backend.Config{Type: "local", Path: lb.Path()},
		Where:  "local backend " + lb.Path(), Exists: true,
		Queues: lb, State: lb, Lock: lb, Leader: lb,
		Pools:         lb.PoolStore(),
		FencedPools:   func(epoch int64) pools.Store { return lb.PoolStore().Fence(epoch) },
		Grants:        lb.GrantStore(),
		FencedGrants:  func(epoch int64) backend.GrantStore { return lb.GrantStore().Fence(epoch) },
		PrepareWrites: lb.PrepareJournal,
		Queue:         func(name string) pickup.Queue { return lb.Queue(name) },
		Instances:     lb.Instances(),
		close:         lb.Close,
		held:          heldSlots(lb.PoolStore(), time.Now),
	}
}

// AWS is ab seen as a Backend. Open uses it, and tests that open an aws
// backend on emulators themselves.
func AWS(ab *aws.Backend) *Backend {
	return &Backend{
		Config: backend.Config{Type: "aws", TablePrefix: ab.TablePrefix()},
		Where:  "aws backend (table prefix " + ab.TablePrefix() + ")", Exists: true,
		Queues: ab, State: ab, Lock: ab, Tables: ab, Leader: ab,
		Pools:        ab.PoolStore(),
		FencedPools:  func(epoch int64) pools.Store { return ab.PoolStore().Fence(epoch) },
		Grants:       ab.GrantStore(),
		FencedGrants: func(epoch int64) backend.GrantStore { return ab.GrantStore().Fence(epoch) },
		Queue:        func(name string) pickup.Queue { return ab.Queue(name) },
		Instances:    ab.Instances(),
		close:        ab.Close,
		held:         heldSlotsUnlessMissing(ab, heldSlots(ab.PoolStore(), time.Now)),
	}
}

// Close releases the backend (the local database's file handles).
func (b *Backend) Close() error { return b.close() }

// Ping checks that the backend answers, by reading the state document.
func (b *Backend) Ping(ctx context.Context) error {
	_, _, err := b.State.ReadState(ctx)
	return err
}

// Live is the backend as reconcile's plan and apply see it, with Held
// summing the stack's unexpired pool leases as stored (nothing is held
// before the first apply; a backend that does not exist has no Held).
func (b *Backend) Live() reconcile.Live {
	live := reconcile.Live{Queues: b.Queues, State: b.State, Lock: b.Lock, Tables: b.Tables}
	if b.held != nil {
		live.Held = b.held
	}
	if b.Pools != nil && b.Grants != nil {
		live.Leases = leaseRecords{b.Pools, b.Grants}
	}
	return live
}

// leaseRecords are every grant a daemon recorded in a backend: pool leases
// and the other grants (permits, claims). rpd destroy removes them.
type leaseRecords struct {
	pools  pools.Store
	grants backend.GrantStore
}

var _ reconcile.LeaseRecords = leaseRecords{}

func (l leaseRecords) CountLeaseRecords(ctx context.Context) (int, error) {
	leases, err := l.pools.LoadLeases(ctx)
	if err != nil {
		return 0, fmt.Errorf("read pool leases: %w", err)
	}
	grants, err := l.grants.LoadGrants(ctx)
	if err != nil {
		return 0, fmt.Errorf("read grants: %w", err)
	}
	return len(leases) + len(grants), nil
}

func (l leaseRecords) DeleteLeaseRecords(ctx context.Context) (int, error) {
	leases, err := l.pools.LoadLeases(ctx)
	if err != nil {
		return 0, fmt.Errorf("read pool leases: %w", err)
	}
	n := 0
	for _, r := range leases {
		if err := l.pools.DeleteLease(ctx, r.LeaseID); err != nil {
			return n, fmt.Errorf("delete pool lease %s: %w", r.LeaseID, err)
		}
		n++
	}
	grants, err := l.grants.LoadGrants(ctx)
	if err != nil {
		return n, fmt.Errorf("read grants: %w", err)
	}
	for id := range grants {
		if err := l.grants.DeleteGrant(ctx, id); err != nil {
			return n, fmt.Errorf("delete grant %s: %w", id, err)
		}
		n++
	}
	return n, nil
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

// emptyBackend is a backend with nothing in it: what a local database that
// was never written holds.
type emptyBackend struct{}

var errReadOnly = errors.New("the local backend does not exist yet, and was opened read-only; run rpd apply to create it")

func (emptyBackend) CreateQueue(context.Context, string, backend.QueueAttributes) error {
	return errReadOnly
}
func (emptyBackend) UpdateQueue(context.Context, string, backend.QueueAttributes) error {
	return errReadOnly
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
	return 0, errReadOnly
}
