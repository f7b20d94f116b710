package ec2_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend/ec2"
	"github.com/rpdhq/rpd/internal/ec2test"
	"github.com/rpdhq/rpd/runtime/fleet"
)

func open(t *testing.T, endpoint, stack string) *ec2.Client {
	t.Helper()
	c, err := ec2.Open(context.Background(), ec2.Options{Stack: stack, Region: ec2test.Region, Endpoint: endpoint,
		Credentials: ec2test.Credentials(), MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func spec() fleet.LaunchSpec {
	return fleet.LaunchSpec{Template: "runner", InstanceTypes: []string{"c6i.large", "c7i.large"}, UsageClass: fleet.OnDemand}
}

// TestEC2 runs the tests against one moto_server (it takes seconds to
// start); each uses a stack of its own.
func TestEC2(t *testing.T) {
	moto := ec2test.Start(t)
	ec2test.CreateLaunchTemplate(t, moto, "runner")
	t.Run("LaunchListCountTerminate", func(t *testing.T) { testLaunchListCountTerminate(t, moto) })
	t.Run("Faults", func(t *testing.T) { testFaults(t, moto) })
	t.Run("ReconcilerLaunchRate", func(t *testing.T) { testReconcilerLaunchRate(t, moto) })
}

// testLaunchListCountTerminate launches with CreateFleet, finds the VMs by
// their tags, counts them as VMs and vCPUs, and terminates them.
func testLaunchListCountTerminate(t *testing.T, moto string) {
	ctx := ctxT(t)
	c := open(t, moto, "s1")
	res, err := c.Launch(ctx, fleet.LaunchRequest{Class: "medium", LaunchID: "L1", ClientToken: "L1-on-demand", Lifecycle: fleet.OnDemand, Count: 2, Spec: spec()})
	if err != nil || len(res.Instances) != 2 || len(res.Errors) != 0 {
		t.Fatalf("Launch = %+v, %v; want 2 instances, no errors", res, err)
	}
	other := open(t, moto, "s2")
	if _, err := other.Launch(ctx, fleet.LaunchRequest{Class: "medium", LaunchID: "L2", ClientToken: "L2", Lifecycle: fleet.OnDemand, Count: 1, Spec: spec()}); err != nil {
		t.Fatal(err)
	}
	insts, err := c.Instances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, i := range insts {
		if i.Class != "medium" || i.Launch != "L1" || (i.State != fleet.InstancePending && i.State != fleet.InstanceRunning) || i.LaunchedAt.IsZero() {
			t.Errorf("instance %+v: want class medium, launch L1, pending or running, a launch time", i)
		}
		ids = append(ids, i.ID)
	}
	if len(ids) != 2 {
		t.Fatalf("the stack lists %v; want its 2 instances only", ids)
	}
	vms := &ec2.UsageSource{Client: c}
	vcpus := &ec2.UsageSource{Client: c, VCPUs: true}
	if r, err := vms.Usage(ctx); err != nil || r.Active != 2 {
		t.Fatalf("usage in VMs = %+v, %v; want 2", r, err)
	}
	if r, err := vcpus.Usage(ctx); err != nil || r.Active != 4 {
		t.Fatalf("usage in vCPUs = %+v, %v; want 4 (2 × c6i.large)", r, err)
	}
	if r, err := (&ec2.UsageSource{Client: c, Tags: map[string]string{"rpd:class": "small"}}).Usage(ctx); err != nil || r.Active != 0 {
		t.Fatalf("usage with a tag filter no VM has = %+v, %v; want 0", r, err)
	}
	if err := c.Terminate(ctx, append(ids, "i-0000000000000dead")); err != nil {
		t.Fatalf("Terminate (one ID unknown): %v", err)
	}
	if r, err := vms.Usage(ctx); err != nil || r.Active != 0 {
		t.Fatalf("usage after terminating = %+v, %v; want 0", r, err)
	}
	insts, _ = c.Instances(ctx)
	for _, i := range insts {
		if i.State == fleet.InstancePending || i.State == fleet.InstanceRunning {
			t.Errorf("%s is %s after Terminate", i.ID, i.State)
		}
	}
}

// testFaults runs CreateFleet through the fault proxy: spot capacity
// errors come back in the result, throttling is retried by the SDK, and a
// call EC2 refuses is a *fleet.APIError.
func testFaults(t *testing.T, moto string) {
	proxy := ec2test.NewProxy(t, moto)
	ctx := ctxT(t)
	c := open(t, proxy.URL, "faults")
	req := fleet.LaunchRequest{Class: "medium", LaunchID: "L1", ClientToken: "L1-spot", Lifecycle: fleet.Spot, Count: 3, Spec: spec()}

	proxy.SpotCapacity(1)
	res, err := c.Launch(ctx, req)
	if err != nil || len(res.Instances) != 1 || len(res.Errors) != 1 || !res.Errors[0].Capacity() || res.Instances[0].Lifecycle != fleet.Spot {
		t.Fatalf("spot with room for 1 of 3: %+v, %v; want 1 spot instance and an InsufficientInstanceCapacity error", res, err)
	}
	proxy.SpotCapacity(0)
	if res, err := c.Launch(ctx, req); err != nil || len(res.Instances) != 0 || len(res.Errors) != 1 || res.Errors[0].Code != "InsufficientInstanceCapacity" {
		t.Fatalf("spot without room: %+v, %v; want no instance and the capacity error", res, err)
	}
	proxy.SpotCapacity(-1)

	proxy.Throttle("CreateFleet", 2)
	before := proxy.Calls("CreateFleet")
	req.Lifecycle, req.Count = fleet.OnDemand, 1
	if res, err := c.Launch(ctx, req); err != nil || len(res.Instances) != 1 {
		t.Fatalf("throttled twice: %+v, %v; want the SDK to retry and launch", res, err)
	}
	if n := proxy.Calls("CreateFleet") - before; n != 3 {
		t.Errorf("CreateFleet was called %d times; want 3 (2 throttled, 1 through)", n)
	}

	proxy.Refuse("CreateFleet", "InvalidLaunchTemplateName.NotFoundException", 1)
	var apiErr *fleet.APIError
	if _, err := c.Launch(ctx, req); !errors.As(err, &apiErr) || apiErr.Code != "InvalidLaunchTemplateName.NotFoundException" {
		t.Fatalf("refused: %v; want a *fleet.APIError with EC2's code", err)
	}
}

// memIntents, noPool and openCeiling run a Reconciler against moto alone.
type memIntents struct {
	mu sync.Mutex
	m  map[string]fleet.Launch
}

func (s *memIntents) PutLaunch(_ context.Context, l fleet.Launch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[l.ID] = l
	return nil
}

func (s *memIntents) DeleteLaunch(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
	return nil
}

func (s *memIntents) Launches(context.Context) ([]fleet.Launch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []fleet.Launch
	for _, l := range s.m {
		out = append(out, l)
	}
	return out, nil
}

type noPool struct{}

func (noPool) Runners(context.Context) ([]fleet.Runner, error)      { return nil, nil }
func (noPool) Withdraw(context.Context, []string) ([]string, error) { return nil, nil }
func (noPool) Retire(context.Context, fleet.Runner) error           { return nil }

type openCeiling struct{}

func (openCeiling) Claim(_ context.Context, _ string, n int) ([]string, error) {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint(i)
	}
	return ids, nil
}
func (openCeiling) Confirm(string) {}
func (openCeiling) Release(string) {}

// testReconcilerLaunchRate measures how many VMs a second the reconciler
// launches against moto (docs/fleet.md): min_idle 100, at most 50 per
// pass, passes back to back; and that it launches exactly 100.
func testReconcilerLaunchRate(t *testing.T, moto string) {
	ctx := ctxT(t)
	c := open(t, moto, "rate")
	const want = 100
	r := fleet.New(fleet.Options{Cloud: c, Intents: &memIntents{m: map[string]fleet.Launch{}}})
	if err := r.Configure(map[string]fleet.Class{"medium": {
		Config:   fleet.Config{Class: "medium", MinIdle: want, BootTimeout: time.Hour, OrphanGrace: time.Hour, MaxLaunch: 50},
		Launch:   spec(),
		Interval: time.Second, Pool: noPool{}, Ceiling: openCeiling{},
	}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for pass := 0; pass < 20 && len(ec2test.Live(t, moto, "rate", nil)) < want; pass++ {
		if err := r.Pass(ctx, true); err != nil {
			t.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	live := ec2test.Live(t, moto, "rate", nil)
	if len(live) != want {
		t.Fatalf("%d VMs run; want exactly %d", len(live), want)
	}
	launches := map[string]bool{}
	for _, tags := range live {
		launches[tags["rpd:launch"]] = true
	}
	t.Logf("launched %d VMs in %d CreateFleet calls in %v: %.0f VMs/s against moto", want, len(launches), elapsed.Round(time.Millisecond), float64(want)/elapsed.Seconds())
	for _, st := range must(r.Status()) {
		if st.Booting != want {
			t.Errorf("status: %d booting; want %d", st.Booting, want)
		}
	}
}

func must(st []fleet.ClassStatus, _ string) []fleet.ClassStatus { return st }
