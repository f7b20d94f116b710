package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rpdhq/rpd/runtime/fleet"
)

// scriptCloud answers Launch with err (when set) and counts the calls.
type scriptCloud struct {
	launches  int
	err       error
	listErr   error
	instances []fleet.Instance
}

func (c *scriptCloud) Launch(_ context.Context, req fleet.LaunchRequest) (fleet.LaunchResult, error) {
	c.launches++
	if c.err != nil {
		return fleet.LaunchResult{}, c.err
	}
	var res fleet.LaunchResult
	for i := range req.Count {
		in := fleet.Instance{ID: fmt.Sprintf("i-%d-%d", c.launches, i), State: fleet.InstancePending, Class: req.Class, Launch: req.LaunchID}
		res.Instances = append(res.Instances, in)
		c.instances = append(c.instances, in)
	}
	return res, nil
}

func (c *scriptCloud) Instances(context.Context) ([]fleet.Instance, error) {
	return slices.Clone(c.instances), c.listErr
}

func (c *scriptCloud) Terminate(context.Context, []string) error { return nil }

type emptyPool struct{}

func (emptyPool) Runners(context.Context) ([]fleet.Runner, error)      { return nil, nil }
func (emptyPool) Withdraw(context.Context, []string) ([]string, error) { return nil, nil }
func (emptyPool) Retire(context.Context, fleet.Runner) error           { return nil }

// countingCeiling grants everything and remembers what was released.
type countingCeiling struct{ granted, released int }

func (c *countingCeiling) Claim(_ context.Context, _ string, n int) ([]string, error) {
	ids := make([]string, n)
	for i := range ids {
		c.granted++
		ids[i] = fmt.Sprint(c.granted)
	}
	return ids, nil
}
func (c *countingCeiling) Confirm(string) {}
func (c *countingCeiling) Release(string) { c.released++ }

// failingIntents refuses every write, as a fenced store does once another
// daemon leads.
type failingIntents struct{ simIntents }

func (f *failingIntents) PutLaunch(context.Context, fleet.Launch) error {
	return errors.New("fenced: another daemon leads this stack now")
}

func newReconciler(t *testing.T, cloud fleet.Cloud, intents fleet.Intents, ceiling fleet.Ceiling, now func() time.Time) *fleet.Reconciler {
	t.Helper()
	r := fleet.New(fleet.Options{Cloud: cloud, Intents: intents, Now: now})
	err := r.Configure(map[string]fleet.Class{"c": {
		Config: fleet.Config{Class: "c", MinIdle: 2, BootTimeout: time.Minute, OrphanGrace: time.Minute, MaxLaunch: 10},
		Launch: fleet.LaunchSpec{UsageClass: fleet.OnDemand}, Interval: time.Second, Pool: emptyPool{}, Ceiling: ceiling,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A launch EC2 refuses is counted by its code, its claims go back, and the
// class's launches wait 10 s (doubling) instead of retrying at every pass.
func TestRefusedLaunchBacksOff(t *testing.T) {
	now := monday
	cloud := &scriptCloud{err: &fleet.APIError{Code: "InvalidLaunchTemplateName.NotFoundException", Message: "no such template"}}
	ceiling := &countingCeiling{}
	r := newReconciler(t, cloud, &simIntents{m: map[string]fleet.Launch{}}, ceiling, func() time.Time { return now })
	ctx := context.Background()
	for i := range 5 { // five passes within 5 s
		if err := r.Pass(ctx, true); (err == nil) != (i > 0) {
			t.Fatalf("pass %d: %v", i, err)
		}
		now = now.Add(time.Second)
	}
	if cloud.launches != 1 || ceiling.released != 2 {
		t.Fatalf("%d launch calls, %d claims released; want 1 call within the backoff, its 2 claims back", cloud.launches, ceiling.released)
	}
	st, _ := r.Status()
	if st[0].LaunchErrors["InvalidLaunchTemplateName.NotFoundException"] != 1 || st[0].LaunchBackoffUntil.IsZero() || st[0].Booting != 0 {
		t.Fatalf("status %+v; want the error counted, the backoff shown, nothing booting", st[0])
	}
	now = now.Add(10 * time.Second)
	cloud.err = nil
	if err := r.Pass(ctx, true); err != nil || cloud.launches != 2 || len(cloud.instances) != 2 {
		t.Fatalf("after the backoff: %v, %d calls, %d VMs; want the launch made", err, cloud.launches, len(cloud.instances))
	}
}

// A launch intent that cannot be recorded (the store is fenced: another
// daemon leads) launches nothing and gives its claims back; a cloud that
// cannot be listed decides nothing.
func TestNoLaunchWithoutIntentOrList(t *testing.T) {
	cloud, ceiling := &scriptCloud{}, &countingCeiling{}
	r := newReconciler(t, cloud, &failingIntents{simIntents{m: map[string]fleet.Launch{}}}, ceiling, func() time.Time { return monday })
	if err := r.Pass(context.Background(), true); err == nil || cloud.launches != 0 || ceiling.released != ceiling.granted {
		t.Fatalf("fenced intent: %v, %d launches, %d of %d claims released; want an error, nothing launched, every claim back", err, cloud.launches, ceiling.released, ceiling.granted)
	}
	cloud.listErr = errors.New("RequestLimitExceeded")
	r2 := newReconciler(t, cloud, &simIntents{m: map[string]fleet.Launch{}}, ceiling, func() time.Time { return monday })
	if err := r2.Pass(context.Background(), true); err == nil || cloud.launches != 0 {
		t.Fatalf("unlisted cloud: %v, %d launches; want an error and nothing launched", err, cloud.launches)
	}
	if _, stackErr := r2.Status(); stackErr == "" {
		t.Error("status does not say the cloud could not be listed")
	}
}

// A successor that finds a dead leader's launch intent while the cloud
// lists only part of its VMs (EC2 lists a fleet's VMs as it starts them)
// launches nothing for the rest and keeps their claims; once the cloud
// lists all of them, the intent is resolved with every one.
func TestPartlyListedLaunchIsNotResolvedEarly(t *testing.T) {
	now := monday
	vm := func(id string) fleet.Instance {
		return fleet.Instance{ID: id, State: fleet.InstancePending, Class: "c", Launch: "L1", LaunchedAt: now}
	}
	cloud, ceiling := &scriptCloud{instances: []fleet.Instance{vm("i-a")}}, &countingCeiling{}
	intents := &simIntents{m: map[string]fleet.Launch{"L1": {ID: "L1", Class: "c", CreatedAt: now, Count: 2, Claims: []string{"k1", "k2"}}}}
	r := newReconciler(t, cloud, intents, ceiling, func() time.Time { return now })
	ctx := context.Background()
	for range 3 {
		if err := r.Pass(ctx, true); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Second)
	}
	ls, _ := intents.Launches(ctx)
	if cloud.launches != 0 || ceiling.released != 0 || len(ls) != 1 || ls[0].Done {
		t.Fatalf("one of two VMs listed: %d launch calls, %d claims released, intents %+v; want nothing launched or released, the intent open", cloud.launches, ceiling.released, ls)
	}
	cloud.instances = append(cloud.instances, vm("i-b"))
	if err := r.Pass(ctx, true); err != nil {
		t.Fatal(err)
	}
	ls, _ = intents.Launches(ctx)
	if cloud.launches != 0 || ceiling.released != 0 || len(ls) != 1 || !ls[0].Done || !slices.Equal(ls[0].Instances, []string{"i-a", "i-b"}) {
		t.Fatalf("both listed: %d launch calls, %d claims released, intents %+v; want the intent resolved with both", cloud.launches, ceiling.released, ls)
	}
	if st, _ := r.Status(); st[0].Booting != 2 {
		t.Fatalf("status %+v; want 2 booting", st[0])
	}
}
