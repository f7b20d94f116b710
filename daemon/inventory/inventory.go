package inventory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/ec2"
	"github.com/rpdhq/rpd/daemon/arbiter"
	"github.com/rpdhq/rpd/daemon/internal/component"
	"github.com/rpdhq/rpd/daemon/internal/httpapi"
	"github.com/rpdhq/rpd/internal/open"
	"github.com/rpdhq/rpd/runtime/pickup"
)

// Options configure an Inventory.
type Options struct {
	// Logger receives its logs; nil discards them.
	Logger *slog.Logger
	// Backend is the open backend: the classes' queues and the instance
	// table.
	Backend *open.Backend
	// Arbiter holds the VM ceilings the fleet claims its VMs on, and the
	// grant records its launch intents go to.
	Arbiter *arbiter.Arbiter
	// Arbitrating reports whether this daemon leads the stack and has
	// restored its grants: only then does the fleet launch and reap.
	Arbitrating func() bool
	// Epoch is the leader epoch this daemon leads under (0: none); the
	// fleet stamps its launch intents with it.
	Epoch func() int64
	// EC2 opens the stack's EC2 client; nil: a fleet is refused.
	EC2 func(ctx context.Context) (*ec2.Client, error)
}

// Inventory is the runner inventory a daemon serves: the runner classes
// (pickup from their queues, offers, releases, the instance table) and the
// fleet that launches and reaps their runners. Every replica serves pickup
// (the instance table's conditional writes arbitrate); only the leader
// runs the fleet.
type Inventory struct {
	opts    Options
	log     *slog.Logger
	backend *open.Backend
	arb     *arbiter.Arbiter
	comp    struct {
		classes *classSet
		fleet   *fleetSet
	}
}

// New builds an inventory with no class; a reload fills it.
func New(opts Options, now func() time.Time) *Inventory {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Arbitrating == nil {
		opts.Arbitrating = func() bool { return true }
	}
	if opts.Epoch == nil {
		opts.Epoch = func() int64 { return 0 }
	}
	if opts.EC2 == nil {
		opts.EC2 = func(context.Context) (*ec2.Client, error) {
			return nil, errors.New("this daemon has no EC2 client: a fleet block cannot be run")
		}
	}
	a := &Inventory{opts: opts, log: opts.Logger, backend: opts.Backend, arb: opts.Arbiter}
	be := opts.Backend
	openClass := func(pc pickup.Config, queue string) (*pickup.Manager, error) {
		return pickup.NewManager(pc, be.Queue(queue), be.Instances, pickup.Options{
			Logger: a.log.With("runner_class", pc.Class),
			Depth:  queueDepth(be.Queues, queue),
		})
	}
	a.comp.classes = newClassSet(a.log, be.Config.Type == "local", openClass, now)
	a.comp.fleet = newFleetSet(a, a.log)
	return a
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

func (a *Inventory) sets() []component.Set { return []component.Set{a.comp.classes, a.comp.fleet} }

// Prepare validates in against the classes and the fleet, changing
// nothing; see component.Prepare.
func (a *Inventory) Prepare(in *component.Input) ([]component.CommitFunc, error) {
	return component.Prepare(in, a.sets()...)
}

// Sweep removes classes dropped from the configuration once idle.
func (a *Inventory) Sweep(ctx context.Context) {
	for _, s := range a.sets() {
		s.Sweep(ctx)
	}
}

// Status adds the classes, with their fleets, to a status report.
func (a *Inventory) Status(out *api.Components) {
	for _, s := range a.sets() {
		s.Status(out)
	}
}

// Close stops the classes' and the fleet's background work.
func (a *Inventory) Close() {
	for _, s := range a.sets() {
		s.Close()
	}
}

// Collectors are the inventory's Prometheus series, read at scrape time.
func (a *Inventory) Collectors() []prometheus.Collector {
	return []prometheus.Collector{classCollector{a.comp.classes}, fleetCollector{a.comp.fleet}}
}

// Run maintains the classes' queues, runs the fleet and sweeps idle
// dropped classes every sweepEvery, until ctx ends.
func (a *Inventory) Run(ctx context.Context, sweepEvery time.Duration) {
	var wg sync.WaitGroup
	wg.Go(func() { a.fleetLoop(ctx) })
	wg.Go(func() { a.maintainLoop(ctx) })
	component.Every(ctx, sweepEvery, a.Sweep)
	wg.Wait()
}

// This file is the runner inventory: pickup, offer, confirm and release of
// instances, the classes with their queue depth and instance counts, and
// the instances of a class. Every replica serves it (the instance table's
// conditional writes arbitrate), not only the leader.

// classReadTimeout bounds the backend reads of one class's inventory.
const classReadTimeout = 2 * time.Second

func noClass(name string) error {
	return httpapi.NotFound("no runner_class %q: declare it with a runner_class block", name)
}

// Pickup claims an idle runner of class for req.WorkerID (or a fresh
// owner). The returned give-back re-offers it when the answer cannot be
// delivered to a worker that could not ask again (no worker_id); nil
// otherwise.
func (a *Inventory) Pickup(ctx context.Context, name string, req api.PickupRequest) (api.Instance, func(), error) {
	reqs := pickup.Requirements{UsageClass: req.UsageClass, InstanceTypes: req.InstanceTypes, MinCPU: req.MinCPU, MinMemMiB: req.MinMem, ResourceClass: req.ResourceClass,
		Wait: time.Duration(req.WaitSeconds) * time.Second}
	if err := reqs.Validate(); err != nil {
		return api.Instance{}, nil, httpapi.BadRequest("%v", err)
	}
	mgr, ok := a.comp.classes.live(name)
	if !ok {
		return api.Instance{}, nil, noClass(name)
	}
	owner := req.WorkerID
	if owner == "" {
		owner = "worker-" + randomHex(8)
	}
	inst, err := mgr.Pickup(ctx, reqs, owner)
	a.FleetWake() // a claimed runner, or an exhausted pool: the fleet may launch
	if err != nil {
		var ex *pickup.ExhaustedError
		if errors.As(err, &ex) {
			kind := api.ExhaustedGlobal
			if ex.Kind == pickup.Local {
				kind = api.ExhaustedLocal
			}
			return api.Instance{}, nil, &httpapi.Error{Status: http.StatusNotFound, Code: api.CodeExhausted, Kind: kind, Msg: err.Error()}
		}
		return api.Instance{}, nil, err
	}
	var giveBack func()
	if req.WorkerID == "" {
		// Nobody can ask for it again (no worker_id to retry with). With a
		// worker_id the claim stays for the retry; claim_ttl bounds it.
		giveBack = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, _ = mgr.Release(ctx, inst.ID, owner, pickup.ReOffer)
		}
	}
	return instanceJSON(inst), giveBack, nil
}

// ConfirmInstance records that the owner received its claim; with
// claim_ttl it no longer lapses.
func (a *Inventory) ConfirmInstance(ctx context.Context, id string, req api.ConfirmInstanceRequest) (api.Instance, error) {
	if req.Owner == "" {
		return api.Instance{}, httpapi.BadRequest("owner is required: the worker_id the instance was picked up with")
	}
	inst, err := a.instance(ctx, id)
	if err != nil {
		return api.Instance{}, err
	}
	mgr, ok := a.comp.classes.live(inst.Class)
	if !ok {
		return api.Instance{}, httpapi.Conflict(fmt.Sprintf("instance %s belongs to runner_class %q, which is no longer declared; release it", id, inst.Class))
	}
	out, err := mgr.Confirm(ctx, id, req.Owner)
	if errors.Is(err, pickup.ErrConditionFailed) {
		return api.Instance{}, httpapi.Conflict(fmt.Sprintf("instance %s is not claimed by %q (it is %s): the claim was released, or lapsed after claim_ttl without a confirmation; pick up another", id, req.Owner, inst.State))
	}
	return instanceJSON(out), err
}

// Offer puts a booted runner into class's pool.
func (a *Inventory) Offer(ctx context.Context, name string, req api.Instance) (api.Instance, error) {
	if req.InstanceID == "" {
		return api.Instance{}, httpapi.BadRequest("instance_id is required")
	}
	if req.Class != "" && req.Class != name {
		return api.Instance{}, httpapi.BadRequest("class %q in the body disagrees with runner_class %q of the path", req.Class, name)
	}
	mgr, ok := a.comp.classes.live(name)
	if !ok {
		return api.Instance{}, noClass(name)
	}
	inst := pickup.Instance{
		ID: req.InstanceID, Class: name, UsageClass: req.UsageClass, InstanceType: req.InstanceType,
		CPU: req.CPU, MemMiB: req.Mem, ResourceClass: req.ResourceClass, Threshold: req.Threshold,
	}
	if err := mgr.Offer(ctx, inst); err != nil {
		var de *pickup.DiscardError
		if errors.As(err, &de) {
			return api.Instance{}, httpapi.BadRequest("%v", err)
		}
		return api.Instance{}, err
	}
	inst.State = pickup.StateIdle
	a.FleetWake() // a booting runner offered itself
	return instanceJSON(inst), nil
}

// ReleaseInstance gives a claimed runner back to its pool, or retires it.
func (a *Inventory) ReleaseInstance(ctx context.Context, id string, req api.ReleaseInstanceRequest) (api.Instance, error) {
	inst, err := a.instance(ctx, id)
	if err != nil {
		return api.Instance{}, err
	}
	if inst.State != pickup.StateClaimed {
		return api.Instance{}, httpapi.Conflict(fmt.Sprintf("instance %s is %s, not claimed; nothing to release", id, inst.State))
	}
	owner := req.Owner
	if owner == "" {
		owner = inst.Owner
	}
	mgr, ok := a.comp.classes.live(inst.Class)
	if !ok {
		// The class was removed from the configuration: there is no queue
		// to re-offer the instance to, so it is retired, never left
		// claimed for good.
		out, err := a.backend.Instances.Transition(ctx, pickup.Transition{ID: id, From: pickup.StateClaimed, To: pickup.StateRetired, ExpectOwner: owner})
		if errors.Is(err, pickup.ErrConditionFailed) {
			err = httpapi.Conflict(fmt.Sprintf("instance %s of removed runner_class %q: %v", id, inst.Class, err))
		}
		return instanceJSON(out), err
	}
	disp := pickup.ReOffer
	if req.Retire {
		disp = pickup.Retire
	}
	out, err := mgr.Release(ctx, id, owner, disp)
	if errors.Is(err, pickup.ErrConditionFailed) {
		err = httpapi.Conflict(err.Error())
	}
	return instanceJSON(out), err
}

// Classes reports every declared runner class.
func (a *Inventory) Classes(ctx context.Context) []api.ClassDetail {
	list := a.comp.classes.declared()
	out := make([]api.ClassDetail, 0, len(list))
	for _, cl := range list {
		out = append(out, a.classDetail(ctx, cl))
	}
	return out
}

// Class reports one runner class.
func (a *Inventory) Class(ctx context.Context, name string) (api.ClassDetail, error) {
	cl, err := a.liveClass(name)
	if err != nil {
		return api.ClassDetail{}, err
	}
	return a.classDetail(ctx, cl), nil
}

func (a *Inventory) liveClass(name string) (*class, error) {
	cl, ok := a.comp.classes.get(name)
	if !ok {
		return nil, noClass(name)
	}
	return cl, nil
}

// classDetail reads cl's queue depth and instance counts from the backend;
// what cannot be read is reported in Errors and counted as 0.
func (a *Inventory) classDetail(ctx context.Context, cl *class) api.ClassDetail {
	ctx, cancel := context.WithTimeout(ctx, classReadTimeout)
	defer cancel()
	counts := outcomes(cl.mgr.Counters())
	out := api.ClassDetail{
		Name: cl.name, Queue: cl.entry.Queue, Mode: string(cl.mgr.Config().Mode),
		Outcomes: counts,
		Recent:   a.comp.classes.recent(cl.name, counts),
		Errors:   []string{},
	}
	if a.comp.fleet != nil {
		out.Fleet = a.comp.fleet.statusByClass()[cl.name]
	}
	if info, err := a.backend.Queues.DescribeQueue(ctx, cl.entry.Queue); err != nil {
		out.Errors = append(out.Errors, fmt.Sprintf("queue %s depth: %v", cl.entry.Queue, err))
	} else {
		out.Depth = api.QueueDepth{Visible: info.Visible, InFlight: info.InFlight, Delayed: info.Delayed}
	}
	if insts, err := a.backend.Instances.List(ctx, cl.name, ""); err != nil {
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

// Instances adds the instances of class name in state ("" for all) to win.
func (a *Inventory) Instances(ctx context.Context, name, state string, win *httpapi.Window[api.Instance]) error {
	st := pickup.State(state)
	switch st {
	case "", pickup.StateIdle, pickup.StateClaimed, pickup.StateRetired, pickup.StateTerminating:
	default:
		return httpapi.BadRequest("state %q: use idle, claimed, terminating or retired (or omit it for all)", state)
	}
	cl, err := a.liveClass(name)
	if err != nil {
		return err
	}
	insts, err := a.backend.Instances.List(ctx, cl.name, st)
	if err != nil {
		return fmt.Errorf("list the instances of runner_class %s: %w", cl.name, err)
	}
	for _, in := range insts {
		win.Add(func() api.Instance { return instanceJSON(in) })
	}
	return nil
}

// Instance reads one instance from the instance table.
func (a *Inventory) Instance(ctx context.Context, id string) (api.Instance, error) {
	inst, err := a.instance(ctx, id)
	if err != nil {
		return api.Instance{}, err
	}
	return instanceJSON(inst), nil
}

// instance reads an instance from the instance table; a missing one is a
// 404.
func (a *Inventory) instance(ctx context.Context, id string) (pickup.Instance, error) {
	inst, err := a.backend.Instances.Get(ctx, id)
	if errors.Is(err, pickup.ErrNotFound) {
		err = httpapi.NotFound("no instance %q in the instance table", id)
	}
	return inst, err
}
