package inventory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/daemon/internal/component"
	"github.com/rpdhq/rpd/daemon/internal/httpapi"
	"github.com/rpdhq/rpd/reconcile"
	"github.com/rpdhq/rpd/runtime/pickup"
)

// pickupConfig is the one conversion of a runner-class entry (and its
// queue's visibility timeout, with which the manager leases what it
// receives, as every consumer of the queue does) to the pickup package's
// configuration. shortPoll says the backend's polls see the whole queue
// (the local backend), so an empty one is confirmed at once instead of
// after a 1 s long poll.
func pickupConfig(name string, e reconcile.ClassEntry, visibility reconcile.Duration, shortPoll bool) pickup.Config {
	pc := pickup.Config{
		Class: name, CPU: e.CPU, Mem: e.Mem, InstanceTypes: e.InstanceTypes.Slice(),
		Mode: pickup.Mode(e.Mode), RequeueDelay: time.Duration(e.RequeueDelay), LocalExhaustion: e.LocalExhaustion,
		ClaimTTL: time.Duration(e.ClaimTTL), Visibility: time.Duration(visibility),
	}
	if shortPoll {
		pc.EmptyConfirmWait = pickup.ShortPollConfirm
	}
	return pc
}

// class is one runner class's pickup manager.
type class struct {
	name       string
	mgr        *pickup.Manager
	entry      reconcile.ClassEntry
	visibility reconcile.Duration // the queue's visibility timeout
	component.Retention
}

// classSet is the runner classes of the configuration, a pickup manager
// each.
type classSet struct {
	log       *slog.Logger
	shortPoll bool
	// open builds a pickup manager on the named queue; nil (no backend)
	// builds none.
	open func(pc pickup.Config, queue string) (*pickup.Manager, error)
	now  func() time.Time
	// history samples the classes' pickup counters for their recent
	// figures (GET /v1/classes): at each new manager, then at every sweep.
	history pickupHistory

	mu sync.Mutex
	m  map[string]*class
}

var _ component.Set = (*classSet)(nil)

func newClassSet(log *slog.Logger, shortPoll bool, open func(pickup.Config, string) (*pickup.Manager, error), now func() time.Time) *classSet {
	return &classSet{log: log, shortPoll: shortPoll, open: open, now: now, m: map[string]*class{}}
}

// prepare validates every class's pickup configuration and builds the
// managers that must be new: for new classes, and classes whose queue
// changed.
func (s *classSet) Prepare(in *component.Input) (component.CommitFunc, error) {
	s.mu.Lock()
	have := maps.Clone(s.m)
	s.mu.Unlock()
	entries := in.Doc().RunnerClasses
	fresh, err := component.PrepareEach(in, reconcile.TypeRunnerClass, entries, func(name string, e reconcile.ClassEntry) (*pickup.Manager, bool, error) {
		pc := pickupConfig(name, e, in.Doc().Queues[name].VisibilityTimeout, s.shortPoll)
		if err := pc.Validate(); err != nil {
			return nil, false, err
		}
		if cur, ok := have[name]; (ok && cur.entry.Queue == e.Queue) || s.open == nil {
			return nil, false, nil
		}
		m, err := s.open(pc, e.Queue)
		return m, err == nil, err
	})
	if err != nil {
		return nil, err
	}
	queues := maps.Clone(in.Doc().Queues)
	return func() ([]string, error) { return s.commit(maps.Clone(entries), queues, fresh) }, nil
}

// commit installs new managers and reconfigures the others in place.
func (s *classSet) commit(entries map[string]reconcile.ClassEntry, queues map[string]reconcile.QueueEntry, fresh map[string]*pickup.Manager) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return component.CommitEach(reconcile.TypeRunnerClass, s.m, entries, func(name string, e reconcile.ClassEntry, cur *class, had bool) (string, error) {
		vis := queues[name].VisibilityTimeout
		m := fresh[name]
		if m == nil && !had && s.open != nil { // swept since prepare
			var err error
			if m, err = s.open(pickupConfig(name, e, vis, s.shortPoll), e.Queue); err != nil {
				return "", err
			}
		}
		switch {
		case m != nil:
			s.m[name] = &class{name: name, mgr: m, entry: e, visibility: vis}
			s.history.start(s.now(), name, outcomes(m.Counters()))
			if had {
				go cur.mgr.GiveBack(context.Background()) // its held misfits, to the old queue; no I/O under s.mu
				return component.EntryChange("runner_class."+name, cur.entry, e), nil
			}
			return fmt.Sprintf("runner_class.%s: created", name), nil
		case !had:
			return "", nil // no backend (tests of the plan alone)
		}
		cur.Retained = false
		if cur.entry == e && cur.visibility == vis {
			return "", nil
		}
		if err := cur.mgr.Reconfigure(pickupConfig(name, e, vis, s.shortPoll)); err != nil {
			return "", err
		}
		change := ""
		if cur.entry != e {
			change = component.EntryChange("runner_class."+name, cur.entry, e)
		}
		cur.entry, cur.visibility = e, vis
		return change, nil
	})
}

// sweep drops removed classes: a pickup manager holds no request between
// calls, only misfits it gives back here, so a removed class goes at once;
// its claimed instances stay releasable through the instance table (they
// are retired, see releaseInstance).
func (s *classSet) Sweep(ctx context.Context) {
	s.mu.Lock()
	now := s.now()
	var dropped []*pickup.Manager
	for name, cl := range s.m {
		if cl.Retained {
			delete(s.m, name)
			s.history.forget(name)
			dropped = append(dropped, cl.mgr)
			continue
		}
		s.history.observe(now, name, outcomes(cl.mgr.Counters()))
	}
	s.mu.Unlock()
	for _, m := range dropped {
		m.GiveBack(ctx)
	}
}

// recent reports class's pickup events over the last minutes; counts are
// its counters now.
func (s *classSet) recent(class string, counts map[string]int64) api.RecentPickups {
	return s.history.recent(s.now(), class, counts)
}

func (s *classSet) Close() {}

// live returns the pickup manager of a declared class.
func (s *classSet) live(name string) (*pickup.Manager, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cl, ok := s.m[name]
	if !ok || cl.Retained {
		return nil, false
	}
	return cl.mgr, true
}

// get returns a copy of a declared class.
func (s *classSet) get(name string) (*class, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cl, ok := s.m[name]
	if !ok || cl.Retained {
		return nil, false
	}
	c := *cl
	return &c, true
}

// declared lists copies of the declared classes (not the removed ones),
// sorted by name.
func (s *classSet) declared() []*class {
	return slices.DeleteFunc(s.snapshot(), func(cl *class) bool { return cl.Retained })
}

// snapshot lists copies of every class, sorted by name.
func (s *classSet) snapshot() []*class {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := make([]*class, 0, len(s.m))
	for _, cl := range s.m {
		list = append(list, &class{name: cl.name, mgr: cl.mgr, entry: cl.entry, visibility: cl.visibility, Retention: cl.Retention})
	}
	slices.SortFunc(list, func(a, b *class) int { return strings.Compare(a.name, b.name) })
	return list
}

// stats reads a manager's counters and its queue's depth (I/O, bounded).
func stats(m *pickup.Manager) pickup.Stats {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return m.Stats(ctx)
}

func (s *classSet) Status(out *api.Components) {
	for _, cl := range s.snapshot() {
		out.Classes = append(out.Classes, api.ClassStatus{Name: cl.name, Queue: cl.entry.Queue, Mode: string(cl.mgr.Config().Mode), Outcomes: outcomes(cl.mgr.Counters())})
	}
}

func (s *classSet) collect(ch chan<- prometheus.Metric) {
	for _, cl := range s.snapshot() {
		st := stats(cl.mgr)
		if st.QueueDepth != nil {
			component.Gauge(ch, descClassDepth, float64(*st.QueueDepth), cl.name)
		}
		for ev, n := range outcomes(st) {
			component.Counter(ch, descClassDecisions, float64(n), cl.name, ev)
		}
		component.Gauge(ch, descClassHeld, float64(st.Held), cl.name)
		component.Gauge(ch, descClassLatency, st.Latency.P50.Seconds(), cl.name, "0.5")
		component.Gauge(ch, descClassLatency, st.Latency.P99.Seconds(), cl.name, "0.99")
	}
}

func outcomes(st pickup.Stats) map[string]int64 {
	m := map[string]int64{
		"passed": int64(st.Passed), "requeued": int64(st.Requeued),
		"exhausted_global": int64(st.ExhaustedGlobal), "exhausted_local": int64(st.ExhaustedLocal),
		"claimed": int64(st.Claimed), "claim_lost_race": int64(st.ClaimLostRace), "claim_retried": int64(st.ClaimRetried),
		"claim_gave_up": int64(st.ClaimGaveUp),
		"resumed":       int64(st.Resumed), "confirmed": int64(st.Confirmed), "claim_expired": int64(st.Lapsed),
		"reoffered": int64(st.Reoffered), "returned": int64(st.Returned), "duplicate": int64(st.Duplicates),
	}
	for _, r := range pickup.DiscardReasons() {
		m["discarded_"+r.String()] = int64(st.Discarded[r])
	}
	return m
}

func instanceJSON(inst pickup.Instance) api.Instance {
	return api.Instance{
		InstanceID: inst.ID, Class: inst.Class, State: string(inst.State), Owner: inst.Owner,
		UsageClass: inst.UsageClass, InstanceType: inst.InstanceType, CPU: inst.CPU, Mem: inst.MemMiB,
		ResourceClass: inst.ResourceClass, Threshold: inst.Threshold, UpdatedAt: httpapi.TimePtr(inst.UpdatedAt),
		ClaimExpiresAt: httpapi.TimePtr(inst.ClaimExpires),
	}
}

var (
	descClassDecisions = prometheus.NewDesc("rpd_pickup_events_total", "Pickup events by kind: passed, requeued, discarded_<reason>, exhausted_global, exhausted_local, claimed, claim_lost_race, claim_retried, claim_gave_up, resumed, confirmed, claim_expired, reoffered, returned, duplicate.", []string{"class", "event"}, nil)
	descClassHeld      = prometheus.NewDesc("rpd_pickup_held", "Misfits the class's pickup manager holds in flight for the next requests (docs/pickup.md).", []string{"class"}, nil)
	descClassDepth     = prometheus.NewDesc("rpd_pickup_queue_depth", "Approximate visible messages (idle runners) in the class queue.", []string{"class"}, nil)
	descClassLatency   = prometheus.NewDesc("rpd_pickup_latency_seconds", "Recent pickup-to-claim latency quantiles.", []string{"class", "quantile"}, nil)
)

func describeClasses(ch chan<- *prometheus.Desc) {
	ch <- descClassDecisions
	ch <- descClassLatency
	ch <- descClassDepth
	ch <- descClassHeld
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// classCollector exports every runner class's series: each replica's own
// (every replica serves pickup).
type classCollector struct{ s *classSet }

func (c classCollector) Describe(ch chan<- *prometheus.Desc) { describeClasses(ch) }

func (c classCollector) Collect(ch chan<- prometheus.Metric) { c.s.collect(ch) }
