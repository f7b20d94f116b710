package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/reconcile"
	"github.com/rpdhq/rpd/runtime/pickup"
	"github.com/rpdhq/rpd/spec"
)

// class is one runner class's pickup manager.
type class struct {
	name     string
	queue    string
	mgr      *pickup.Manager
	decl     spec.RunnerClass
	retained bool
}

// classPlan is the runner-class part of a prepared plan.
type classPlan struct {
	decls   []spec.RunnerClass
	queues  map[string]string
	cfgs    map[string]pickup.Config
	newMgrs map[string]*pickup.Manager // new classes, and classes whose queue changed
}

func queueName(stack string, rc spec.RunnerClass) string {
	if rc.Queue.Name != "" {
		return rc.Queue.Name
	}
	return reconcile.DefaultQueueName(stack, rc.Name)
}

func (c *components) pickupConfig(rc spec.RunnerClass) pickup.Config {
	pc := pickup.Config{
		Class: rc.Name, CPU: rc.CPU, Mem: rc.Mem, InstanceTypes: rc.InstanceTypes,
		Mode: pickup.Mode(rc.Pickup.Mode), RequeueDelay: rc.Pickup.RequeueDelay, LocalExhaustion: rc.Pickup.LocalExhaustion,
	}
	if c.backend != nil && c.backend.Config.Type == "local" {
		// The local backend's short polls see the whole queue, so an empty
		// one is confirmed at once instead of after a 1 s long poll.
		pc.EmptyConfirmWait = pickup.ShortPollConfirm
	}
	return pc
}

// prepareClasses validates every class's pickup configuration and builds
// the managers that must be new. Called with c.mu read-locked.
func (c *components) prepareClasses(cfg *spec.Config) (classPlan, error) {
	cp := classPlan{decls: cfg.RunnerClasses, queues: map[string]string{}, cfgs: map[string]pickup.Config{}, newMgrs: map[string]*pickup.Manager{}}
	var errs []error
	for _, rc := range cfg.RunnerClasses {
		pc := c.pickupConfig(rc)
		if err := pc.Validate(); err != nil {
			errs = append(errs, at(rc.DeclRange, "runner_class %q: %v", rc.Name, err))
			continue
		}
		q := queueName(cfg.Stack, rc)
		cp.cfgs[rc.Name], cp.queues[rc.Name] = pc, q
		if cur, ok := c.classes[rc.Name]; ok && cur.queue == q {
			continue
		}
		if c.backend == nil {
			continue
		}
		m, err := pickup.NewManager(pc, c.backend.Queue(q), c.backend.Instances, pickup.Options{
			Logger: c.log.With("runner_class", rc.Name),
			Depth:  queueDepth(c.backend.Queues, q),
		})
		if err != nil {
			errs = append(errs, at(rc.DeclRange, "runner_class %q: %v", rc.Name, err))
			continue
		}
		cp.newMgrs[rc.Name] = m
	}
	return cp, errors.Join(errs...)
}

func queueDepth(admin backend.QueueAdmin, name string) func(ctx context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		info, err := admin.DescribeQueue(ctx, name)
		if err != nil {
			return 0, err
		}
		return info.Visible, nil
	}
}

// commitClasses installs new managers and reconfigures the others in
// place. Called with c.mu locked.
func (c *components) commitClasses(cp classPlan) ([]string, error) {
	var changes []string
	var errs []error
	declared := map[string]bool{}
	for _, rc := range cp.decls {
		declared[rc.Name] = true
		if m, ok := cp.newMgrs[rc.Name]; ok {
			old, had := c.classes[rc.Name]
			c.classes[rc.Name] = &class{name: rc.Name, queue: cp.queues[rc.Name], mgr: m, decl: rc}
			if had {
				changes = append(changes, fmt.Sprintf("runner_class.%s: queue %s -> %s", rc.Name, old.queue, cp.queues[rc.Name]))
			} else {
				changes = append(changes, fmt.Sprintf("runner_class.%s: created", rc.Name))
			}
			continue
		}
		cur, ok := c.classes[rc.Name]
		if !ok {
			continue // no backend (tests of the plan alone)
		}
		cur.retained = false
		if sameClass(cur.decl, rc) {
			continue
		}
		if err := cur.mgr.Reconfigure(cp.cfgs[rc.Name]); err != nil {
			errs = append(errs, at(rc.DeclRange, "runner_class %q: %v", rc.Name, err))
			continue
		}
		cur.decl = rc
		changes = append(changes, fmt.Sprintf("runner_class.%s: reconfigured", rc.Name))
	}
	for name, cl := range c.classes {
		if !declared[name] && !cl.retained {
			cl.retained = true
			changes = append(changes, fmt.Sprintf("runner_class.%s: removed from the configuration", name))
		}
	}
	return changes, errors.Join(errs...)
}

// sweepClassesLocked drops removed classes: a pickup manager holds nothing
// between calls (no goroutine outlives a Pickup), so a removed class goes
// at once; its claimed instances stay releasable through the instance
// table (they are retired, see releaseInstance).
func (c *components) sweepClassesLocked() {
	for name, cl := range c.classes {
		if cl.retained {
			delete(c.classes, name)
		}
	}
}

func (c *components) class(name string) (*class, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	cl, ok := c.classes[name]
	return cl, ok && !cl.retained
}

func (c *components) classStatuses() []api.ClassStatus {
	c.mu.RLock()
	list := make([]*class, 0, len(c.classes))
	for _, cl := range c.classes {
		list = append(list, cl)
	}
	c.mu.RUnlock()
	out := make([]api.ClassStatus, 0, len(list))
	for _, cl := range list {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st := cl.mgr.Stats(ctx)
		cancel()
		out = append(out, api.ClassStatus{Name: cl.name, Queue: cl.queue, Mode: string(cl.mgr.Config().Mode), Outcomes: outcomes(st)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func outcomes(st pickup.Stats) map[string]int64 {
	m := map[string]int64{
		"passed": int64(st.Passed), "requeued": int64(st.Requeued),
		"exhausted_global": int64(st.ExhaustedGlobal), "exhausted_local": int64(st.ExhaustedLocal),
		"claimed": int64(st.Claimed), "claim_lost_race": int64(st.ClaimLostRace), "claim_retried": int64(st.ClaimRetried),
		"claim_gave_up": int64(st.ClaimGaveUp),
	}
	for _, r := range pickup.DiscardReasons() {
		m["discarded_"+r.String()] = int64(st.Discarded[r])
	}
	return m
}

func (d *Daemon) pickup(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("class")
	var req api.PickupRequest
	if err := decode(w, r, &req); err != nil {
		d.fail(w, r, err)
		return
	}
	reqs := pickup.Requirements{UsageClass: req.UsageClass, InstanceTypes: req.InstanceTypes, MinCPU: req.MinCPU, MinMemMiB: req.MinMem, ResourceClass: req.ResourceClass}
	if err := reqs.Validate(); err != nil {
		d.fail(w, r, badRequest("%v", err))
		return
	}
	cl, ok := d.comp.class(name)
	if !ok {
		d.fail(w, r, notFound("no runner_class %q: declare it with a runner_class block", name))
		return
	}
	owner := req.WorkerID
	if owner == "" {
		owner = "worker-" + randomHex(8)
	}
	inst, err := cl.mgr.Pickup(r.Context(), reqs, owner)
	if err != nil {
		var ex *pickup.ExhaustedError
		if errors.As(err, &ex) {
			kind := api.ExhaustedGlobal
			if ex.Kind == pickup.Local {
				kind = api.ExhaustedLocal
			}
			d.fail(w, r, &httpError{status: http.StatusNotFound, code: api.CodeExhausted, kind: kind, msg: err.Error()})
			return
		}
		d.fail(w, r, err)
		return
	}
	if err := writeJSON(w, http.StatusOK, instanceJSON(inst)); err != nil {
		// Nobody received the instance: give it back to the pool.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = cl.mgr.Release(ctx, inst.ID, owner, pickup.ReOffer)
	}
}

func instanceJSON(inst pickup.Instance) api.Instance {
	return api.Instance{
		InstanceID: inst.ID, Class: inst.Class, State: string(inst.State), Owner: inst.Owner,
		UsageClass: inst.UsageClass, InstanceType: inst.InstanceType, CPU: inst.CPU, Mem: inst.MemMiB,
		ResourceClass: inst.ResourceClass, Threshold: inst.Threshold, UpdatedAt: timePtr(inst.UpdatedAt),
	}
}

func (d *Daemon) offer(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("class")
	var req api.Instance
	if err := decode(w, r, &req); err != nil {
		d.fail(w, r, err)
		return
	}
	if req.InstanceID == "" {
		d.fail(w, r, badRequest("instance_id is required"))
		return
	}
	if req.Class != "" && req.Class != name {
		d.fail(w, r, badRequest("class %q in the body disagrees with runner_class %q of the path", req.Class, name))
		return
	}
	cl, ok := d.comp.class(name)
	if !ok {
		d.fail(w, r, notFound("no runner_class %q: declare it with a runner_class block", name))
		return
	}
	inst := pickup.Instance{
		ID: req.InstanceID, Class: name, UsageClass: req.UsageClass, InstanceType: req.InstanceType,
		CPU: req.CPU, MemMiB: req.Mem, ResourceClass: req.ResourceClass, Threshold: req.Threshold,
	}
	if err := cl.mgr.Offer(r.Context(), inst); err != nil {
		var de *pickup.DiscardError
		if errors.As(err, &de) {
			d.fail(w, r, badRequest("%v", err))
			return
		}
		d.fail(w, r, err)
		return
	}
	inst.State = pickup.StateIdle
	_ = writeJSON(w, http.StatusOK, instanceJSON(inst))
}

func (d *Daemon) releaseInstance(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var req api.ReleaseInstanceRequest
	if err := decode(w, r, &req); err != nil {
		d.fail(w, r, err)
		return
	}
	inst, err := d.backend.Instances.Get(r.Context(), id)
	if err != nil {
		if errors.Is(err, pickup.ErrNotFound) {
			d.fail(w, r, notFound("no instance %q in the instance table", id))
			return
		}
		d.fail(w, r, err)
		return
	}
	if inst.State != pickup.StateClaimed {
		d.fail(w, r, &httpError{status: http.StatusConflict, code: api.CodeUnavailable, msg: fmt.Sprintf("instance %s is %s, not claimed; nothing to release", id, inst.State)})
		return
	}
	owner := req.Owner
	if owner == "" {
		owner = inst.Owner
	}
	cl, ok := d.comp.class(inst.Class)
	if !ok {
		// The class was removed from the configuration: there is no queue
		// to re-offer the instance to, so it is retired, never left
		// claimed for good.
		out, err := d.backend.Instances.Transition(r.Context(), pickup.Transition{ID: id, From: pickup.StateClaimed, To: pickup.StateRetired, ExpectOwner: owner})
		if err != nil {
			if errors.Is(err, pickup.ErrConditionFailed) {
				err = &httpError{status: http.StatusConflict, code: api.CodeUnavailable, msg: fmt.Sprintf("instance %s of removed runner_class %q: %v", id, inst.Class, err)}
			}
			d.fail(w, r, err)
			return
		}
		_ = writeJSON(w, http.StatusOK, instanceJSON(out))
		return
	}
	disp := pickup.ReOffer
	if req.Retire {
		disp = pickup.Retire
	}
	out, err := cl.mgr.Release(r.Context(), id, owner, disp)
	if err != nil {
		if errors.Is(err, pickup.ErrConditionFailed) {
			d.fail(w, r, &httpError{status: http.StatusConflict, code: api.CodeUnavailable, msg: err.Error()})
			return
		}
		d.fail(w, r, err)
		return
	}
	_ = writeJSON(w, http.StatusOK, instanceJSON(out))
}

var (
	descClassDecisions = prometheus.NewDesc("rpd_pickup_events_total", "Pickup events by kind: passed, requeued, discarded_<reason>, exhausted_global, exhausted_local, claimed, claim_lost_race, claim_retried, claim_gave_up.", []string{"class", "event"}, nil)
	descClassDepth     = prometheus.NewDesc("rpd_pickup_queue_depth", "Approximate visible messages (idle runners) in the class queue.", []string{"class"}, nil)
	descClassLatency   = prometheus.NewDesc("rpd_pickup_latency_seconds", "Recent pickup-to-claim latency quantiles.", []string{"class", "quantile"}, nil)
)

func describeClasses(ch chan<- *prometheus.Desc) {
	ch <- descClassDecisions
	ch <- descClassLatency
	ch <- descClassDepth
}

// sameClass reports whether two declarations of a class configure its
// pickup manager alike.
func sameClass(a, b spec.RunnerClass) bool {
	a.DeclRange, b.DeclRange = hcl.Range{}, hcl.Range{}
	return reflect.DeepEqual(a, b)
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (d *Daemon) collectClasses(ch chan<- prometheus.Metric) {
	d.comp.mu.RLock()
	list := make([]*class, 0, len(d.comp.classes))
	for _, cl := range d.comp.classes {
		list = append(list, cl)
	}
	d.comp.mu.RUnlock()
	for _, cl := range list {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st := cl.mgr.Stats(ctx)
		cancel()
		if st.QueueDepth != nil {
			gauge(ch, descClassDepth, float64(*st.QueueDepth), cl.name)
		}
		for ev, n := range outcomes(st) {
			counter(ch, descClassDecisions, float64(n), cl.name, ev)
		}
		gauge(ch, descClassLatency, st.Latency.P50.Seconds(), cl.name, "0.5")
		gauge(ch, descClassLatency, st.Latency.P99.Seconds(), cl.name, "0.99")
	}
}
