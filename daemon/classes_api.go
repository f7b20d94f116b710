package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/daemon/internal/httpapi"
	"github.com/rpdhq/rpd/runtime/pickup"
)

// This file is the runner inventory: GET /v1/classes[/{class}], the
// instances of a class by state, one instance, and the recent pickup
// events of each class.

// classReadTimeout bounds the backend reads of one class's inventory.
const classReadTimeout = 2 * time.Second

func (d *Daemon) listClasses(w http.ResponseWriter, r *http.Request) {
	list := d.comp.classes.declared()
	out := api.ClassList{Classes: make([]api.ClassDetail, 0, len(list))}
	for _, cl := range list {
		out.Classes = append(out.Classes, d.classDetail(r.Context(), cl))
	}
	_ = httpapi.WriteJSONConditional(w, r, out)
}

func (d *Daemon) getClass(w http.ResponseWriter, r *http.Request) {
	cl, err := d.liveClass(r.PathValue("class"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	_ = httpapi.WriteJSON(w, http.StatusOK, d.classDetail(r.Context(), cl))
}

func (d *Daemon) liveClass(name string) (*class, error) {
	cl, ok := d.comp.classes.get(name)
	if !ok {
		return nil, httpapi.NotFound("no runner_class %q: declare it with a runner_class block", name)
	}
	return cl, nil
}

// classDetail reads cl's queue depth and instance counts from the backend;
// what cannot be read is reported in Errors and counted as 0.
func (d *Daemon) classDetail(ctx context.Context, cl *class) api.ClassDetail {
	ctx, cancel := context.WithTimeout(ctx, classReadTimeout)
	defer cancel()
	counts := outcomes(cl.mgr.Counters())
	out := api.ClassDetail{
		Name: cl.name, Queue: cl.entry.Queue, Mode: string(cl.mgr.Config().Mode),
		Outcomes: counts,
		Recent:   d.comp.classes.recent(cl.name, counts),
		Errors:   []string{},
	}
	if d.comp.fleet != nil {
		out.Fleet = d.comp.fleet.statusByClass()[cl.name]
	}
	if info, err := d.backend.Queues.DescribeQueue(ctx, cl.entry.Queue); err != nil {
		out.Errors = append(out.Errors, fmt.Sprintf("queue %s depth: %v", cl.entry.Queue, err))
	} else {
		out.Depth = api.QueueDepth{Visible: info.Visible, InFlight: info.InFlight, Delayed: info.Delayed}
	}
	if insts, err := d.backend.Instances.List(ctx, cl.name, ""); err != nil {
		out.Errors = append(out.Errors, fmt.Sprintf("instance table: %v", err))
	} else {
		for _, in := range insts {
			switch in.State {
			case pickup.StateIdle:
				out.Instances.Idle++
			case pickup.StateClaimed:
				out.Instances.Claimed++
			case pickup.StateRetired:
				out.Instances.Retired++
			case pickup.StateTerminating:
				out.Instances.Terminating++
			}
		}
	}
	return out
}

func (d *Daemon) listInstances(w http.ResponseWriter, r *http.Request) {
	state := pickup.State(r.URL.Query().Get("state"))
	switch state {
	case "", pickup.StateIdle, pickup.StateClaimed, pickup.StateRetired, pickup.StateTerminating:
	default:
		d.fail(w, r, httpapi.BadRequest("state %q: use idle, claimed, terminating or retired (or omit it for all)", state))
		return
	}
	cl, err := d.liveClass(r.PathValue("class"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	win, err := httpapi.PageBounds[api.Instance](r.URL.Query())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	insts, err := d.backend.Instances.List(r.Context(), cl.name, state)
	if err != nil {
		d.fail(w, r, fmt.Errorf("list the instances of runner_class %s: %w", cl.name, err))
		return
	}
	for _, in := range insts {
		win.Add(func() api.Instance { return instanceJSON(in) })
	}
	_ = httpapi.WriteJSONConditional(w, r, api.InstanceList{Instances: win.Out, Total: win.Total, NextOffset: win.Next()})
}

func (d *Daemon) getInstance(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	inst, err := d.instance(r.Context(), id)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	_ = httpapi.WriteJSON(w, http.StatusOK, instanceJSON(inst))
}

// instance reads an instance from the instance table; a missing one is a
// 404.
func (d *Daemon) instance(ctx context.Context, id string) (pickup.Instance, error) {
	inst, err := d.backend.Instances.Get(ctx, id)
	if errors.Is(err, pickup.ErrNotFound) {
		err = httpapi.NotFound("no instance %q in the instance table", id)
	}
	return inst, err
}

// Recent pickup events are the difference between the counters now and
// the oldest sample inside historyWindow.
const (
	historyStep   = 10 * time.Second
	historyWindow = 5 * time.Minute
)

// pickupHistory keeps, per class, samples of its cumulative pickup
// counters at least historyStep apart and at most historyWindow old.
type pickupHistory struct {
	mu      sync.Mutex
	byClass map[string][]outcomeSample // oldest first
}

type outcomeSample struct {
	at     time.Time
	counts map[string]int64
}

func (h *pickupHistory) observe(now time.Time, class string, counts map[string]int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.observeLocked(now, class, counts)
}

func (h *pickupHistory) observeLocked(now time.Time, class string, counts map[string]int64) {
	if h.byClass == nil {
		h.byClass = map[string][]outcomeSample{}
	}
	s := h.byClass[class]
	if n := len(s); n > 0 {
		if decreased(s[n-1].counts, counts) {
			s = nil // a new pickup manager (the class's queue changed): its counters start over
		} else if now.Sub(s[n-1].at) < historyStep {
			return
		}
	}
	s = append(s, outcomeSample{at: now, counts: counts})
	for len(s) > 1 && now.Sub(s[0].at) > historyWindow {
		s = s[1:]
	}
	h.byClass[class] = s
}

// recent reports the events since the oldest sample of class (counts are
// its counters now), recording counts as a sample when one is due.
func (h *pickupHistory) recent(now time.Time, class string, counts map[string]int64) api.RecentPickups {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.observeLocked(now, class, counts)
	base := h.byClass[class][0]
	out := api.RecentPickups{WindowSeconds: now.Sub(base.at).Seconds(), Events: make(map[string]int64, len(counts))}
	for k, n := range counts {
		out.Events[k] = n - base.counts[k]
	}
	return out
}

// start records a new manager's counters: its figures begin here.
func (h *pickupHistory) start(now time.Time, class string, counts map[string]int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byClass == nil {
		h.byClass = map[string][]outcomeSample{}
	}
	h.byClass[class] = []outcomeSample{{at: now, counts: counts}}
}

func (h *pickupHistory) forget(class string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.byClass, class)
}

func decreased(before, after map[string]int64) bool {
	for k, n := range before {
		if after[k] < n {
			return true
		}
	}
	return false
}
