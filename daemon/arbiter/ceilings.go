package arbiter

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/backend/ec2"
	"github.com/rpdhq/rpd/daemon/internal/component"
	"github.com/rpdhq/rpd/daemon/internal/holders"
	"github.com/rpdhq/rpd/daemon/internal/httpapi"
	"github.com/rpdhq/rpd/daemon/internal/security"
	"github.com/rpdhq/rpd/reconcile"
	"github.com/rpdhq/rpd/runtime/ledger"
	"github.com/rpdhq/rpd/spec"
)

// CeilingConfig is the one conversion of a VM-ceiling entry to the ledger
// package's configuration and usage source (nil when figures are pushed).
func CeilingConfig(e reconcile.CeilingEntry) (ledger.Config, *ledger.HTTPSource) {
	c := ledger.Config{Max: e.Max, ClaimTTL: time.Duration(e.ClaimTTL), PollInterval: time.Duration(e.PollInterval),
		StaleAfter: time.Duration(e.StaleAfter), Grant: ledger.GrantMode(e.Grant), MaxQueued: e.MaxQueued}
	if e.Usage.Type != spec.UsageHTTP {
		return c, nil // pushed figures, or usage "ec2" (usageSource)
	}
	return c, &ledger.HTTPSource{URL: e.Usage.URL, Field: e.Usage.Field, Timeout: time.Duration(e.Usage.Timeout)}
}

// ceiling is one VM ceiling's ledger and its usage poll loop.
type ceiling struct {
	name                string
	ledger              *ledger.Ledger
	entry               reconcile.CeilingEntry
	component.Retention                    // kept while claims count
	stop                context.CancelFunc // ends the usage poll loop; nil without a usage source
	done                chan struct{}
}

// ceilingSet is the VM ceilings of the configuration, a ledger each.
type ceilingSet struct {
	log *slog.Logger
	// claimBase is this process's first claim ID, random so that a claim
	// ID a client kept from an earlier daemon names no claim here.
	claimBase ledger.ClaimID
	// ec2 opens the stack's EC2 client, for usage "ec2" sources
	// (fleet_adapters.go); nil: such a source is refused.
	ec2 func(ctx context.Context) (*ec2.Client, error)

	k *component.Keyed[reconcile.CeilingEntry, *ledger.Ledger, *ceiling]
}

var _ component.Set = (*ceilingSet)(nil)

func newCeilingSet(log *slog.Logger) *ceilingSet {
	s := &ceilingSet{log: log, claimBase: randomClaimBase()}
	s.k = component.NewKeyed(reconcile.TypeVMCeiling, component.Hooks[reconcile.CeilingEntry, *ledger.Ledger, *ceiling]{
		Check: func(_ string, e reconcile.CeilingEntry) error {
			lc, _ := CeilingConfig(e)
			if err := lc.Validate(); err != nil {
				return err
			}
			_, err := s.usageSource(e)
			return err
		},
		Build: func(name string, e reconcile.CeilingEntry) (*ledger.Ledger, bool, error) {
			lc, _ := CeilingConfig(e)
			l, err := s.newLedger(name, lc)
			return l, err == nil, err
		},
		Create: func(name string, e reconcile.CeilingEntry, l *ledger.Ledger, _ *ceiling, _ bool) (*ceiling, string) {
			ce := &ceiling{name: name, ledger: l, entry: e}
			src, _ := s.usageSource(e) // checked by prepare
			ce.startUsage(nil, src)
			return ce, fmt.Sprintf("vm_ceiling.%s: created", name)
		},
		Update: func(name string, cur *ceiling, e reconcile.CeilingEntry) (string, error) {
			if cur.entry == e {
				return "", nil
			}
			lc, _ := CeilingConfig(e)
			if err := cur.ledger.Reconfigure(lc); err != nil {
				return "", err
			}
			change := component.EntryChange("vm_ceiling."+name, cur.entry, e)
			usageChanged := cur.entry.Usage != e.Usage
			cur.entry = e
			if usageChanged {
				// The new loop starts once the old one has returned, so no
				// figure of the old source lands after one of the new.
				src, _ := s.usageSource(e) // checked by prepare
				cur.startUsage(cur.stopUsage(), src)
			}
			return change, nil
		},
	})
	return s
}

// randomClaimBase returns 2^32 × a random 31-bit number + 1: each process
// numbers its claims from its own region of the ID space.
func randomClaimBase() ledger.ClaimID {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return ledger.ClaimID(uint64(binary.BigEndian.Uint32(b[:])>>1)<<32 + 1)
}

func (s *ceilingSet) newLedger(name string, lc ledger.Config) (*ledger.Ledger, error) {
	return ledger.New(lc, ledger.WithLogger(s.log.With("vm_ceiling", name)), ledger.WithFirstClaimID(s.claimBase))
}

func (s *ceilingSet) Prepare(in *component.Input) (component.CommitFunc, error) {
	return s.k.Prepare(in, in.Doc().VMCeilings)
}

// startUsage starts ce's usage poll loop on src, once after is closed.
// An operator-pushed ceiling (no usage block, src nil) is fed by PUT
// .../usage only. Called with the set's lock held.
func (ce *ceiling) startUsage(after <-chan struct{}, src ledger.UsageSource) {
	if src == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	ce.stop, ce.done = cancel, done
	go func() {
		defer close(done)
		if after != nil {
			<-after
		}
		_ = ce.ledger.Run(ctx, src)
	}()
}

// stopUsage cancels ce's usage poll loop and returns a channel closed once
// it has returned (nil without a loop); the caller waits on it without the
// set's lock. Called with the set's lock held.
func (ce *ceiling) stopUsage() <-chan struct{} {
	if ce.stop == nil {
		return nil
	}
	ce.stop()
	done := ce.done
	ce.stop, ce.done = nil, nil
	return done
}

func waitAll(chans []<-chan struct{}) {
	for _, c := range chans {
		if c != nil {
			<-c
		}
	}
}

func (s *ceilingSet) Sweep(ctx context.Context) {
	removed := s.k.Sweep(func(ce *ceiling) bool {
		st := ce.ledger.Status()
		return st.LocalClaims == 0 && st.Queued == 0
	})
	var stopped []<-chan struct{}
	for _, ce := range removed {
		stopped = append(stopped, ce.stopUsage())
	}
	waitAll(stopped)
	for name := range removed {
		s.log.Info("removed vm_ceiling dropped from the configuration", "vm_ceiling", name)
	}
}

func (s *ceilingSet) Close() {
	var stopped []<-chan struct{}
	s.k.With(func(m map[string]*ceiling) {
		for _, ce := range m {
			stopped = append(stopped, ce.stopUsage())
		}
	})
	waitAll(stopped)
}

// find returns the named ceiling's ledger; a retained one (dropped from
// the configuration, still holding claims) serves confirms and cancels but
// no new claims, so forNew refuses it.
func (s *ceilingSet) find(name string, forNew bool) (l *ledger.Ledger, ok bool) {
	s.k.With(func(m map[string]*ceiling) {
		var ce *ceiling
		if ce, ok = m[name]; ok && !(forNew && ce.Retained) {
			l = ce.ledger
		}
	})
	return l, l != nil
}

// claimLive reports whether claim id of the named ceiling still counts.
func (s *ceilingSet) claimLive(name string, id ledger.ClaimID) bool {
	l, ok := s.find(name, false)
	if !ok {
		return false
	}
	_, ok = l.Lookup(id)
	return ok
}

// snapshot lists the ceilings (name and ledger), sorted by name.
func (s *ceilingSet) snapshot() []*ceiling {
	var out []*ceiling
	s.k.With(func(m map[string]*ceiling) {
		for _, ce := range m {
			out = append(out, &ceiling{name: ce.name, ledger: ce.ledger, entry: ce.entry, Retention: ce.Retention})
		}
	})
	slices.SortFunc(out, func(a, b *ceiling) int { return strings.Compare(a.name, b.name) })
	return out
}

// get reports one ceiling with its claims.
func (s *ceilingSet) get(name string) (d api.CeilingDetail, ok bool) {
	s.k.With(func(m map[string]*ceiling) {
		var ce *ceiling
		if ce, ok = m[name]; ok {
			d.CeilingStatus = ceilingStatus(ce)
			d.Holders = holders.WithCeilingHolding(&d.CeilingStatus, ce.ledger)
		}
	})
	return d, ok
}

func (s *ceilingSet) list() []api.CeilingStatus {
	out := []api.CeilingStatus{}
	s.k.With(func(m map[string]*ceiling) {
		for _, ce := range m {
			st := ceilingStatus(ce)
			holders.WithCeilingHolding(&st, ce.ledger)
			out = append(out, st)
		}
	})
	slices.SortFunc(out, func(a, b api.CeilingStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (s *ceilingSet) Status(out *api.Components) { out.Ceilings = s.list() }

func ceilingStatus(ce *ceiling) api.CeilingStatus {
	st := ce.ledger.Status()
	out := api.CeilingStatus{
		Name: ce.name, Max: st.Max, ProviderActive: st.ProviderActive, LocalClaims: st.LocalClaims,
		Effective: st.Effective, Available: st.Available, Queued: st.Queued, Stale: st.Stale,
		LastError: st.LastError, Retained: ce.Retained,
	}
	if !st.LastUsageAt.IsZero() {
		t := st.LastUsageAt
		out.LastUsageAt = &t
	}
	return out
}

func (s *ceilingSet) collect(ch chan<- prometheus.Metric) {
	for _, ce := range s.snapshot() {
		n := ce.name
		st := ce.ledger.Status()
		component.Gauge(ch, descCeilingMax, float64(st.Max), n)
		component.Gauge(ch, descCeilingActive, float64(st.ProviderActive), n)
		component.Gauge(ch, descCeilingClaims, float64(st.LocalClaims), n)
		component.Gauge(ch, descCeilingEffective, float64(st.Effective), n)
		component.Gauge(ch, descCeilingAvailable, float64(st.Available), n)
		component.Gauge(ch, descCeilingQueued, float64(st.Queued), n)
		component.Gauge(ch, descCeilingStale, component.B2F(st.Stale), n)
		ev := ce.ledger.Stats()
		for _, e := range []struct {
			ev string
			v  uint64
		}{{"granted", ev.Granted}, {"queued", ev.Queued}, {"expired_unconfirmed", ev.ExpiredUnconfirmed}, {"denied_stale", ev.DeniedStale},
			{"source_errors", ev.SourceErrors}, {"figures", ev.Figures}, {"confirmed", ev.Confirmed}, {"retired", ev.Retired}, {"cancelled", ev.Cancelled}, {"restored", ev.Restored}} {
			component.Counter(ch, descCeilingEvents, float64(e.v), n, e.ev)
		}
	}
}

func claimJSON(ceilingName string, c *ledger.Claim) api.Claim {
	confirmedAt := c.ConfirmedAt()
	return api.Claim{
		ClaimID: c.ID().String(), Ceiling: ceilingName, WorkerID: c.WorkerID(), Count: c.Count(),
		Confirmed: !confirmedAt.IsZero(), GrantedAt: c.GrantedAt(), ExpiresAt: c.ExpiresAt(), ConfirmedAt: confirmedAt,
	}
}

// liveCeiling returns the named ceiling's ledger (see ceilingSet.find).
func (a *Arbiter) liveCeiling(name string, forNew bool) (*ledger.Ledger, error) {
	l, ok := a.comp.ceilings.find(name, forNew)
	if !ok {
		return nil, httpapi.NotFound("no vm_ceiling %q: declare it with a vm_ceiling block", name)
	}
	return l, nil
}

// Ceilings reports every VM ceiling.
func (a *Arbiter) Ceilings() []api.CeilingStatus { return a.comp.ceilings.list() }

// Ceiling reports one VM ceiling with its claims.
func (a *Arbiter) Ceiling(_ context.Context, name string) (api.CeilingDetail, error) {
	st, ok := a.comp.ceilings.get(name)
	if !ok {
		return api.CeilingDetail{}, httpapi.NotFound("no vm_ceiling %q: declare it with a vm_ceiling block", name)
	}
	return st, nil
}

// RequestClaim grants a claim on VM ceiling name to ctx's principal (the
// claim kind of the grant pipeline); the returned cancel gives it back
// when its answer cannot be delivered.
func (a *Arbiter) RequestClaim(ctx context.Context, name string, req api.ClaimRequest) (api.Claim, func(), error) {
	wait, err := httpapi.WaitDuration(req.WaitSeconds)
	if err != nil {
		return api.Claim{}, nil, err
	}
	switch {
	case req.WorkerID == "":
		return api.Claim{}, nil, httpapi.BadRequest("worker_id is required: it names the worker the VM is for")
	case req.Count < 0:
		return api.Claim{}, nil, httpapi.BadRequest("count %d must be at least 1 (0 or absent means 1)", req.Count)
	}
	l, err := a.liveCeiling(name, true)
	if err != nil {
		return api.Claim{}, nil, err
	}
	latch, err := latchKey("claim", name, req.RequestID)
	if err != nil {
		return api.Claim{}, nil, err
	}
	lr := ledger.Request{WorkerID: req.WorkerID, Count: max(req.Count, 1)}
	c, err := grant(ctx, a, latch, grantKind[*ledger.Claim]{
		existing: func() (*ledger.Claim, string, string, bool) {
			id, ok := a.grants.claimFor(name, req.RequestID)
			if !ok {
				return nil, "", "", false
			}
			c, ok := l.Lookup(id)
			return c, a.grants.claimOwner(name, id), "claim " + id.String(), ok
		},
		wait: wait,
		take: func(ctx context.Context) (*ledger.Claim, error) {
			if wait == 0 {
				return l.TryRequest(lr)
			}
			return l.Request(ctx, lr)
		},
		fail: func(err error) error {
			if errors.Is(err, context.DeadlineExceeded) {
				return httpapi.WaitTimedOut(fmt.Sprintf("vm_ceiling %s: worker %q's request for %d VM(s)", name, lr.WorkerID, lr.Count), wait)
			}
			return err
		},
		record: func(ctx context.Context, c *ledger.Claim) (*ledger.Claim, error) {
			if err := a.grants.putClaim(ctx, name, c, req.RequestID); err != nil {
				return nil, fmt.Errorf("vm_ceiling %s: the claim was not granted: %w", name, err)
			}
			return c, nil
		},
		giveBack: func(c *ledger.Claim) { c.Cancel() }, // a claim a restart would forget could over-book
	})
	if err != nil {
		return api.Claim{}, nil, err
	}
	cj := claimJSON(name, c)
	cj.RequestID = req.RequestID
	return cj, func() {
		c.Cancel()
		a.grants.deleteClaim(name, c.ID())
	}, nil
}

// claim finds claim id of ceiling name for ctx's principal.
func (a *Arbiter) claim(ctx context.Context, name, id string) (*ledger.Claim, error) {
	l, err := a.liveCeiling(name, false)
	if err != nil {
		return nil, err
	}
	cid, err := ledger.ParseClaimID(id)
	if err != nil {
		return nil, httpapi.NotFound("no claim %q in vm_ceiling %q: not a claim ID", id, name)
	}
	c, ok := l.Lookup(cid)
	if !ok {
		return nil, httpapi.NotFound("no claim %s in vm_ceiling %q: it was cancelled, expired or retired", id, name)
	}
	if err := security.HolderOnly(ctx, "claim "+id, a.grants.claimOwner(name, cid)); err != nil {
		return nil, err
	}
	return c, nil
}

// ConfirmClaim confirms claim id of ceiling name: its VM is running.
func (a *Arbiter) ConfirmClaim(ctx context.Context, name, id string) (api.Claim, error) {
	c, err := a.claim(ctx, name, id)
	if err != nil {
		return api.Claim{}, err
	}
	if err := c.Confirm(); err != nil {
		return api.Claim{}, err
	}
	if err := a.grants.putClaim(ctx, name, c, ""); err != nil {
		// Confirmed here, not in the record; confirming again is harmless
		// and records it.
		return api.Claim{}, fmt.Errorf("vm_ceiling %s: claim %s is confirmed, but the confirmation was not recorded; confirm again: %w", name, c.ID(), err)
	}
	return claimJSON(name, c), nil
}

// CancelClaim ends claim id of ceiling name.
func (a *Arbiter) CancelClaim(ctx context.Context, name, id string) error {
	c, err := a.claim(ctx, name, id)
	if err != nil {
		return err
	}
	c.Cancel()
	if !a.comp.ceilings.claimLive(name, c.ID()) {
		// A confirmed claim counts on until the next figure; sweepClaims
		// deletes its record then.
		a.grants.deleteClaim(name, c.ID())
	}
	return nil
}

// PutUsage records the provider's figure of active VMs for ceiling name.
func (a *Arbiter) PutUsage(_ context.Context, name string, req api.UsageRequest) (api.CeilingStatus, error) {
	if req.Active == nil || *req.Active < 0 {
		return api.CeilingStatus{}, httpapi.BadRequest("active must be given and at least 0: the number of VMs the provider reports running")
	}
	l, err := a.liveCeiling(name, false)
	if err != nil {
		return api.CeilingStatus{}, err
	}
	if err := l.ObserveUsage(*req.Active, time.Time{}); err != nil {
		return api.CeilingStatus{}, httpapi.BadRequest("%v", err)
	}
	st, ok := a.comp.ceilings.get(name)
	if !ok {
		return api.CeilingStatus{}, httpapi.NotFound("vm_ceiling %q was removed from the configuration while the figure was recorded", name)
	}
	return st.CeilingStatus, nil
}

// usageSource is a ceiling's usage source: an HTTP figure, the stack's EC2
// instances, or none (figures pushed).
func (s *ceilingSet) usageSource(e reconcile.CeilingEntry) (ledger.UsageSource, error) {
	if _, src := CeilingConfig(e); src != nil {
		return src, nil
	}
	if e.Usage.Type != spec.UsageEC2 {
		return nil, nil
	}
	if s.ec2 == nil {
		return nil, errors.New("usage \"ec2\" needs an EC2 client, and this daemon has none")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := s.ec2(ctx)
	if err != nil {
		return nil, fmt.Errorf("usage \"ec2\": %w", err)
	}
	return &ec2.UsageSource{Client: cl, VCPUs: e.Usage.Unit == spec.UsageUnitCPUs, Tags: e.Usage.Tags.Map()}, nil
}

// entry returns a ceiling's document entry.
func (s *ceilingSet) entry(name string) (e reconcile.CeilingEntry, ok bool) {
	s.k.With(func(m map[string]*ceiling) {
		var ce *ceiling
		if ce, ok = m[name]; ok {
			e = ce.entry
		}
	})
	return e, ok
}

// The fleet's claims: one claim per VM it launches, taken by the fleet's
// own principal and recorded like a claim over HTTP, so a new leader
// restores it.

// CeilingLedger returns the ledger of VM ceiling name; with forNew a
// retained ceiling (dropped from the configuration) is refused.
func (a *Arbiter) CeilingLedger(name string, forNew bool) (*ledger.Ledger, bool) {
	return a.comp.ceilings.find(name, forNew)
}

// CeilingEntry returns VM ceiling name's document entry.
func (a *Arbiter) CeilingEntry(name string) (reconcile.CeilingEntry, bool) {
	return a.comp.ceilings.entry(name)
}

// RecordClaim records claim c of ceiling (again, after a confirm), owned by
// ctx's principal the first time.
func (a *Arbiter) RecordClaim(ctx context.Context, ceiling string, c *ledger.Claim) error {
	return a.grants.putClaim(ctx, ceiling, c, "")
}

// EndClaim cancels claim c of ceiling and deletes its record once it no
// longer counts (a confirmed claim counts until the next usage figure).
func (a *Arbiter) EndClaim(ceiling string, c *ledger.Claim) {
	c.Cancel()
	if !a.comp.ceilings.claimLive(ceiling, c.ID()) {
		a.grants.deleteClaim(ceiling, c.ID())
	}
}
