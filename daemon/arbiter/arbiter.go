package arbiter

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/ec2"
	"github.com/rpdhq/rpd/daemon/internal/component"
	"github.com/rpdhq/rpd/daemon/internal/holders"
	"github.com/rpdhq/rpd/daemon/internal/httpapi"
	"github.com/rpdhq/rpd/daemon/internal/records"
	"github.com/rpdhq/rpd/internal/open"
	"github.com/rpdhq/rpd/reconcile"
	"github.com/rpdhq/rpd/runtime/pools"
)

// Options configure an Arbiter.
type Options struct {
	// Logger receives the arbiter's logs; nil discards them.
	Logger *slog.Logger
	// Clock drives the TTLs of budget permits; nil means the wall clock.
	Clock pools.Clock
	// Backend is the open backend: queues, instance table, usage figures.
	Backend *open.Backend
	// Leases and Grants are where the grants are recorded: the backend's
	// stores fenced with the epoch this daemon leads under (a standby's
	// writes fail), assembled by the caller in one place.
	Leases pools.Store
	Grants backend.GrantStore
	// Arbitrating reports whether this daemon arbitrates now: it leads the
	// stack and has restored its grants. Only then do the grant kinds'
	// series export (a standby's zeros would make sums wrong).
	Arbitrating func() bool
	// EC2 opens the stack's EC2 client, for usage "ec2" ceilings; nil:
	// such a ceiling is refused.
	EC2 func(ctx context.Context) (*ec2.Client, error)
}

// Arbiter holds the stack's grants: the component sets kept in step with
// the runtime document, the records of every grant, and the one grant
// pipeline each kind's requests pass through (grant.go).
type Arbiter struct {
	opts       Options
	log        *slog.Logger
	backend    *open.Backend
	comp       *components
	permits    *permitTable
	grants     *grants
	leaseStore *records.AsyncDeleteStore
	requests   httpapi.RequestLatch
	stopping   atomic.Bool
}

// New builds an arbiter with every set empty; a reload (Prepare, then
// Commit) fills them, Restore brings back the grants a predecessor
// recorded.
func New(opts Options) (*Arbiter, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = pools.SystemClock{}
	}
	if opts.Arbitrating == nil {
		opts.Arbitrating = func() bool { return true }
	}
	a := &Arbiter{opts: opts, log: opts.Logger, backend: opts.Backend}
	a.leaseStore = records.NewAsyncDeleteStore(opts.Leases, a.log)
	a.grants = newGrants(opts.Grants, a.log)
	a.permits = newPermitTable(opts.Clock, a.grants)
	pm, err := pools.NewManager(pools.Options{Store: answeringLeases{a.leaseStore}, Logger: a.log.With("component", "pools")})
	if err != nil {
		a.leaseStore.Close()
		a.grants.close()
		return nil, err
	}
	a.comp = newComponents(a.log, pm, opts.Backend)
	a.comp.ceilings.ec2 = opts.EC2
	return a, nil
}

// Collectors are the arbiter's Prometheus series, read at scrape time.
func (a *Arbiter) Collectors() []prometheus.Collector {
	return []prometheus.Collector{&componentCollector{a: a}}
}

// SetStopping marks the daemon as shutting down: a request whose wait
// ends because of it answers "shutting down", not "cancelled".
func (a *Arbiter) SetStopping() { a.stopping.Store(true) }

// Close stops the components and writes the queued record deletes.
func (a *Arbiter) Close() {
	a.comp.close()
	a.leaseStore.Close()
	a.grants.sweepClaims(a.comp.ceilings.claimLive) // records of claims that ended since the last sweep
	a.grants.close()
}

// Run sweeps idle dropped components every sweepEvery until ctx ends.
func (a *Arbiter) Run(ctx context.Context, sweepEvery time.Duration) {
	component.Every(ctx, sweepEvery, a.Sweep)
}

// newComponents builds the arbiter's sets, empty.
func newComponents(log *slog.Logger, pm *pools.Manager, be *open.Backend) *components {
	return &components{
		pools:    newPoolSet(log, pm, be.Pools.LoadLeases),
		budgets:  newBudgetSet(log),
		ceilings: newCeilingSet(log),
	}
}

// Prepare validates in against every set and builds what is new,
// changing nothing: all of it, or an error joining every problem found.
func (a *Arbiter) Prepare(in *component.Input) ([]component.CommitFunc, error) {
	return component.Prepare(in, a.comp.sets()...)
}

// Commit applies prepared changes, then sweeps; it returns one line per
// component changed.
func (a *Arbiter) Commit(ctx context.Context, commits []component.CommitFunc) ([]string, error) {
	return a.comp.commit(ctx, commits)
}

// Components reports every component for /v1/status.
func (a *Arbiter) Components() api.Components {
	out := a.comp.snapshot()
	permits := a.permits.list()
	for i := range out.Budgets {
		holders.WithBudgetHolding(&out.Budgets[i], permits)
	}
	return out
}

// BudgetsInUse reports what each budget has handed out.
func (a *Arbiter) BudgetsInUse() map[string]reconcile.BudgetUse { return a.comp.budgets.inUse() }

// Probe writes and deletes a grant record, the writes every grant needs.
func (a *Arbiter) Probe(ctx context.Context) error { return a.grants.probe(ctx) }

// Restore brings back, under their IDs, the pool leases, budget permits
// and VM-ceiling claims the stack's records hold, as a new leader must
// before it grants anything.
func (a *Arbiter) Restore(ctx context.Context, ro pools.RestoreOptions) error {
	rep, err := a.comp.pools.mgr.RestoreWith(ctx, ro)
	if err != nil {
		return fmt.Errorf("restore held pool leases: %w", err)
	}
	if rep.Restored+rep.Expired+len(rep.Orphaned) > 0 {
		a.log.Info("restored pool leases recorded by the previous leader", "restored", rep.Restored, "expired", rep.Expired, "extended", rep.Extended, "orphaned", len(rep.Orphaned))
	}
	grantRep, err := a.restoreGrants(ctx, ro)
	if err != nil {
		return fmt.Errorf("restore held budget permits and VM-ceiling claims: %w", err)
	}
	if grantRep != (restoreReport{}) {
		a.log.Info("restored budget permits and VM-ceiling claims recorded by the previous leader",
			"permits", grantRep.Permits, "claims", grantRep.Claims, "expired", grantRep.Expired, "dropped", grantRep.Dropped, "unreadable", grantRep.Unreadable)
	}
	return nil
}

// LeaseStore and GrantStore are the stores grants are recorded in;
// SetLeaseStore and SetGrantStore replace them (the daemon's tests inject
// backend faults with them). Set them only while no request is in flight.
func (a *Arbiter) LeaseStore() pools.Store            { return a.leaseStore.Store }
func (a *Arbiter) GrantStore() backend.GrantStore     { return a.grants.store }
func (a *Arbiter) SetLeaseStore(s pools.Store)        { a.leaseStore.SetStore(s) }
func (a *Arbiter) SetGrantStore(s backend.GrantStore) { a.grants.store = s }

// Sweep removes the components dropped from the configuration that have
// become idle (Run does it every sweep interval).
func (a *Arbiter) Sweep(ctx context.Context) {
	a.comp.sweep(ctx)
	a.grants.sweepClaims(a.comp.ceilings.claimLive)
}
