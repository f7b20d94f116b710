package arbiter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/daemon/internal/component"
	"github.com/rpdhq/rpd/daemon/internal/holders"
	"github.com/rpdhq/rpd/daemon/internal/httpapi"
	"github.com/rpdhq/rpd/reconcile"
	"github.com/rpdhq/rpd/runtime/fatjob"
)

// BudgetConfig is the one conversion of a budget entry to the fatjob
// package's configuration; an unset spill_slots is unlimited.
func BudgetConfig(e reconcile.BudgetEntry) fatjob.Config {
	c := fatjob.Config{ScanRingBytes: e.ScanRing, DeltaCacheBytes: e.DeltaCache, MaxQueued: e.MaxQueued}
	if e.SpillSlots.Set {
		c.SpillSlots = fatjob.LimitedSpill(e.SpillSlots.Value)
	}
	return c
}

// budget is one budget's fatjob.Pool.
type budget struct {
	name  string
	pool  *fatjob.Pool
	entry reconcile.BudgetEntry
	component.Retention
}

// budgetSet is the budgets of the configuration, a fatjob.Pool each.
type budgetSet struct {
	log *slog.Logger
	k   *component.Keyed[reconcile.BudgetEntry, *fatjob.Pool, *budget]
}

var _ component.Set = (*budgetSet)(nil)

func newBudgetSet(log *slog.Logger) *budgetSet {
	return &budgetSet{log: log, k: component.NewKeyed(reconcile.TypeBudget, component.Hooks[reconcile.BudgetEntry, *fatjob.Pool, *budget]{
		Check: func(_ string, e reconcile.BudgetEntry) error { return BudgetConfig(e).Validate() },
		Build: func(_ string, e reconcile.BudgetEntry) (*fatjob.Pool, bool, error) {
			fp, err := fatjob.New(BudgetConfig(e))
			return fp, err == nil, err
		},
		Create: func(name string, e reconcile.BudgetEntry, fp *fatjob.Pool, _ *budget, _ bool) (*budget, string) {
			return &budget{name: name, pool: fp, entry: e}, fmt.Sprintf("budget.%s: created", name)
		},
		Update: func(name string, cur *budget, e reconcile.BudgetEntry) (string, error) {
			if cur.entry == e {
				return "", nil
			}
			if err := cur.pool.Reconfigure(BudgetConfig(e)); err != nil {
				return "", err
			}
			change := component.EntryChange("budget."+name, cur.entry, e)
			cur.entry = e
			return change, nil
		},
	})}
}

func (s *budgetSet) Prepare(in *component.Input) (component.CommitFunc, error) {
	return s.k.Prepare(in, in.Doc().Budgets)
}

func (s *budgetSet) Sweep(ctx context.Context) {
	removed := s.k.Sweep(func(b *budget) bool {
		st := b.pool.Stats()
		return st.ScanRingInUse == 0 && st.DeltaCacheInUse == 0 && st.SpillSlotsInUse == 0 && st.Queued == 0
	})
	for name := range removed {
		s.log.Info("removed budget dropped from the configuration", "budget", name)
	}
}

func (s *budgetSet) Close() {}

// live returns the pool of a declared budget (not of a removed one).
func (s *budgetSet) live(name string) (*fatjob.Pool, bool) {
	b, ok := s.k.Live(name)
	if !ok {
		return nil, false
	}
	return b.pool, true
}

// get reports one budget, declared or retained.
func (s *budgetSet) get(name string) (st api.BudgetStatus, ok bool) {
	s.k.With(func(m map[string]*budget) {
		var b *budget
		if b, ok = m[name]; ok {
			st = budgetStatus(b)
		}
	})
	return st, ok
}

func (s *budgetSet) list() []api.BudgetStatus {
	var out []api.BudgetStatus
	s.k.With(func(m map[string]*budget) {
		out = make([]api.BudgetStatus, 0, len(m))
		for _, b := range m {
			out = append(out, budgetStatus(b))
		}
	})
	slices.SortFunc(out, func(a, b api.BudgetStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (s *budgetSet) Status(out *api.Components) { out.Budgets = s.list() }

// inUse reports what each budget has handed out.
func (s *budgetSet) inUse() map[string]reconcile.BudgetUse {
	out := map[string]reconcile.BudgetUse{}
	s.k.With(func(m map[string]*budget) {
		for name, b := range m {
			st := b.pool.Stats()
			out[name] = reconcile.BudgetUse{ScanRing: st.ScanRingInUse, DeltaCache: st.DeltaCacheInUse, SpillSlots: st.SpillSlotsInUse}
		}
	})
	return out
}

func budgetStatus(b *budget) api.BudgetStatus {
	p := b.pool
	st := p.Stats()
	out := api.BudgetStatus{
		Name:       b.name,
		ScanRing:   api.Resource{Total: p.ScanRingTotal(), Available: p.ScanRingAvailable()},
		DeltaCache: api.Resource{Total: p.DeltaCacheTotal(), Available: p.DeltaCacheAvailable()},
		Queued:     st.Queued,
		Retained:   b.Retained,
	}
	total, limited := p.SpillSlotsTotal()
	avail, _ := p.SpillSlotsAvailable()
	out.SpillSlots = api.SpillSlots{Unlimited: !limited}
	if limited {
		out.SpillSlots.Total, out.SpillSlots.Available = total, avail
	}
	return out
}

// collect writes the budgets' series; held counts the remote permits of
// each budget.
func (s *budgetSet) collect(ch chan<- prometheus.Metric, held map[string]int) {
	var list []*budget
	s.k.With(func(m map[string]*budget) { list = slices.Collect(maps.Values(m)) })
	for _, b := range list {
		n, p := b.name, b.pool
		st := p.Stats()
		component.Gauge(ch, descBudgetBytes, float64(p.ScanRingTotal()), n, "scan_ring")
		component.Gauge(ch, descBudgetBytes, float64(p.DeltaCacheTotal()), n, "delta_cache")
		component.Gauge(ch, descBudgetBytesInUse, float64(st.ScanRingInUse), n, "scan_ring")
		component.Gauge(ch, descBudgetBytesInUse, float64(st.DeltaCacheInUse), n, "delta_cache")
		if total, limited := p.SpillSlotsTotal(); limited {
			component.Gauge(ch, descBudgetSpill, float64(total), n)
		}
		component.Gauge(ch, descBudgetSpillInUse, float64(st.SpillSlotsInUse), n)
		component.Gauge(ch, descBudgetQueued, float64(st.Queued), n)
		component.Gauge(ch, descPermitsHeld, float64(held[n]), n)
		component.Counter(ch, descBudgetEvents, float64(st.Granted), n, "granted")
		component.Counter(ch, descBudgetEvents, float64(st.Denied), n, "denied")
		component.Counter(ch, descBudgetEvents, float64(st.Waited), n, "waited")
		component.Counter(ch, descBudgetEvents, float64(st.Cancelled), n, "cancelled")
		component.Counter(ch, descBudgetWaitSecs, st.WaitTime.Seconds(), n)
	}
}

// exceeds reports whether r can never fit p's totals.
func exceeds(p *fatjob.Pool, r fatjob.Request) bool {
	if r.ScanRingBytes > p.ScanRingTotal() || r.DeltaCacheBytes > p.DeltaCacheTotal() {
		return true
	}
	return false
}

// AcquirePermit grants a permit of budget to ctx's principal (the budget
// kind of the grant pipeline); the returned release gives it back when its
// answer cannot be delivered.
func (a *Arbiter) AcquirePermit(ctx context.Context, name string, req api.PermitRequest) (api.Lease, func(), error) {
	wait, err := httpapi.WaitDuration(req.WaitSeconds)
	if err != nil {
		return api.Lease{}, nil, err
	}
	ttl, err := httpapi.TTLDuration(req.TTLSeconds, defaultTTL)
	if err != nil {
		return api.Lease{}, nil, err
	}
	if req.ScanRingBytes > fatjob.MaxBudgetBytes || req.DeltaCacheBytes > fatjob.MaxBudgetBytes {
		return api.Lease{}, nil, httpapi.BadRequest("scan_ring_bytes %d and delta_cache_bytes %d: each must be at most %d", req.ScanRingBytes, req.DeltaCacheBytes, fatjob.MaxBudgetBytes)
	}
	if req.ScanRingBytes == 0 && req.DeltaCacheBytes == 0 && !req.Spill {
		return api.Lease{}, nil, httpapi.BadRequest("the permit asks for nothing: set scan_ring_bytes, delta_cache_bytes or spill")
	}
	pool, ok := a.comp.budgets.live(name)
	if !ok {
		return api.Lease{}, nil, httpapi.NotFound("no budget %q: declare it with a budget block", name)
	}
	latch, err := latchKey("permit", name, req.RequestID)
	if err != nil {
		return api.Lease{}, nil, err
	}
	fr := fatjob.Request{ScanRingBytes: req.ScanRingBytes, DeltaCacheBytes: req.DeltaCacheBytes, NeedsSpillSlot: req.Spill}
	var perm *fatjob.Permit
	l, err := grant(ctx, a, latch, grantKind[api.Lease]{
		existing: func() (api.Lease, string, string, bool) {
			l, owner, ok := a.permits.get(permitID(name, req.RequestID))
			return l, owner, "permit " + l.LeaseID, ok
		},
		wait: wait,
		take: func(ctx context.Context) (api.Lease, error) {
			if wait == 0 {
				var ok bool
				if perm, ok = pool.TryAcquire(fr); !ok {
					if exceeds(pool, fr) {
						return api.Lease{}, httpapi.Conflict("the permit asks for more than budget " + name + " holds in total; it can never be granted")
					}
					return api.Lease{}, httpapi.Conflict("budget " + name + " cannot grant the permit now; retry, or pass wait_seconds to wait in its queue")
				}
			} else {
				var err error
				if perm, err = pool.Acquire(ctx, fr); err != nil {
					return api.Lease{}, err
				}
			}
			return api.Lease{Budget: name, ScanRingBytes: perm.ScanRingBytes(), DeltaCacheBytes: perm.DeltaCacheBytes(), Spill: perm.CanSpill(), RequestID: req.RequestID}, nil
		},
		fail: func(err error) error {
			switch {
			case errors.Is(err, fatjob.ErrExceedsCapacity):
				return httpapi.Conflict(err.Error())
			case errors.Is(err, context.DeadlineExceeded):
				return httpapi.WaitTimedOut(fmt.Sprintf("budget %s: a permit for %d scan-ring bytes, %d delta-cache bytes (spill %v)", name, fr.ScanRingBytes, fr.DeltaCacheBytes, fr.NeedsSpillSlot), wait)
			}
			return err
		},
		// add records the permit (and gives it back when it cannot).
		record: func(ctx context.Context, l api.Lease) (api.Lease, error) {
			return a.permits.add(ctx, l, ttl, perm.Release)
		},
	})
	if err != nil {
		return api.Lease{}, nil, err
	}
	return l, func() { _ = a.permits.release(l.LeaseID, "") }, nil
}

// ReleasePermit ends a permit of budget name.
func (a *Arbiter) ReleasePermit(ctx context.Context, name, id string) error {
	if err := a.permits.holderOnly(ctx, id); err != nil {
		return err
	}
	return a.permits.release(id, name)
}

// Budgets lists the budgets with their remote permits counted.
func (a *Arbiter) Budgets() []api.BudgetStatus {
	list := a.comp.budgets.list()
	permits := a.permits.list()
	for i := range list {
		holders.WithBudgetHolding(&list[i], permits)
	}
	return list
}

// Budget reports one budget with its permits.
func (a *Arbiter) Budget(_ context.Context, name string) (api.BudgetDetail, error) {
	st, ok := a.comp.budgets.get(name)
	if !ok {
		return api.BudgetDetail{}, httpapi.NotFound("no budget %q: declare it with a budget block", name)
	}
	holders := holders.WithBudgetHolding(&st, a.permits.list())
	return api.BudgetDetail{BudgetStatus: st, Holders: holders}, nil
}
