package inventory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"strings"
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

	k *component.Keyed[classEntry, *pickup.Manager, *class]
}

// classEntry is what a class's manager is configured from: its entry and
// its queue's visibility timeout.
type classEntry struct {
	reconcile.ClassEntry
	visibility reconcile.Duration
}

var _ component.Set = (*classSet)(nil)

func newClassSet(log *slog.Logger, shortPoll bool, open func(pickup.Config, string) (*pickup.Manager, error), now func() time.Time) *classSet {
	s := &classSet{log: log, shortPoll: shortPoll, open: open, now: now}
	config := func(name string, e classEntry) pickup.Config {
		return pickupConfig(name, e.ClassEntry, e.visibility, s.shortPoll)
	}
	s.k = component.NewKeyed(reconcile.TypeRunnerClass, component.Hooks[classEntry, *pickup.Manager, *class]{
		Check: func(name string, e classEntry) error { return config(name, e).Validate() },
		// A class whose queue changed gets a new manager on the new queue.
		Rebuild: func(cur *class, e classEntry) bool { return cur.entry.Queue != e.Queue },
		Build: func(name string, e classEntry) (*pickup.Manager, bool, error) {
			if s.open == nil {
				return nil, false, nil // no backend (tests of the plan alone)
			}
			m, err := s.open(config(name, e), e.Queue)
			return m, err == nil, err
		},
		Create: func(name string, e classEntry, m *pickup.Manager, cur *class, had bool) (*class, string) {
			cl := &class{name: name, mgr: m, entry: e.ClassEntry, visibility: e.visibility}
			s.history.start(s.now(), name, outcomes(m.Counters()))
			if had {
				go cur.mgr.GiveBack(context.Background()) // its held misfits, to the old queue; no I/O under the lock
				return cl, component.EntryChange("runner_class."+name, cur.entry, e.ClassEntry)
			}
			return cl, fmt.Sprintf("runner_class.%s: created", name)
		},
		Update: func(name string, cur *class, e classEntry) (string, error) {
			if cur.entry == e.ClassEntry && cur.visibility == e.visibility {
				return "", nil
			}
			if err := cur.mgr.Reconfigure(config(name, e)); err != nil {
				return "", err
			}
			change := ""
			if cur.entry != e.ClassEntry {
				change = component.EntryChange("runner_class."+name, cur.entry, e.ClassEntry)
			}
			cur.entry, cur.visibility = e.ClassEntry, e.visibility
			return change, nil
		},
	})
	return s
}

// Prepare validates every class's pickup configuration and builds the
// managers that must be new: for new classes, and classes whose queue
// changed.
func (s *classSet) Prepare(in *component.Input) (component.CommitFunc, error) {
	doc := in.Doc()
	entries := make(map[string]classEntry, len(doc.RunnerClasses))
	for name, e := range doc.RunnerClasses {
		entries[name] = classEntry{ClassEntry: e, visibility: doc.Queues[name].VisibilityTimeout}
	}
	return s.k.Prepare(in, entries)
}

// sweep drops removed classes: a pickup manager holds no request between
// calls, only misfits it gives back here, so a removed class goes at once;
// its claimed instances stay releasable through the instance table (they
// are retired, see releaseInstance).
func (s *classSet) Sweep(ctx context.Context) {
	dropped := s.k.Sweep(func(*class) bool { return true })
	now := s.now()
	for _, cl := range s.snapshot() {
		s.history.observe(now, cl.name, outcomes(cl.mgr.Counters()))
	}
	for name, cl := range dropped {
		s.history.forget(name)
		cl.mgr.GiveBack(ctx)
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
	cl, ok := s.get(name)
	if !ok {
		return nil, false
	}
	return cl.mgr, true
}

// get returns a copy of a declared class.
func (s *classSet) get(name string) (c *class, ok bool) {
	s.k.With(func(m map[string]*class) {
		var cl *class
		if cl, ok = m[name]; ok && !cl.Retained {
			cp := *cl
			c = &cp
		}
	})
	return c, c != nil
}

// declared lists copies of the declared classes (not the removed ones),
// sorted by name.
func (s *classSet) declared() []*class {
	return slices.DeleteFunc(s.snapshot(), func(cl *class) bool { return cl.Retained })
}

// snapshot lists copies of every class, sorted by name.
func (s *classSet) snapshot() []*class {
	var list []*class
	s.k.With(func(m map[string]*class) {
		for _, cl := range m {
			list = append(list, &class{name: cl.name, mgr: cl.mgr, entry: cl.entry, visibility: cl.visibility, Retention: cl.Retention})
		}
	})
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
