package daemon

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/backend/open"
	"github.com/rpdhq/rpd/runtime/fatjob"
	"github.com/rpdhq/rpd/runtime/ledger"
	"github.com/rpdhq/rpd/runtime/pools"
	"github.com/rpdhq/rpd/spec"
)

// components are the runtime components the daemon serves, reconfigured in
// place on every reload: the one pools.Manager (pools are resized with
// ConfigurePool), a fatjob.Pool per budget, a ledger.Ledger per VM ceiling
// and a pickup manager per runner class. No reload ever drops a held slot,
// permit or claim: an object removed from the configuration while in use is
// kept ("retained", and reported) and removed by sweep once idle.
type components struct {
	log     *slog.Logger
	pools   *pools.Manager
	backend *open.Backend

	mu       sync.RWMutex
	poolDecl map[string]spec.Pool // the active configuration's pools
	poolGone map[string]bool      // removed from the configuration but still in use
	// poolDestroy marks removed pools whose last declaration said
	// allow_destroy = true: their holders lose their slots.
	poolDestroy map[string]bool
	priorities  map[string]int
	budgets     map[string]*budget
	ceilings    map[string]*ceiling
	classes     map[string]*class
	// claimBase is this process's first VM-ceiling claim ID, random so that
	// a claim ID a client kept from an earlier daemon names no claim here.
	claimBase ledger.ClaimID
}

type budget struct {
	name     string
	pool     *fatjob.Pool
	decl     spec.Budget
	retained bool
}

type ceiling struct {
	name     string
	ledger   *ledger.Ledger
	decl     spec.VMCeiling
	retained bool
	stop     context.CancelFunc // ends the usage poll loop; nil without a usage source
	done     chan struct{}
}

func newComponents(log *slog.Logger, pm *pools.Manager, be *open.Backend) *components {
	return &components{
		log:         log,
		pools:       pm,
		backend:     be,
		poolDecl:    map[string]spec.Pool{},
		poolGone:    map[string]bool{},
		poolDestroy: map[string]bool{},
		priorities:  map[string]int{},
		budgets:     map[string]*budget{},
		ceilings:    map[string]*ceiling{},
		classes:     map[string]*class{},
		claimBase:   randomClaimBase(),
	}
}

// randomClaimBase returns 2^32 × a random 31-bit number + 1: each process
// numbers its claims from its own region of the ID space.
func randomClaimBase() ledger.ClaimID {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return ledger.ClaimID(uint64(binary.BigEndian.Uint32(b[:])>>1)<<32 + 1)
}

// plan is a validated configuration change, built completely before
// anything is touched (Caddy's build → validate), then committed (swap).
type plan struct {
	cfg         *spec.Config
	newBudgets  map[string]*fatjob.Pool
	budgetCfg   map[string]fatjob.Config
	newCeilings map[string]*ledger.Ledger
	ceilingCfg  map[string]ledger.Config
	classPlan   classPlan
}

// at prefixes a message with the file:line of a declaration.
func at(r hcl.Range, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if r.Filename == "" {
		return errors.New(msg)
	}
	return fmt.Errorf("%s:%d,%d: %s", r.Filename, r.Start.Line, r.Start.Column, msg)
}

func budgetConfig(b spec.Budget) fatjob.Config {
	c := fatjob.Config{ScanRingBytes: b.ScanRing, DeltaCacheBytes: b.DeltaCache}
	if b.SpillSlots != nil {
		c.SpillSlots = fatjob.LimitedSpill(*b.SpillSlots)
	}
	return c
}

func ceilingConfig(v spec.VMCeiling) ledger.Config {
	return ledger.Config{Max: v.Max, ClaimTTL: v.ClaimTTL, PollInterval: v.PollInterval, StaleAfter: v.StaleAfter, Grant: ledger.GrantMode(v.Grant)}
}

// prepare validates cfg against every runtime package's own rules and
// builds the components that do not exist yet, without starting or
// installing anything. Every problem is reported, each with the file:line
// of its declaration.
func (c *components) prepare(cfg *spec.Config) (*plan, error) {
	p := &plan{
		cfg:         cfg,
		newBudgets:  map[string]*fatjob.Pool{},
		budgetCfg:   map[string]fatjob.Config{},
		newCeilings: map[string]*ledger.Ledger{},
		ceilingCfg:  map[string]ledger.Config{},
	}
	var errs []error
	for _, pl := range cfg.Pools {
		if pl.Slots < 1 {
			errs = append(errs, at(pl.DeclRange, "pool %q: slots %d must be at least 1", pl.Name, pl.Slots))
		}
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, b := range cfg.Budgets {
		fc := budgetConfig(b)
		if err := fc.Validate(); err != nil {
			errs = append(errs, at(b.DeclRange, "budget %q: %v", b.Name, err))
			continue
		}
		p.budgetCfg[b.Name] = fc
		if _, ok := c.budgets[b.Name]; !ok {
			fp, err := fatjob.New(fc)
			if err != nil {
				errs = append(errs, at(b.DeclRange, "budget %q: %v", b.Name, err))
				continue
			}
			p.newBudgets[b.Name] = fp
		}
	}
	for _, v := range cfg.VMCeilings {
		lc := ceilingConfig(v)
		if err := lc.Validate(); err != nil {
			errs = append(errs, at(v.DeclRange, "vm_ceiling %q: %v", v.Name, err))
			continue
		}
		p.ceilingCfg[v.Name] = lc
		if _, ok := c.ceilings[v.Name]; !ok {
			l, err := ledger.New(lc, ledger.WithLogger(c.log.With("vm_ceiling", v.Name)), ledger.WithFirstClaimID(c.claimBase))
			if err != nil {
				errs = append(errs, at(v.DeclRange, "vm_ceiling %q: %v", v.Name, err))
				continue
			}
			p.newCeilings[v.Name] = l
		}
	}
	cp, err := c.prepareClasses(cfg)
	if err != nil {
		errs = append(errs, err)
	}
	p.classPlan = cp
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// commit applies a prepared plan in place and returns what it changed, one
// line per component. Reconfigure calls cannot fail on a validated
// configuration; if one does anyway the component keeps its old settings
// and the error is logged and returned with the rest applied.
func (c *components) commit(p *plan) (changes []string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	declared := map[string]bool{}
	var changed []spec.Pool
	var cfgs []pools.PoolConfig
	for _, pl := range p.cfg.Pools {
		declared[pl.Name] = true
		delete(c.poolGone, pl.Name)
		delete(c.poolDestroy, pl.Name)
		if old, had := c.poolDecl[pl.Name]; had && samePool(old, pl) {
			continue
		}
		ttl := pl.LeaseTTL
		if ttl == 0 {
			ttl = api.DefaultTTLSeconds * time.Second
		}
		changed = append(changed, pl)
		cfgs = append(cfgs, pools.PoolConfig{Name: pl.Name, Slots: pl.Slots, Description: pl.Description, MaxQueued: pl.MaxQueued, LeaseTTL: ttl})
	}
	// One call publishes every new pool at once (n ConfigurePool calls
	// cost O(n²) for n new pools). It validates everything first; should
	// it refuse, each pool is configured alone so the error names its own.
	batchErr := c.pools.ConfigurePools(cfgs...)
	for i, pl := range changed {
		if batchErr != nil {
			if err := c.pools.ConfigurePool(cfgs[i]); err != nil {
				errs = append(errs, at(pl.DeclRange, "pool %q: %v", pl.Name, err))
				continue
			}
		}
		old, had := c.poolDecl[pl.Name]
		c.poolDecl[pl.Name] = pl
		if had {
			changes = append(changes, fmt.Sprintf("pool.%s: slots %d -> %d", pl.Name, old.Slots, pl.Slots))
		} else {
			changes = append(changes, fmt.Sprintf("pool.%s: created with %d slots", pl.Name, pl.Slots))
		}
	}
	for name, old := range c.poolDecl {
		if !declared[name] {
			delete(c.poolDecl, name)
			c.poolGone[name] = true
			if old.AllowDestroy {
				c.poolDestroy[name] = true
			}
			changes = append(changes, fmt.Sprintf("pool.%s: removed from the configuration", name))
		}
	}

	prios := map[string]int{}
	for _, pr := range p.cfg.Priorities {
		prios[pr.Name] = pr.Weight
	}
	if !sameInts(prios, c.priorities) {
		c.priorities = prios
		changes = append(changes, "priorities changed")
	}

	declared = map[string]bool{}
	for _, b := range p.cfg.Budgets {
		declared[b.Name] = true
		if fp, ok := p.newBudgets[b.Name]; ok {
			c.budgets[b.Name] = &budget{name: b.Name, pool: fp, decl: b}
			changes = append(changes, fmt.Sprintf("budget.%s: created", b.Name))
			continue
		}
		cur := c.budgets[b.Name]
		cur.retained = false
		if sameBudget(cur.decl, b) {
			continue
		}
		if err := cur.pool.Reconfigure(p.budgetCfg[b.Name]); err != nil {
			errs = append(errs, at(b.DeclRange, "budget %q: %v", b.Name, err))
			continue
		}
		cur.decl = b
		changes = append(changes, fmt.Sprintf("budget.%s: reconfigured", b.Name))
	}
	for name, b := range c.budgets {
		if !declared[name] && !b.retained {
			b.retained = true
			changes = append(changes, fmt.Sprintf("budget.%s: removed from the configuration", name))
		}
	}

	declared = map[string]bool{}
	for _, v := range p.cfg.VMCeilings {
		declared[v.Name] = true
		if l, ok := p.newCeilings[v.Name]; ok {
			ce := &ceiling{name: v.Name, ledger: l, decl: v}
			c.startUsage(ce)
			c.ceilings[v.Name] = ce
			changes = append(changes, fmt.Sprintf("vm_ceiling.%s: created", v.Name))
			continue
		}
		cur := c.ceilings[v.Name]
		cur.retained = false
		if sameCeiling(cur.decl, v) {
			continue
		}
		if err := cur.ledger.Reconfigure(p.ceilingCfg[v.Name]); err != nil {
			errs = append(errs, at(v.DeclRange, "vm_ceiling %q: %v", v.Name, err))
			continue
		}
		if !sameUsage(cur.decl.Usage, v.Usage) {
			cur.stopUsage()
			cur.decl = v
			c.startUsage(cur)
		}
		cur.decl = v
		changes = append(changes, fmt.Sprintf("vm_ceiling.%s: reconfigured", v.Name))
	}
	for name, ce := range c.ceilings {
		if !declared[name] && !ce.retained {
			ce.retained = true
			changes = append(changes, fmt.Sprintf("vm_ceiling.%s: removed from the configuration", name))
		}
	}

	cc, err := c.commitClasses(p.classPlan)
	changes = append(changes, cc...)
	if err != nil {
		errs = append(errs, err)
	}
	c.sweepLocked()
	return changes, errors.Join(errs...)
}

// sweep removes components that were dropped from the configuration and
// have become idle. The daemon calls it after every reload and periodically.
func (c *components) sweep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweepLocked()
}

func (c *components) sweepLocked() {
	for name := range c.poolGone {
		if c.poolDestroy[name] {
			c.dropHolders(name)
		}
		switch err := c.pools.DeletePool(name); {
		case err == nil, errors.Is(err, pools.ErrUnknownPool):
			delete(c.poolGone, name)
			delete(c.poolDestroy, name)
			c.log.Info("removed pool dropped from the configuration", "pool", name)
		case errors.Is(err, pools.ErrPoolInUse):
			// Kept until its holders release; reported as retained.
		default:
			c.log.Warn("cannot remove pool dropped from the configuration", "pool", name, "err", err)
		}
	}
	for name, b := range c.budgets {
		if b.retained && budgetIdle(b.pool) {
			delete(c.budgets, name)
			c.log.Info("removed budget dropped from the configuration", "budget", name)
		}
	}
	for name, ce := range c.ceilings {
		if !ce.retained {
			continue
		}
		if st := ce.ledger.Status(); st.LocalClaims == 0 && st.Queued == 0 {
			ce.stopUsage()
			delete(c.ceilings, name)
			c.log.Info("removed vm_ceiling dropped from the configuration", "vm_ceiling", name)
		}
	}
	c.sweepClassesLocked()
}

// dropHolders releases every lease of a removed pool declared with
// allow_destroy. The leases are found through the lease store, which
// records every grant; waiting requests are not cancelled (new ones are
// refused), so the pool goes once the last of them has given up.
func (c *components) dropHolders(name string) {
	if c.backend == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	recs, err := c.backend.Pools.LoadLeases(ctx)
	if err != nil {
		c.log.Warn("cannot list the leases of a destroyed pool; retrying at the next sweep", "pool", name, "err", err)
		return
	}
	n := 0
	for _, r := range recs {
		if r.Pool != name {
			continue
		}
		if l, err := c.pools.Lease(r.LeaseID); err == nil {
			_ = l.Release()
			n++
		}
	}
	if n > 0 {
		c.log.Warn("pool removed with allow_destroy = true: its holders lost their slots", "pool", name, "leases", n)
	}
}

func budgetIdle(p *fatjob.Pool) bool {
	s := p.Stats()
	return s.ScanRingInUse == 0 && s.DeltaCacheInUse == 0 && s.SpillSlotsInUse == 0 && s.Queued == 0
}

// startUsage starts ce's usage poll loop when it declares a source. An
// operator-pushed ceiling (no usage block) is fed by PUT .../usage only.
func (c *components) startUsage(ce *ceiling) {
	u := ce.decl.Usage
	if u == nil {
		return
	}
	src := &ledger.HTTPSource{URL: u.URL, Field: u.Field, Timeout: u.Timeout}
	ctx, cancel := context.WithCancel(context.Background())
	ce.stop, ce.done = cancel, make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		_ = ce.ledger.Run(ctx, src)
	}(ce.done)
}

func (ce *ceiling) stopUsage() {
	if ce.stop != nil {
		ce.stop()
		<-ce.done
		ce.stop, ce.done = nil, nil
	}
}

// close stops every background loop.
func (c *components) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ce := range c.ceilings {
		ce.stopUsage()
	}
}

func (c *components) budget(name string) (*budget, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	b, ok := c.budgets[name]
	return b, ok
}

// claimLive reports whether claim id of the named ceiling still counts.
func (c *components) claimLive(name string, id ledger.ClaimID) bool {
	ce, ok := c.ceiling(name)
	if !ok {
		return false
	}
	_, ok = ce.ledger.Lookup(id)
	return ok
}

func (c *components) ceiling(name string) (*ceiling, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ce, ok := c.ceilings[name]
	return ce, ok
}

// poolRemoved reports whether a pool was dropped from the configuration
// (and is kept only for its holders).
func (c *components) poolRemoved(name string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.poolGone[name]
}

func (c *components) priority(name string) (int, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	w, ok := c.priorities[name]
	return w, ok
}

// snapshot reports every component for /v1/status.
func (c *components) snapshot() api.Components {
	out := api.Components{
		Pools:      c.poolStatuses(),
		Budgets:    []api.BudgetStatus{},
		Ceilings:   []api.CeilingStatus{},
		Classes:    c.classStatuses(),
		Priorities: map[string]int{},
	}
	c.mu.RLock()
	for n, w := range c.priorities {
		out.Priorities[n] = w
	}
	for _, b := range c.budgets {
		out.Budgets = append(out.Budgets, budgetStatus(b))
	}
	for _, ce := range c.ceilings {
		out.Ceilings = append(out.Ceilings, ceilingStatus(ce))
	}
	c.mu.RUnlock()
	sort.Slice(out.Budgets, func(i, j int) bool { return out.Budgets[i].Name < out.Budgets[j].Name })
	sort.Slice(out.Ceilings, func(i, j int) bool { return out.Ceilings[i].Name < out.Ceilings[j].Name })
	return out
}

func (c *components) poolStatuses() []api.PoolStatus {
	c.mu.RLock()
	gone := make(map[string]bool, len(c.poolGone))
	for n := range c.poolGone {
		gone[n] = true
	}
	c.mu.RUnlock()
	list := c.pools.ListPools()
	out := make([]api.PoolStatus, 0, len(list))
	for _, s := range list {
		out = append(out, poolStatus(s, gone[s.Name]))
	}
	return out
}

func poolStatus(s pools.PoolStatus, retained bool) api.PoolStatus {
	return api.PoolStatus{Name: s.Name, Description: s.Description, Total: s.Total, Used: s.Used, Available: s.Available, Queued: s.Queued, Retained: retained}
}

func budgetStatus(b *budget) api.BudgetStatus {
	p := b.pool
	st := p.Stats()
	out := api.BudgetStatus{
		Name:       b.name,
		ScanRing:   api.Resource{Total: p.ScanRingTotal(), Available: p.ScanRingAvailable()},
		DeltaCache: api.Resource{Total: p.DeltaCacheTotal(), Available: p.DeltaCacheAvailable()},
		Queued:     st.Queued,
		Retained:   b.retained,
	}
	total, limited := p.SpillSlotsTotal()
	avail, _ := p.SpillSlotsAvailable()
	out.SpillSlots = api.SpillSlots{Unlimited: !limited}
	if limited {
		out.SpillSlots.Total, out.SpillSlots.Available = total, avail
	}
	return out
}

func ceilingStatus(ce *ceiling) api.CeilingStatus {
	st := ce.ledger.Status()
	out := api.CeilingStatus{
		Name: ce.name, Max: st.Max, ProviderActive: st.ProviderActive, LocalClaims: st.LocalClaims,
		Effective: st.Effective, Available: st.Available, Queued: st.Queued, Stale: st.Stale,
		LastError: st.LastError, Retained: ce.retained,
	}
	if !st.LastUsageAt.IsZero() {
		t := st.LastUsageAt
		out.LastUsageAt = &t
	}
	return out
}

func samePool(a, b spec.Pool) bool {
	return a.Slots == b.Slots && a.Description == b.Description && a.LeaseTTL == b.LeaseTTL && a.MaxQueued == b.MaxQueued
}

func sameBudget(a, b spec.Budget) bool {
	return a.ScanRing == b.ScanRing && a.DeltaCache == b.DeltaCache && sameIntPtr(a.SpillSlots, b.SpillSlots)
}

func sameCeiling(a, b spec.VMCeiling) bool {
	return a.Max == b.Max && a.ClaimTTL == b.ClaimTTL && a.PollInterval == b.PollInterval &&
		a.StaleAfter == b.StaleAfter && a.Grant == b.Grant && sameUsage(a.Usage, b.Usage)
}

func sameUsage(a, b *spec.UsageSource) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func sameIntPtr(a, b *int) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func sameInts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// joinLines renders changes for a log line.
func joinLines(lines []string) string { return strings.Join(lines, "; ") }
