package arbiter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/daemon/internal/httpapi"
	"github.com/rpdhq/rpd/runtime/pickup"
)

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
func (a *Arbiter) Pickup(ctx context.Context, name string, req api.PickupRequest) (api.Instance, func(), error) {
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
func (a *Arbiter) ConfirmInstance(ctx context.Context, id string, req api.ConfirmInstanceRequest) (api.Instance, error) {
	if req.Owner == "" {
		return api.Instance{}, httpapi.BadRequest("owner is required: the worker_id the instance was picked up with")
	}
	inst, err := a.instance(ctx, id)
	if err != nil {
		return api.Instance{}, err
	}
	mgr, ok := a.comp.classes.live(inst.Class)
	if !ok {
		return api.Instance{}, unavailable(fmt.Sprintf("instance %s belongs to runner_class %q, which is no longer declared; release it", id, inst.Class))
	}
	out, err := mgr.Confirm(ctx, id, req.Owner)
	if errors.Is(err, pickup.ErrConditionFailed) {
		return api.Instance{}, unavailable(fmt.Sprintf("instance %s is not claimed by %q (it is %s): the claim was released, or lapsed after claim_ttl without a confirmation; pick up another", id, req.Owner, inst.State))
	}
	return instanceJSON(out), err
}

// Offer puts a booted runner into class's pool.
func (a *Arbiter) Offer(ctx context.Context, name string, req api.Instance) (api.Instance, error) {
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
func (a *Arbiter) ReleaseInstance(ctx context.Context, id string, req api.ReleaseInstanceRequest) (api.Instance, error) {
	inst, err := a.instance(ctx, id)
	if err != nil {
		return api.Instance{}, err
	}
	if inst.State != pickup.StateClaimed {
		return api.Instance{}, unavailable(fmt.Sprintf("instance %s is %s, not claimed; nothing to release", id, inst.State))
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
			err = unavailable(fmt.Sprintf("instance %s of removed runner_class %q: %v", id, inst.Class, err))
		}
		return instanceJSON(out), err
	}
	disp := pickup.ReOffer
	if req.Retire {
		disp = pickup.Retire
	}
	out, err := mgr.Release(ctx, id, owner, disp)
	if errors.Is(err, pickup.ErrConditionFailed) {
		err = unavailable(err.Error())
	}
	return instanceJSON(out), err
}

// Classes reports every declared runner class.
func (a *Arbiter) Classes(ctx context.Context) []api.ClassDetail {
	list := a.comp.classes.declared()
	out := make([]api.ClassDetail, 0, len(list))
	for _, cl := range list {
		out = append(out, a.classDetail(ctx, cl))
	}
	return out
}

// Class reports one runner class.
func (a *Arbiter) Class(ctx context.Context, name string) (api.ClassDetail, error) {
	cl, err := a.liveClass(name)
	if err != nil {
		return api.ClassDetail{}, err
	}
	return a.classDetail(ctx, cl), nil
}

func (a *Arbiter) liveClass(name string) (*class, error) {
	cl, ok := a.comp.classes.get(name)
	if !ok {
		return nil, noClass(name)
	}
	return cl, nil
}

// classDetail reads cl's queue depth and instance counts from the backend;
// what cannot be read is reported in Errors and counted as 0.
func (a *Arbiter) classDetail(ctx context.Context, cl *class) api.ClassDetail {
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
func (a *Arbiter) Instances(ctx context.Context, name, state string, win *httpapi.Window[api.Instance]) error {
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
func (a *Arbiter) Instance(ctx context.Context, id string) (api.Instance, error) {
	inst, err := a.instance(ctx, id)
	if err != nil {
		return api.Instance{}, err
	}
	return instanceJSON(inst), nil
}

// instance reads an instance from the instance table; a missing one is a
// 404.
func (a *Arbiter) instance(ctx context.Context, id string) (pickup.Instance, error) {
	inst, err := a.backend.Instances.Get(ctx, id)
	if errors.Is(err, pickup.ErrNotFound) {
		err = httpapi.NotFound("no instance %q in the instance table", id)
	}
	return inst, err
}
