package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rpdhq/rpd/backend/ec2"
	"github.com/rpdhq/rpd/daemon/arbiter"
	"github.com/rpdhq/rpd/daemon/internal/security"
	"github.com/rpdhq/rpd/runtime/fleet"
	"github.com/rpdhq/rpd/runtime/ledger"
	"github.com/rpdhq/rpd/runtime/pickup"
	"github.com/rpdhq/rpd/spec"
)

// The fleet reconciler's interfaces (runtime/fleet), on the daemon's parts.

var (
	_ fleet.Cloud   = fleetCloud{}
	_ fleet.Intents = fleetIntents{}
	_ fleet.Pool    = fleetPool{}
	_ fleet.Ceiling = fleetCeiling{}
)

// fleetCloud is the stack's EC2 client, opened by the fleet set's prepare.
type fleetCloud struct{ s *fleetSet }

func (c fleetCloud) get(ctx context.Context) (*ec2.Client, error) { return c.s.a.opts.EC2(ctx) }

func (c fleetCloud) Launch(ctx context.Context, req fleet.LaunchRequest) (fleet.LaunchResult, error) {
	cl, err := c.get(ctx)
	if err != nil {
		return fleet.LaunchResult{}, &fleet.APIError{Code: "no_client", Message: err.Error()}
	}
	return cl.Launch(ctx, req)
}

func (c fleetCloud) Instances(ctx context.Context) ([]fleet.Instance, error) {
	cl, err := c.get(ctx)
	if err != nil {
		return nil, err
	}
	return cl.Instances(ctx)
}

func (c fleetCloud) Terminate(ctx context.Context, ids []string) error {
	cl, err := c.get(ctx)
	if err != nil {
		return err
	}
	return cl.Terminate(ctx, ids)
}

// fleetIntents keeps launch intents as grant records.
type fleetIntents struct{ a *Inventory }

func (i fleetIntents) PutLaunch(ctx context.Context, l fleet.Launch) error {
	body, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("encode launch intent %s: %w", l.ID, err)
	}
	return i.a.arb.GrantStore().PutGrant(ctx, arbiter.LaunchRecordPrefix+l.ID, body)
}

func (i fleetIntents) DeleteLaunch(ctx context.Context, id string) error {
	return i.a.arb.GrantStore().DeleteGrant(ctx, arbiter.LaunchRecordPrefix+id)
}

func (i fleetIntents) Launches(ctx context.Context) ([]fleet.Launch, error) {
	recs, err := i.a.arb.GrantStore().LoadGrants(ctx)
	if err != nil {
		return nil, err
	}
	var out []fleet.Launch
	for id, body := range recs {
		if !strings.HasPrefix(id, arbiter.LaunchRecordPrefix) {
			continue
		}
		var l fleet.Launch
		if err := json.Unmarshal(body, &l); err != nil || l.ID == "" {
			i.a.log.Error("unreadable launch intent record: left in place", "record", id, "err", err)
			continue
		}
		out = append(out, l)
	}
	return out, nil
}

// fleetPool is a class's inventory: its instance table records and, to
// take runners out of the pool, its pickup manager.
type fleetPool struct {
	a     *Inventory
	class string
}

func (p fleetPool) Runners(ctx context.Context) ([]fleet.Runner, error) {
	var out []fleet.Runner
	for _, st := range []pickup.State{pickup.StateIdle, pickup.StateClaimed, pickup.StateTerminating} {
		insts, err := p.a.backend.Instances.List(ctx, p.class, st)
		if err != nil {
			return nil, err
		}
		for _, in := range insts {
			out = append(out, runnerOf(in))
		}
	}
	return out, nil
}

func runnerOf(in pickup.Instance) fleet.Runner {
	return fleet.Runner{ID: in.ID, State: fleet.RunnerState(in.State), Since: in.UpdatedAt, Threshold: in.Threshold, Owner: in.Owner}
}

func (p fleetPool) manager() (*pickup.Manager, error) {
	mgr, ok := p.a.comp.classes.live(p.class)
	if !ok {
		return nil, fmt.Errorf("runner_class %q has no pickup manager", p.class)
	}
	return mgr, nil
}

func (p fleetPool) Withdraw(ctx context.Context, ids []string) ([]string, error) {
	mgr, err := p.manager()
	if err != nil {
		return nil, err
	}
	return mgr.Withdraw(ctx, ids, pickup.StateTerminating)
}

func (p fleetPool) Retire(ctx context.Context, r fleet.Runner) error {
	if r.State == fleet.RunnerIdle {
		mgr, err := p.manager()
		if err != nil {
			return err
		}
		_, err = mgr.Withdraw(ctx, []string{r.ID}, pickup.StateRetired)
		return err
	}
	_, err := p.a.backend.Instances.Transition(ctx, pickup.Transition{ID: r.ID, From: pickup.State(r.State), To: pickup.StateRetired, ExpectOwner: r.Owner})
	if errors.Is(err, pickup.ErrConditionFailed) {
		return nil // changed meanwhile: the next pass decides again
	}
	return err
}

// lookupInstances returns the records of ids in the instance table, in
// any class: a VM rpd holds a record of is never an orphan.
func (a *Inventory) lookupInstances(ctx context.Context, ids []string) (map[string]fleet.Record, error) {
	out := map[string]fleet.Record{}
	for _, id := range ids {
		in, err := a.backend.Instances.Get(ctx, id)
		switch {
		case errors.Is(err, pickup.ErrNotFound):
			continue
		case err != nil:
			return nil, err
		}
		out[id] = fleet.Record{Runner: runnerOf(in), Class: in.Class}
	}
	return out, nil
}

// fleetCeiling claims a fleet's VMs on its vm_ceiling, one claim per VM,
// each recorded (fenced) like a claim over HTTP, so that a new leader
// restores it.
type fleetCeiling struct {
	a    *Inventory
	name string
	// types are the class's instance types: on a ceiling counted in vCPUs
	// each VM claims the vCPUs of the largest.
	types []string
}

// weight is what one VM claims on the ceiling: 1, or on a usage "ec2"
// ceiling counted in vCPUs the vCPUs of the class's largest type.
func (c fleetCeiling) weight(ctx context.Context) (int, error) {
	e, ok := c.a.arb.CeilingEntry(c.name)
	if !ok || e.Usage.Type != spec.UsageEC2 || e.Usage.Unit != spec.UsageUnitCPUs {
		return 1, nil
	}
	cl, err := c.a.opts.EC2(ctx)
	if err != nil {
		return 0, err
	}
	w := 1
	for _, t := range c.types {
		v, err := cl.VCPUs(ctx, t)
		if err != nil {
			return 0, err
		}
		w = max(w, v)
	}
	return w, nil
}

// claimWait is how long a fleet's claims wait for the ceiling: two usage
// polls (a next_usage ceiling grants when the next figure arrives), at
// most 30 s.
func claimWait(l *ledger.Ledger) time.Duration {
	return min(2*l.Config().PollInterval+time.Second, 30*time.Second)
}

func (c fleetCeiling) Claim(ctx context.Context, worker string, n int) ([]string, error) {
	l, ok := c.a.arb.CeilingLedger(c.name, true)
	if !ok {
		return nil, fmt.Errorf("vm_ceiling %q is not declared", c.name)
	}
	weight, err := c.weight(ctx)
	if err != nil {
		return nil, fmt.Errorf("vm_ceiling %q counts vCPUs: %w", c.name, err)
	}
	wctx, cancel := context.WithTimeout(ctx, claimWait(l))
	defer cancel()
	var mu sync.Mutex
	var claims []*ledger.Claim
	var errs []error
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			cl, err := l.Request(wctx, ledger.Request{WorkerID: worker, Count: weight})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				claims = append(claims, cl)
			case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
			default:
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	var ids []string
	for _, cl := range claims {
		if err := c.a.arb.RecordClaim(security.WithPrincipal(ctx, security.FleetPrincipal), c.name, cl); err != nil {
			cl.Cancel() // a claim a new leader would not know could over-book
			errs = append(errs, err)
			continue
		}
		ids = append(ids, cl.ID().String())
	}
	if len(ids) == 0 && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return ids, nil
}

func (c fleetCeiling) lookup(id string) (*ledger.Claim, bool) {
	l, ok := c.a.arb.CeilingLedger(c.name, false)
	if !ok {
		return nil, false
	}
	cid, err := ledger.ParseClaimID(id)
	if err != nil {
		return nil, false
	}
	return l.Lookup(cid)
}

func (c fleetCeiling) Confirm(id string) {
	cl, ok := c.lookup(id)
	if !ok || !cl.ConfirmedAt().IsZero() {
		return // ended (the figure covers the VM), or confirmed already
	}
	if err := cl.Confirm(); err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.a.arb.RecordClaim(ctx, c.name, cl); err != nil {
		c.a.log.Warn("fleet: a claim's confirmation was not recorded (a new leader would count it until it expires)", "vm_ceiling", c.name, "claim", id, "err", err)
	}
}

func (c fleetCeiling) Release(id string) {
	cl, ok := c.lookup(id)
	if !ok {
		return
	}
	c.a.arb.EndClaim(c.name, cl)
}
