package inventory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/daemon/internal/component"
	"github.com/rpdhq/rpd/daemon/internal/httpapi"
	"github.com/rpdhq/rpd/reconcile"
	"github.com/rpdhq/rpd/runtime/fleet"
	"github.com/rpdhq/rpd/spec"
)

// This file is the fleet (docs/fleet.md): the runner classes whose runners
// rpd launches and terminates itself. runtime/fleet decides and carries the
// plans out; here are its reload (fleetSet, a componentSet), its loop on
// the leader, and its adapters onto the daemon's parts: the class's pickup
// manager and instance table (fleetPool), its vm_ceiling's ledger with the
// claims recorded like HTTP ones (fleetCeiling, fleet_adapters.go), launch
// intents as fenced grant records (fleetIntents), and EC2 (backend/ec2).

// fleetMinGap is the shortest time between two passes a pickup or an offer
// wakes: a burst of pickups makes one pass, not one each.
const fleetMinGap = time.Second

// fleetPassTimeout bounds one pass (its ceiling claims wait up to two
// usage polls).
const fleetPassTimeout = 2 * time.Minute

// fleetSet is the fleet classes of the configuration, kept by one
// reconciler.
type fleetSet struct {
	a   *Inventory
	log *slog.Logger
	rec *fleet.Reconciler

	wake chan struct{}

	mu      sync.Mutex
	entries map[string]reconcile.FleetEntry // by class
	ran     bool                            // this daemon has run a pass as leader

	offered *prometheus.HistogramVec
}

var _ component.Set = (*fleetSet)(nil)

func newFleetSet(a *Inventory, log *slog.Logger) *fleetSet {
	s := &fleetSet{a: a, log: log, wake: make(chan struct{}, 1), entries: map[string]reconcile.FleetEntry{}}
	s.offered = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "rpd_fleet_launch_to_offer_seconds", Help: "Time from a fleet VM's launch to its runner's offer (boot time as rpd sees it).",
		Buckets: []float64{5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600},
	}, []string{"class"})
	s.rec = fleet.New(fleet.Options{
		Cloud:   fleetCloud{s},
		Intents: fleetIntents{a},
		Lookup:  a.lookupInstances,
		Epoch: func() int64 {
			return a.opts.Epoch()
		},
		OnOffered: func(class string, dur time.Duration) { s.offered.WithLabelValues(class).Observe(dur.Seconds()) },
		Logger:    log.With("component", "fleet"),
	})
	return s
}

// fleetConfig is the one conversion of a class's fleet entry to the
// engine's configuration and launch settings.
func fleetConfig(class string, e reconcile.FleetEntry) (fleet.Class, error) {
	fc := fleet.Class{
		Config: fleet.Config{
			Class: class, MinIdle: e.MinIdle, MaxIdleAge: time.Duration(e.MaxIdleAge), BootTimeout: time.Duration(e.BootTimeout),
			OrphanGrace: time.Duration(e.OrphanGrace), MaxLaunch: e.MaxLaunch,
		},
		Launch: fleet.LaunchSpec{
			Template: e.LaunchTemplate, Version: e.Version, InstanceTypes: e.InstanceTypes.Slice(), Subnets: e.Subnets.Slice(),
			UsageClass: e.UsageClass, Fallback: e.Fallback,
		},
		Interval: time.Duration(e.Interval),
	}
	for _, sc := range e.Schedules.Slice() {
		loc, err := time.LoadLocation(sc.Timezone)
		if err != nil {
			return fleet.Class{}, fmt.Errorf("fleet schedule %q: time zone %q: %w", sc.Name, sc.Timezone, err)
		}
		starts, err := spec.ParseCron(sc.Cron, loc)
		if err != nil {
			return fleet.Class{}, fmt.Errorf("fleet schedule %q: %w", sc.Name, err)
		}
		fc.Config.Schedules = append(fc.Config.Schedules, fleet.Schedule{Name: sc.Name, Starts: starts, Duration: time.Duration(sc.Duration), MinIdle: sc.MinIdle})
	}
	if len(fc.Launch.InstanceTypes) == 0 {
		return fleet.Class{}, errors.New("fleet: the class lists no concrete instance type to launch")
	}
	if fc.Interval <= 0 {
		fc.Interval = spec.DefaultFleetInterval
	}
	return fc, fc.Config.Validate()
}

func (s *fleetSet) Prepare(in *component.Input) (component.CommitFunc, error) {
	classes := map[string]fleet.Class{}
	entries := map[string]reconcile.FleetEntry{}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(in.Doc().RunnerClasses)) {
		e := in.Doc().RunnerClasses[name].Fleet
		if e == (reconcile.FleetEntry{}) {
			continue
		}
		addr := reconcile.Address{Type: reconcile.TypeRunnerClass, Name: name}
		fc, err := fleetConfig(name, e)
		if err == nil {
			if _, ok := in.Doc().VMCeilings[e.VMCeiling]; !ok {
				err = fmt.Errorf("fleet: vm_ceiling %q is not declared", e.VMCeiling)
			}
		}
		if err != nil {
			errs = append(errs, in.Errorf(addr, "%v", err))
			continue
		}
		fc.Pool = fleetPool{a: s.a, class: name}
		fc.Ceiling = fleetCeiling{a: s.a, name: e.VMCeiling, types: e.InstanceTypes.Slice()}
		classes[name], entries[name] = fc, e
	}
	if len(classes) > 0 && len(errs) == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := s.a.opts.EC2(ctx)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("fleet: %w", err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return func() ([]string, error) {
		if err := s.rec.Configure(classes); err != nil {
			return nil, err
		}
		s.mu.Lock()
		old := s.entries
		s.entries = entries
		s.mu.Unlock()
		var changes []string
		for _, name := range slices.Sorted(maps.Keys(old)) {
			if _, ok := entries[name]; !ok {
				changes = append(changes, fmt.Sprintf("runner_class.%s: fleet removed (its runners stay; nothing launches or reaps them)", name))
			}
		}
		s.nudge()
		return changes, nil
	}, nil
}

func (s *fleetSet) Sweep(context.Context) {}

func (s *fleetSet) Close() {}

// nudge asks the loop for a pass now.
func (s *fleetSet) nudge() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// FleetWake is called by pickups and offers: the picture changed.
func (a *Inventory) FleetWake() {
	if a.comp.fleet != nil {
		a.comp.fleet.nudge()
	}
}

// fleetLoop runs the reconciler while this daemon leads the stack: each
// class every interval, and every class when woken (at most once per
// fleetMinGap). Standbys do nothing.
func (a *Inventory) fleetLoop(ctx context.Context) {
	s := a.comp.fleet
	t := time.NewTimer(time.Second)
	defer t.Stop()
	var last time.Time
	force := true
	for {
		if len(s.rec.Classes()) > 0 && a.opts.Arbitrating() {
			if gap := time.Since(last); !force || gap >= fleetMinGap {
				pctx, cancel := context.WithTimeout(ctx, fleetPassTimeout)
				err := s.rec.Pass(pctx, force)
				cancel()
				last, force = time.Now(), false
				s.mu.Lock()
				s.ran = true
				s.mu.Unlock()
				if err != nil && ctx.Err() == nil {
					a.log.Warn("fleet: reconcile pass", "err", err)
				}
			}
		}
		wait := time.Second
		if due := s.rec.NextDue(); !due.IsZero() {
			wait = min(wait, max(time.Until(due), 50*time.Millisecond))
		}
		if force {
			wait = min(wait, max(fleetMinGap-time.Since(last), 10*time.Millisecond))
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
			force = true
			if !t.Stop() {
				<-t.C
			}
		case <-t.C:
		}
	}
}

// status adds each fleet class's figures to the classes of a status report
// (the classes set reported them first).
func (s *fleetSet) Status(out *api.Components) {
	byClass := s.statusByClass()
	for i := range out.Classes {
		if st, ok := byClass[out.Classes[i].Name]; ok {
			out.Classes[i].Fleet = st
		}
	}
}

// statusByClass reports every fleet class.
func (s *fleetSet) statusByClass() map[string]*api.FleetStatus {
	list, stackErr := s.rec.Status()
	s.mu.Lock()
	entries := maps.Clone(s.entries)
	s.mu.Unlock()
	leading := s.a.opts.Arbitrating()
	out := map[string]*api.FleetStatus{}
	for _, cs := range list {
		e := entries[cs.Class]
		st := &api.FleetStatus{
			Leading: leading, Desired: cs.Desired, Schedule: cs.Schedule, Idle: cs.Idle, Booting: cs.Booting, Claimed: cs.Claimed,
			Terminating: cs.Terminating, CeilingRefused: cs.CeilingRefused, VMCeiling: e.VMCeiling, UsageClass: e.UsageClass,
			LastError: cmp.Or(cs.LastError, stackErr), LastLaunchError: cs.LastLaunchError, LastHour: cs.LastHour,
			Launched: cs.Launched, Terminated: map[string]uint64{}, LaunchErrors: cs.LaunchErrors, IdleRunnerSeconds: cs.IdleSeconds,
			SpotSnoozedUntil: httpapi.TimePtr(cs.SpotSnoozedUntil), LaunchBackoffUntil: httpapi.TimePtr(cs.LaunchBackoffUntil), LastRun: httpapi.TimePtr(cs.LastRun),
		}
		for r, n := range cs.Terminated {
			st.Terminated[string(r)] = n
		}
		if mgr, ok := s.a.comp.classes.live(cs.Class); ok {
			c := mgr.Counters()
			if hits, misses := float64(c.Claimed), float64(c.ExhaustedGlobal+c.ExhaustedLocal); hits+misses > 0 {
				ratio := hits / (hits + misses)
				st.PickupHitRatio = &ratio
			}
		}
		out[cs.Class] = st
	}
	return out
}

var (
	descFleetDesired      = prometheus.NewDesc("rpd_fleet_desired_idle", "Idle runners the class's fleet wants now (base min_idle or the active schedule's).", []string{"class", "schedule"}, nil)
	descFleetRunners      = prometheus.NewDesc("rpd_fleet_runners", "The fleet's runners by state: idle, booting, claimed, terminating.", []string{"class", "state"}, nil)
	descFleetLaunched     = prometheus.NewDesc("rpd_fleet_launched_total", "VMs the fleet launched, by lifecycle (spot, on-demand).", []string{"class", "lifecycle"}, nil)
	descFleetTerminated   = prometheus.NewDesc("rpd_fleet_terminated_total", "VMs the fleet terminated, by reason (scale_down, max_idle_age, threshold, boot_timeout, orphan, retired, retry).", []string{"class", "reason"}, nil)
	descFleetLaunchErrors = prometheus.NewDesc("rpd_fleet_launch_errors_total", "Launch errors by EC2 error code (call_failed: the call itself failed).", []string{"class", "code"}, nil)
	descFleetRefused      = prometheus.NewDesc("rpd_fleet_ceiling_refused", "VMs the last pass wanted but the vm_ceiling did not grant.", []string{"class"}, nil)
	descFleetSnoozed      = prometheus.NewDesc("rpd_fleet_spot_snoozed", "1 while spot launches of the class are snoozed after capacity errors.", []string{"class"}, nil)
	descFleetIdleSeconds  = prometheus.NewDesc("rpd_fleet_idle_runner_seconds_total", "Idle runner-seconds of the fleet (what the warm pool costs).", []string{"class"}, nil)
	descFleetHitRatio     = prometheus.NewDesc("rpd_fleet_pickup_hit_ratio", "Pickups that claimed a runner / pickups (claimed + exhausted) on this daemon.", []string{"class"}, nil)
)

// fleetCollector reports the fleet's series at scrape time.
type fleetCollector struct{ s *fleetSet }

func (c fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descFleetDesired, descFleetRunners, descFleetLaunched, descFleetTerminated, descFleetLaunchErrors, descFleetRefused, descFleetSnoozed, descFleetIdleSeconds, descFleetHitRatio} {
		ch <- d
	}
	c.s.offered.Describe(ch)
}

func (c fleetCollector) Collect(ch chan<- prometheus.Metric) {
	byClass := c.s.statusByClass()
	for _, class := range slices.Sorted(maps.Keys(byClass)) {
		st := byClass[class]
		component.Gauge(ch, descFleetDesired, float64(st.Desired), class, st.Schedule)
		for state, n := range map[string]int{"idle": st.Idle, "booting": st.Booting, "claimed": st.Claimed, "terminating": st.Terminating} {
			component.Gauge(ch, descFleetRunners, float64(n), class, state)
		}
		for _, lc := range []string{fleet.Spot, fleet.OnDemand} {
			component.Counter(ch, descFleetLaunched, float64(st.Launched[lc]), class, lc)
		}
		for _, r := range fleet.Reasons() {
			component.Counter(ch, descFleetTerminated, float64(st.Terminated[string(r)]), class, string(r))
		}
		for code, n := range st.LaunchErrors {
			component.Counter(ch, descFleetLaunchErrors, float64(n), class, code)
		}
		component.Gauge(ch, descFleetRefused, float64(st.CeilingRefused), class)
		component.Gauge(ch, descFleetSnoozed, component.B2F(st.SpotSnoozedUntil != nil), class)
		component.Counter(ch, descFleetIdleSeconds, st.IdleRunnerSeconds, class)
		if st.PickupHitRatio != nil {
			component.Gauge(ch, descFleetHitRatio, *st.PickupHitRatio, class)
		}
	}
	c.s.offered.Collect(ch)
}
