package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"
)

// This file carries plans out: the interfaces the Reconciler needs (each
// declared here, where it is used) and one pass over every class.

// Cloud is the provider the runners run on: EC2 in rpd (backend/ec2), a
// simulated cloud in tests and the day simulation.
type Cloud interface {
	// Launch starts up to req.Count VMs in one call. What it started is in
	// the result, with an error per part it could not start; a non-nil
	// error means the call itself failed: an *APIError when the provider
	// answered (nothing started), anything else when it may or may not
	// have started VMs (the intent then resolves from Instances).
	Launch(ctx context.Context, req LaunchRequest) (LaunchResult, error)
	// Instances lists the stack's VMs in every state.
	Instances(ctx context.Context) ([]Instance, error)
	// Terminate terminates VMs; terminating one already gone is not an
	// error.
	Terminate(ctx context.Context, ids []string) error
}

// LaunchRequest asks the cloud for Count VMs of a class.
type LaunchRequest struct {
	Class    string
	LaunchID string // tagged on every VM (rpd:launch)
	// ClientToken makes the call idempotent at the provider: the same
	// token never launches twice.
	ClientToken string
	Lifecycle   string // Spot or OnDemand
	Count       int
	Spec        LaunchSpec
}

// LaunchSpec is how a class's VMs are launched.
type LaunchSpec struct {
	Template      string // launch template name or ID (lt-…)
	Version       string
	InstanceTypes []string // overrides, × Subnets
	Subnets       []string
	UsageClass    string // Spot or OnDemand
	Fallback      string // OnDemand, or "" / "none" to stay spot
}

// LaunchResult is what a Launch started, and why it started no more.
type LaunchResult struct {
	Instances []Instance
	Errors    []LaunchError
}

// LaunchError is one error a launch reported (EC2's error codes).
type LaunchError struct {
	Code, Message string
}

// Capacity reports whether the error says spot has no room now: the
// launch falls back to on-demand (when allowed) and spot is snoozed.
func (e LaunchError) Capacity() bool {
	switch e.Code {
	case "InsufficientInstanceCapacity", "MaxSpotInstanceCountExceeded", "SpotMaxPriceTooLow", "UnfulfillableCapacity":
		return true
	}
	return false
}

// APIError is a launch call the provider refused as a whole: nothing was
// started.
type APIError struct {
	Code, Message string
}

func (e *APIError) Error() string { return fmt.Sprintf("fleet: %s: %s", e.Code, e.Message) }

// Ceiling is the class's vm_ceiling: every VM is claimed before launch.
type Ceiling interface {
	// Claim claims up to n VMs for worker, each a claim of its own, and
	// returns the IDs of those granted (fewer than n when the ceiling has
	// no more room): the VMs refused are not launched.
	Claim(ctx context.Context, worker string, n int) ([]string, error)
	// Confirm says the VM of a claim is up (it offered itself).
	Confirm(id string)
	// Release gives an unconfirmed claim back: its VM never ran, or is gone.
	Release(id string)
}

// Pool is a class's inventory (the instance table and the class's queue).
type Pool interface {
	// Runners lists the class's records that are idle, claimed or
	// terminating (retired ones accumulate; Options.Lookup finds those
	// whose VM still runs).
	Runners(ctx context.Context) ([]Runner, error)
	// Withdraw takes idle runners out of the pool (idle → terminating,
	// their message deleted), so no pickup can claim them, and returns the
	// IDs it withdrew: a runner claimed meanwhile is left alone.
	Withdraw(ctx context.Context, ids []string) ([]string, error)
	// Retire marks a record retired (its VM is gone), conditionally on the
	// state and owner r has; an idle one's message is deleted.
	Retire(ctx context.Context, r Runner) error
}

// Intents keeps launch intents durably, every write fenced by the leader's
// epoch: a write that fails stops the launch.
type Intents interface {
	PutLaunch(ctx context.Context, l Launch) error
	DeleteLaunch(ctx context.Context, id string) error
	Launches(ctx context.Context) ([]Launch, error)
}

// Record is an inventory record found by Options.Lookup.
type Record struct {
	Runner
	Class string
}

// Class is one runner class's fleet: its engine configuration, how it
// launches, and its inventory and ceiling.
type Class struct {
	Config   Config
	Launch   LaunchSpec
	Interval time.Duration
	Pool     Pool
	Ceiling  Ceiling
}

// Options configure a Reconciler.
type Options struct {
	Cloud   Cloud
	Intents Intents
	// Lookup returns the records rpd holds of the given instance IDs, in
	// any class (those without a fleet included), by ID: how a VM that no
	// fleet runner or launch explains is told apart from an orphan (a
	// runner of another class, or one released for good and still
	// running). Nil: no other records exist.
	Lookup func(ctx context.Context, ids []string) (map[string]Record, error)
	// Now is the clock (default time.Now).
	Now func() time.Time
	// NewID names launches (default 16 random hex digits).
	NewID func() string
	// Epoch returns the leader epoch recorded with each launch intent.
	Epoch func() int64
	// OnOffered observes the time from launch to offer of each VM.
	OnOffered func(class string, d time.Duration)
	Logger    *slog.Logger
}

// Launch error backoff: a launch the provider refused (or a call that
// failed) is not retried for errBackoffMin, doubling to errBackoffMax.
// Spot is snoozed for snoozeMin, doubling to snoozeMax, after a capacity
// error.
const (
	errBackoffMin = 10 * time.Second
	errBackoffMax = 5 * time.Minute
	snoozeMin     = 5 * time.Minute
	snoozeMax     = time.Hour
	eventWindow   = time.Hour
)

// Reconciler keeps every fleet class's warm runners: Pass runs the engine
// on each due class and carries its plan out. It is safe for concurrent
// use; passes are serialised.
type Reconciler struct {
	opts Options
	log  *slog.Logger

	pass sync.Mutex // one pass at a time

	mu      sync.Mutex
	classes map[string]*classState
	seen    map[string]time.Time // instance IDs seen with the stack's tag, when last
	// observed are instances whose launch-to-offer time was observed.
	observed map[string]bool
	lastErr  string
}

// classState is one class's configuration and what the reconciler keeps
// for it between passes.
type classState struct {
	Class
	lastRun       time.Time
	snoozeUntil   time.Time
	snooze        time.Duration
	errUntil      time.Time
	errBackoff    time.Duration
	lastPlan      Plan
	lastErr       string
	lastLaunchErr string
	refused       int
	idleSecs      float64
	launched      map[string]uint64
	terminated    map[Reason]uint64
	launchErrs    map[string]uint64
	events        []event
}

type event struct {
	at   time.Time
	kind string // "launch" or a Reason
	n    int
}

// New returns a Reconciler without classes; Configure gives it some.
func New(opts Options) *Reconciler {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.NewID == nil {
		opts.NewID = randomID
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Epoch == nil {
		opts.Epoch = func() int64 { return 0 }
	}
	return &Reconciler{opts: opts, log: opts.Logger, classes: map[string]*classState{}, seen: map[string]time.Time{}, observed: map[string]bool{}}
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Configure replaces the set of fleet classes; a class that stays keeps
// its counters, snooze and backoff. It fails, changing nothing, when a
// configuration is invalid.
func (r *Reconciler) Configure(classes map[string]Class) error {
	for name, c := range classes {
		if err := c.Config.Validate(); err != nil {
			return fmt.Errorf("runner_class %q: %w", name, err)
		}
		if c.Pool == nil || c.Ceiling == nil {
			return fmt.Errorf("runner_class %q: %w: a fleet needs a pool and a ceiling", name, ErrInvalidConfig)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	next := make(map[string]*classState, len(classes))
	for name, c := range classes {
		cs := r.classes[name]
		if cs == nil {
			cs = &classState{launched: map[string]uint64{}, terminated: map[Reason]uint64{}, launchErrs: map[string]uint64{}}
		}
		cs.Class = c
		next[name] = cs
	}
	r.classes = next
	return nil
}

// Classes lists the configured fleet classes, sorted.
func (r *Reconciler) Classes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.classes))
}

// NextDue is when the next class is due (zero when none is configured).
func (r *Reconciler) NextDue() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var due time.Time
	for _, cs := range r.classes {
		t := cs.lastRun.Add(cs.Interval)
		if due.IsZero() || t.Before(due) {
			due = t
		}
	}
	return due
}

// Pass reconciles every class that is due (all of them when force: a
// pickup, an offer or a reload changed the picture). It lists the cloud
// once; without that list nothing is decided (launching blind could launch
// twice). The error joins what failed; each class's part is also in its
// status.
func (r *Reconciler) Pass(ctx context.Context, force bool) error {
	r.pass.Lock()
	defer r.pass.Unlock()
	now := r.opts.Now()
	// The classes' configurations as they stand now: a reload meanwhile
	// (Configure) applies from the next pass.
	r.mu.Lock()
	var due []*classState
	snap := map[*classState]Class{}
	for _, name := range slices.Sorted(maps.Keys(r.classes)) {
		cs := r.classes[name]
		snap[cs] = cs.Class
		if force || !now.Before(cs.lastRun.Add(cs.Interval)) {
			due = append(due, cs)
		}
	}
	r.mu.Unlock()
	if len(due) == 0 {
		return nil
	}
	instances, err := r.opts.Cloud.Instances(ctx)
	if err != nil {
		err = fmt.Errorf("fleet: listing the stack's instances: %w", err)
		r.setErr(err)
		return err
	}
	launches, err := r.opts.Intents.Launches(ctx)
	if err != nil {
		err = fmt.Errorf("fleet: reading launch intents: %w", err)
		r.setErr(err)
		return err
	}
	r.setErr(nil)

	known := map[string]bool{}
	for _, l := range launches {
		for _, id := range l.Instances {
			known[id] = true
		}
	}
	runners := map[*classState][]Runner{}
	failed := map[*classState]bool{}
	var errs []error
	for cs, cls := range snap {
		rs, err := cls.Pool.Runners(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("runner_class %s: reading the inventory: %w", cls.Config.Class, err))
			cs.setErr(&r.mu, err)
			failed[cs] = true
			continue
		}
		runners[cs] = rs
		for _, x := range rs {
			known[x.ID] = true
		}
	}
	// Live VMs that no fleet runner or launch explains: their records, in
	// any class, say whether they are orphans (none), runners of another
	// class, or runners released for good that still run.
	var unexplained []string
	for _, i := range instances {
		if i.live() && !known[i.ID] {
			unexplained = append(unexplained, i.ID)
		}
	}
	if len(unexplained) > 0 && r.opts.Lookup != nil {
		recs, err := r.opts.Lookup(ctx, unexplained)
		if err != nil {
			// Without the records no VM may be taken for an orphan.
			errs = append(errs, fmt.Errorf("fleet: looking up the records of %d instances: %w", len(unexplained), err))
			for _, id := range unexplained {
				known[id] = true
			}
		}
		for id, rec := range recs {
			known[id] = true
			for cs := range runners {
				if snap[cs].Config.Class == rec.Class {
					runners[cs] = append(runners[cs], rec.Runner)
				}
			}
		}
	}
	isKnown := func(id string) bool { return known[id] }

	r.mu.Lock()
	for _, i := range instances {
		r.seen[i.ID] = now
	}
	for id, at := range r.seen { // forget what EC2 no longer lists
		if now.Sub(at) > 2*time.Hour {
			delete(r.seen, id)
		}
	}
	r.mu.Unlock()
	seen := func(id string) bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		_, ok := r.seen[id]
		return ok
	}

	for _, cs := range due {
		if failed[cs] {
			continue
		}
		cls := snap[cs]
		var own []Launch
		for _, l := range launches {
			if l.Class == cls.Config.Class {
				own = append(own, l)
			}
		}
		if err := r.reconcileClass(ctx, cs, cls, Input{Now: now, Runners: runners[cs], Launches: own, Instances: instances, Known: isKnown, Seen: seen}); err != nil {
			errs = append(errs, err)
		}
	}

	// Stack-level orphans: tagged with the stack, no fleet class, unknown.
	if grace := r.orphanGrace(); grace > 0 {
		fleetClass := func(c string) bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			_, ok := r.classes[c]
			return ok
		}
		if acts := Orphans(instances, fleetClass, isKnown, grace, now); len(acts) > 0 {
			ids := actionIDs(acts)
			if err := r.opts.Cloud.Terminate(ctx, ids); err != nil {
				errs = append(errs, fmt.Errorf("fleet: terminating orphans %v: %w", ids, err))
			} else {
				r.log.Warn("fleet: terminated instances tagged with the stack that rpd does not know", "event", "orphan_terminated", "instances", ids, "orphan_grace", grace)
			}
		}
	}
	return errors.Join(errs...)
}

// orphanGrace is the longest orphan_grace of the classes: the
// conservative one for instances no class owns.
func (r *Reconciler) orphanGrace() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var g time.Duration
	for _, cs := range r.classes {
		g = max(g, cs.Config.OrphanGrace)
	}
	return g
}

func (r *Reconciler) setErr(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastErr = ""
	if err != nil {
		r.lastErr = err.Error()
	}
}

func (cs *classState) setErr(mu *sync.Mutex, err error) {
	mu.Lock()
	defer mu.Unlock()
	cs.lastErr = ""
	if err != nil {
		cs.lastErr = err.Error()
	}
}

// reconcileClass decides one class's plan and carries it out, in the order
// that keeps the invariants: intents first (a resolved launch is never
// launched again), then claims, then terminations (withdrawn from the pool
// before they are terminated), then launches (claimed on the ceiling
// first).
func (r *Reconciler) reconcileClass(ctx context.Context, cs *classState, cls Class, in Input) error {
	class := cls.Config.Class
	p := Decide(cls.Config, in)
	var errs []error

	r.mu.Lock()
	if !cs.lastRun.IsZero() {
		cs.idleSecs += float64(cs.lastPlan.Idle) * in.Now.Sub(cs.lastRun).Seconds()
	}
	// Status reads the plan of the pass under way (its launches are
	// counted as they happen), not an empty one.
	cs.lastRun, cs.lastPlan = in.Now, p
	r.mu.Unlock()

	// Launch intents left unresolved (a leader died mid-launch): the VMs
	// the cloud shows with their tag are theirs.
	for _, l := range in.Launches {
		ids, ok := p.Attach[l.ID]
		if !ok {
			continue
		}
		l.Done, l.Instances = true, ids
		if len(l.Claims) > len(ids) {
			for _, c := range l.Claims[len(ids):] {
				cls.Ceiling.Release(c)
			}
			l.Claims = l.Claims[:len(ids)]
		}
		if err := r.opts.Intents.PutLaunch(ctx, l); err != nil {
			errs = append(errs, fmt.Errorf("runner_class %s: recording the VMs of launch %s: %w", class, l.ID, err))
		} else {
			r.log.Info("fleet: resolved a launch left unfinished by its leader", "runner_class", class, "launch", l.ID, "instances", ids)
		}
	}
	claimOf := map[string]string{}
	for _, l := range in.Launches {
		ids := l.Instances
		if a, ok := p.Attach[l.ID]; ok {
			ids = a
		}
		for k, id := range ids {
			if k < len(l.Claims) {
				claimOf[id] = l.Claims[k]
			}
		}
	}
	for k, id := range p.Offered {
		if c := claimOf[id]; c != "" {
			cls.Ceiling.Confirm(c)
		}
		r.mu.Lock()
		first := !r.observed[id]
		r.observed[id] = true
		r.mu.Unlock()
		if first && r.opts.OnOffered != nil {
			r.opts.OnOffered(class, p.OfferedAfter[k])
		}
	}
	for _, c := range p.Release {
		cls.Ceiling.Release(c)
	}

	// Terminations: idle runners leave the pool first.
	reasons := map[string]Reason{}
	var ids []string
	if len(p.Withdraw) > 0 {
		want := actionIDs(p.Withdraw)
		got, err := cls.Pool.Withdraw(ctx, want)
		if err != nil {
			errs = append(errs, fmt.Errorf("runner_class %s: taking idle runners out of the pool: %w", class, err))
		}
		for _, a := range p.Withdraw {
			if slices.Contains(got, a.ID) {
				reasons[a.ID] = a.Reason
				ids = append(ids, a.ID)
			}
		}
	}
	for _, a := range p.Terminate {
		if _, dup := reasons[a.ID]; !dup {
			reasons[a.ID] = a.Reason
			ids = append(ids, a.ID)
		}
	}
	if len(ids) > 0 {
		if err := r.opts.Cloud.Terminate(ctx, ids); err != nil {
			errs = append(errs, fmt.Errorf("runner_class %s: terminating %v: %w", class, ids, err))
		} else {
			byReason := map[Reason][]string{}
			for _, id := range ids {
				byReason[reasons[id]] = append(byReason[reasons[id]], id)
			}
			for _, reason := range slices.Sorted(maps.Keys(byReason)) {
				list := byReason[reason]
				r.count(cs, string(reason), len(list), in.Now, func() { cs.terminated[reason] += uint64(len(list)) })
				ev := string(reason)
				if reason == ReasonOrphan {
					ev = "orphan_terminated"
				}
				r.log.Info("fleet: terminated", "runner_class", class, "event", ev, "reason", string(reason), "instances", list)
			}
			for _, a := range p.Withdraw {
				if _, ok := reasons[a.ID]; ok {
					if err := cls.Pool.Retire(ctx, Runner{ID: a.ID, State: RunnerTerminating}); err != nil {
						errs = append(errs, fmt.Errorf("runner_class %s: retiring terminated runner %s (the next pass retries): %w", class, a.ID, err))
					}
				}
			}
		}
	}
	for _, x := range p.Retire {
		if err := cls.Pool.Retire(ctx, x); err != nil {
			errs = append(errs, fmt.Errorf("runner_class %s: retiring %s: %w", class, x.ID, err))
			continue
		}
		if x.State == RunnerIdle || x.State == RunnerClaimed {
			r.log.Warn("fleet: a runner's instance is gone (terminated out of band, or a spot interruption); its record is retired", "runner_class", class, "event", "vanished", "instance", x.ID, "was", string(x.State))
			r.count(cs, "vanished", 1, in.Now, nil)
		}
	}
	for _, id := range p.Finished {
		if err := r.opts.Intents.DeleteLaunch(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("runner_class %s: deleting finished launch %s: %w", class, id, err))
		}
		for _, l := range in.Launches {
			if l.ID == id {
				r.mu.Lock()
				for _, i := range l.Instances {
					delete(r.observed, i)
				}
				r.mu.Unlock()
			}
		}
	}

	launched, err := r.launch(ctx, cs, cls, p.Launch, in.Now)
	if err != nil {
		errs = append(errs, err)
	}
	p.Booting += launched
	r.mu.Lock()
	cs.lastPlan = p
	cs.lastErr = ""
	if err := errors.Join(errs...); err != nil {
		cs.lastErr = err.Error()
	}
	r.mu.Unlock()
	return errors.Join(errs...)
}

// count records n events of kind for the last hour's figures, and runs
// add (the cumulative counter) under the lock.
func (r *Reconciler) count(cs *classState, kind string, n int, now time.Time, add func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if add != nil {
		add()
	}
	cs.events = append(cs.events, event{at: now, kind: kind, n: n})
	i := 0
	for i < len(cs.events) && now.Sub(cs.events[i].at) > eventWindow {
		i++
	}
	cs.events = cs.events[i:]
}

// launch launches n VMs of the class: each claimed on the ceiling first,
// the intent recorded before the call, spot falling back to on-demand on
// capacity errors. It returns how many VMs were started (or may have been:
// a call that failed ambiguously leaves its intent to resolve).
func (r *Reconciler) launch(ctx context.Context, cs *classState, cls Class, n int, now time.Time) (int, error) {
	class := cls.Config.Class
	r.mu.Lock()
	cs.refused = 0
	backoff := now.Before(cs.errUntil)
	lifecycle := cls.Launch.UsageClass
	if lifecycle == "" {
		lifecycle = OnDemand
	}
	snoozed := lifecycle == Spot && now.Before(cs.snoozeUntil)
	r.mu.Unlock()
	if n <= 0 || backoff {
		return 0, nil
	}
	if snoozed {
		if cls.Launch.Fallback != OnDemand {
			return 0, nil // status shows the snooze
		}
		lifecycle = OnDemand
	}
	claims, err := cls.Ceiling.Claim(ctx, "fleet/"+class, n)
	r.mu.Lock()
	cs.refused = n - len(claims)
	r.mu.Unlock()
	if err != nil && len(claims) == 0 {
		return 0, fmt.Errorf("runner_class %s: claiming %d VM(s) on the ceiling: %w", class, n, err)
	}
	if len(claims) == 0 {
		return 0, nil
	}
	l := Launch{ID: r.opts.NewID(), Class: class, CreatedAt: now, Count: len(claims), Claims: claims, Lifecycle: lifecycle, Epoch: r.opts.Epoch()}
	if err := r.opts.Intents.PutLaunch(ctx, l); err != nil {
		for _, c := range claims {
			cls.Ceiling.Release(c)
		}
		return 0, fmt.Errorf("runner_class %s: recording the launch intent (nothing launched): %w", class, err)
	}
	want := len(claims)
	ids, callErr := r.launchOnce(ctx, cs, cls, l, lifecycle, want)
	if callErr == nil && lifecycle == Spot && len(ids) < want && cls.Launch.Fallback == OnDemand && r.spotSnoozed(cs, now) {
		more, err := r.launchOnce(ctx, cs, cls, l, OnDemand, want-len(ids))
		ids, callErr = append(ids, more...), err
	}
	want -= len(ids)
	var apiErr *APIError
	if callErr != nil && !errors.As(callErr, &apiErr) && len(ids) == 0 {
		// The call may have started VMs: the intent stays, and resolves from
		// the cloud's list by its tag (or is dropped after boot_timeout).
		r.backoff(cs, class, now, callErr.Error())
		return want, fmt.Errorf("runner_class %s: launching %d VM(s): %w", class, l.Count, callErr)
	}
	if callErr != nil {
		r.backoff(cs, class, now, callErr.Error())
	}
	for _, c := range claims[len(ids):] {
		cls.Ceiling.Release(c)
	}
	l.Done, l.Instances, l.Claims = true, ids, claims[:len(ids)]
	var recErr error
	if len(ids) == 0 {
		recErr = r.opts.Intents.DeleteLaunch(ctx, l.ID)
	} else if err := r.opts.Intents.PutLaunch(ctx, l); err != nil {
		recErr = fmt.Errorf("runner_class %s: recording the VMs of launch %s (the next pass finds them by their tag): %w", class, l.ID, err)
	}
	if callErr != nil {
		return len(ids), errors.Join(fmt.Errorf("runner_class %s: launching %d VM(s): %w", class, l.Count, callErr), recErr)
	}
	return len(ids), recErr
}

// launchOnce makes one launch call of lifecycle for want VMs and counts
// what it started and the errors it reported; a capacity error of a spot
// launch snoozes spot.
func (r *Reconciler) launchOnce(ctx context.Context, cs *classState, cls Class, l Launch, lifecycle string, want int) ([]string, error) {
	class := cls.Config.Class
	now := r.opts.Now()
	res, err := r.opts.Cloud.Launch(ctx, LaunchRequest{
		Class: class, LaunchID: l.ID, ClientToken: l.ID + "-" + lifecycle, Lifecycle: lifecycle, Count: want, Spec: cls.Launch,
	})
	var ids []string
	for _, i := range res.Instances {
		ids = append(ids, i.ID)
	}
	if len(ids) > want {
		ids = ids[:want]
	}
	capacity := false
	r.mu.Lock()
	if len(ids) > 0 {
		cs.launched[lifecycle] += uint64(len(ids))
		cs.errBackoff = 0
	}
	for _, e := range res.Errors {
		cs.launchErrs[e.Code]++
		cs.lastLaunchErr = e.Code + ": " + e.Message
		capacity = capacity || e.Capacity()
	}
	var apiErr *APIError
	if err != nil {
		code := "call_failed"
		if errors.As(err, &apiErr) {
			code = apiErr.Code
		}
		cs.launchErrs[code]++
		cs.lastLaunchErr = err.Error()
	}
	if lifecycle == Spot && len(ids) < want && capacity {
		cs.snooze = min(max(cs.snooze*2, snoozeMin), snoozeMax)
		cs.snoozeUntil = now.Add(cs.snooze)
	} else if lifecycle == Spot && len(ids) == want {
		cs.snooze = 0
	}
	snoozeUntil := cs.snoozeUntil
	r.mu.Unlock()
	if len(ids) > 0 {
		r.count(cs, "launch", len(ids), now, nil)
		r.log.Info("fleet: launched", "runner_class", class, "launch", l.ID, "lifecycle", lifecycle, "instances", ids)
	}
	if lifecycle == Spot && capacity && len(ids) < want {
		r.log.Warn("fleet: spot has no capacity; spot launches snoozed", "runner_class", class, "until", snoozeUntil, "fallback", cls.Launch.Fallback, "errors", res.Errors)
	} else if len(res.Errors) > 0 && len(ids) < want {
		r.log.Warn("fleet: the launch started fewer VMs than asked", "runner_class", class, "asked", want, "started", len(ids), "errors", res.Errors)
	}
	return ids, err
}

func (r *Reconciler) spotSnoozed(cs *classState, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return now.Before(cs.snoozeUntil)
}

// backoff holds the class's launches back after a failed call, so an
// error is reported, never retried in a hot loop.
func (r *Reconciler) backoff(cs *classState, class string, now time.Time, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cs.errBackoff = min(max(cs.errBackoff*2, errBackoffMin), errBackoffMax)
	cs.errUntil = now.Add(cs.errBackoff)
	r.log.Warn("fleet: launch failed; launches of the class wait", "runner_class", class, "for", cs.errBackoff, "err", msg)
}

func actionIDs(as []Action) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.ID
	}
	return out
}
