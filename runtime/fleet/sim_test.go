package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/rpdhq/rpd/runtime/fleet"
	"github.com/rpdhq/rpd/runtime/ledger"
	"github.com/rpdhq/rpd/runtime/pickup"
)

// The simulation harness: the real fleet engine and Reconciler, the real
// pickup Manager (on an in-memory queue and table) and the real ledger,
// around a simulated cloud, all on one virtual clock. The property tests
// and BenchmarkFleetDay run on it.

const simClass = "medium"

// simClock is the virtual clock. Only the simulation's goroutine advances it.
type simClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *simClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *simClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// After fires at once: the pickup manager's backoffs and confirm waits cost
// no virtual time.
func (c *simClock) After(time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	ch <- c.Now()
	return ch
}

// AfterFunc never fires: the simulated ledger grants immediately and
// expires claims when it is next asked.
func (c *simClock) AfterFunc(time.Duration, func()) ledger.Timer { return noTimer{} }

type noTimer struct{}

func (noTimer) Stop() bool { return true }

// simVM is one VM of the simulated cloud.
type simVM struct {
	fleet.Instance
	bootAt  time.Time // when its runner is ready to offer itself
	offers  bool      // false: it never boots (boot_timeout reaps it)
	offered bool
	goneAt  time.Time
}

// simCloud is a cloud whose VMs boot after a drawn delay; spot can be made
// to fail with capacity errors.
type simCloud struct {
	mu       sync.Mutex
	clock    *simClock
	rng      *rand.Rand
	boot     func(r *rand.Rand) (time.Duration, bool)
	vms      map[string]*simVM
	seq      int
	noSpot   bool
	launches int
	// onTerminate sees each VM before it is terminated (invariant checks).
	onTerminate func(id string)
}

func newSimCloud(clock *simClock, seed uint64, boot func(r *rand.Rand) (time.Duration, bool)) *simCloud {
	return &simCloud{clock: clock, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), boot: boot, vms: map[string]*simVM{}}
}

func (c *simCloud) Launch(ctx context.Context, req fleet.LaunchRequest) (fleet.LaunchResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.launches++
	if req.Lifecycle == fleet.Spot && c.noSpot {
		return fleet.LaunchResult{Errors: []fleet.LaunchError{{Code: "InsufficientInstanceCapacity", Message: "no spot capacity"}}}, nil
	}
	var res fleet.LaunchResult
	for range req.Count {
		res.Instances = append(res.Instances, c.startLocked(req.Class, req.LaunchID, req.Lifecycle).Instance)
	}
	return res, nil
}

// startLocked starts a VM; class "" is a VM a job launched itself.
func (c *simCloud) startLocked(class, launch, lifecycle string) *simVM {
	c.seq++
	now := c.clock.Now()
	d, ok := c.boot(c.rng)
	vm := &simVM{Instance: fleet.Instance{ID: fmt.Sprintf("i-%06d", c.seq), State: fleet.InstancePending, LaunchedAt: now,
		Class: class, Launch: launch, Lifecycle: lifecycle, Type: "c6i.large"}, bootAt: now.Add(d), offers: ok}
	c.vms[vm.ID] = vm
	return vm
}

func (c *simCloud) Instances(ctx context.Context) ([]fleet.Instance, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	out := make([]fleet.Instance, 0, len(c.vms))
	for id, vm := range c.vms {
		if vm.State == fleet.InstanceTerminated && now.Sub(vm.goneAt) > time.Hour {
			delete(c.vms, id) // EC2 forgets terminated instances after about an hour
			continue
		}
		if vm.State == fleet.InstancePending && now.Sub(vm.LaunchedAt) >= 10*time.Second {
			vm.State = fleet.InstanceRunning
		}
		out = append(out, vm.Instance)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (c *simCloud) Terminate(ctx context.Context, ids []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		if c.onTerminate != nil {
			c.onTerminate(id)
		}
		c.terminateLocked(id)
	}
	return nil
}

func (c *simCloud) terminateLocked(id string) {
	if vm, ok := c.vms[id]; ok && vm.State != fleet.InstanceTerminated {
		vm.State, vm.goneAt = fleet.InstanceTerminated, c.clock.Now()
	}
}

// live counts pending and running VMs: what the ceiling's figure counts.
func (c *simCloud) live() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, vm := range c.vms {
		if vm.State == fleet.InstancePending || vm.State == fleet.InstanceRunning {
			n++
		}
	}
	return n
}

// ready returns the fleet VMs whose runner booted and has not offered yet.
func (c *simCloud) ready() []*simVM {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	var out []*simVM
	for _, vm := range c.vms {
		if vm.Class == simClass && !vm.offered && vm.offers && vm.State != fleet.InstanceTerminated && !now.Before(vm.bootAt) {
			out = append(out, vm)
		}
	}
	slices.SortFunc(out, func(a, b *simVM) int { return a.bootAt.Compare(b.bootAt) })
	return out
}

// simIntents keeps launch intents in memory.
type simIntents struct {
	mu sync.Mutex
	m  map[string]fleet.Launch
}

func (s *simIntents) PutLaunch(ctx context.Context, l fleet.Launch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l.Claims, l.Instances = slices.Clone(l.Claims), slices.Clone(l.Instances)
	s.m[l.ID] = l
	return nil
}

func (s *simIntents) DeleteLaunch(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
	return nil
}

func (s *simIntents) Launches(ctx context.Context) ([]fleet.Launch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]fleet.Launch, 0, len(s.m))
	for _, l := range s.m {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// simPool is fleet.Pool on the real pickup manager.
type simPool struct {
	mgr *pickup.Manager
	t   *memTable
}

func (p simPool) Runners(ctx context.Context) ([]fleet.Runner, error) {
	var out []fleet.Runner
	for _, st := range []pickup.State{pickup.StateIdle, pickup.StateClaimed, pickup.StateTerminating} {
		insts, err := p.t.List(ctx, simClass, st)
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

func (p simPool) Withdraw(ctx context.Context, ids []string) ([]string, error) {
	return p.mgr.Withdraw(ctx, ids, pickup.StateTerminating)
}

func (p simPool) Retire(ctx context.Context, r fleet.Runner) error {
	if r.State == fleet.RunnerIdle {
		_, err := p.mgr.Withdraw(ctx, []string{r.ID}, pickup.StateRetired)
		return err
	}
	_, err := p.t.Transition(ctx, pickup.Transition{ID: r.ID, From: pickup.State(r.State), To: pickup.StateRetired, ExpectOwner: r.Owner})
	if err != nil && !isCondition(err) {
		return err
	}
	return nil
}

func isCondition(err error) bool {
	return err != nil && (errorsIs(err, pickup.ErrConditionFailed))
}

// simCeiling is fleet.Ceiling on the real ledger in immediate mode: a
// claim is granted at once when the figure plus the claims leave room.
type simCeiling struct{ l *ledger.Ledger }

func (c simCeiling) Claim(ctx context.Context, worker string, n int) ([]string, error) {
	done, cancel := context.WithCancel(ctx)
	cancel() // never wait: grant what fits now
	var ids []string
	for range n {
		cl, err := c.l.Request(done, ledger.Request{WorkerID: worker, Count: 1})
		if err != nil {
			break
		}
		ids = append(ids, cl.ID().String())
	}
	return ids, nil
}

func (c simCeiling) claim(id string) (*ledger.Claim, bool) {
	cid, err := ledger.ParseClaimID(id)
	if err != nil {
		return nil, false
	}
	return c.l.Lookup(cid)
}

func (c simCeiling) Confirm(id string) {
	if cl, ok := c.claim(id); ok {
		_ = cl.Confirm()
	}
}

func (c simCeiling) Release(id string) {
	if cl, ok := c.claim(id); ok {
		cl.Cancel()
	}
}

// sim is one simulated stack with one fleet class.
type sim struct {
	ctx     context.Context
	clock   *simClock
	cloud   *simCloud
	q       *memQueue
	t       *memTable
	mgr     *pickup.Manager
	ledger  *ledger.Ledger
	intents *simIntents
	rec     *fleet.Reconciler
	cfg     fleet.Config
	spec    fleet.LaunchSpec
	max     int
	// jobVMs are VMs jobs launched themselves (known to rpd's callers,
	// never orphans).
	jobVMs map[string]bool
	// lastPoll is when the ceiling last got a figure.
	lastPoll time.Time
}

type simOptions struct {
	seed    uint64
	max     int
	cfg     fleet.Config
	spec    fleet.LaunchSpec
	start   time.Time
	boot    func(r *rand.Rand) (time.Duration, bool)
	offered func(time.Duration)
}

func newSim(o simOptions) (*sim, error) {
	ctx := context.Background()
	clock := &simClock{now: o.start}
	s := &sim{ctx: ctx, clock: clock, cloud: newSimCloud(clock, o.seed, o.boot), intents: &simIntents{m: map[string]fleet.Launch{}},
		cfg: o.cfg, spec: o.spec, max: o.max, jobVMs: map[string]bool{}}
	s.q, s.t = newMemQueue(clock.Now), newMemTable(clock.Now)
	var err error
	s.mgr, err = pickup.NewManager(pickup.Config{Class: simClass, CPU: 2, Mem: 4 << 30, InstanceTypes: []string{"c6i.large"},
		EmptyConfirmWait: pickup.ShortPollConfirm, Backoff: time.Millisecond}, s.q, s.t, pickup.Options{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	s.ledger, err = ledger.New(ledger.Config{Max: o.max, ClaimTTL: 10 * time.Minute, PollInterval: 5 * time.Second, StaleAfter: 30 * time.Second,
		Grant: ledger.GrantImmediate}, ledger.WithClock(clock))
	if err != nil {
		return nil, err
	}
	seq := 0
	s.rec = fleet.New(fleet.Options{
		Cloud: s.cloud, Intents: s.intents, Now: clock.Now,
		NewID: func() string { seq++; return fmt.Sprintf("L%05d", seq) },
		Lookup: func(ctx context.Context, ids []string) (map[string]fleet.Record, error) {
			out := map[string]fleet.Record{}
			for _, id := range ids {
				if s.jobVMs[id] {
					out[id] = fleet.Record{Runner: fleet.Runner{ID: id, State: fleet.RunnerClaimed}, Class: "jobs"}
				} else if in, err := s.t.Get(ctx, id); err == nil {
					out[id] = fleet.Record{Runner: runnerOf(in), Class: in.Class}
				}
			}
			return out, nil
		},
		OnOffered: func(_ string, d time.Duration) {
			if o.offered != nil {
				o.offered(d)
			}
		},
	})
	if err := s.configure(o.cfg); err != nil {
		return nil, err
	}
	s.poll()
	return s, nil
}

func (s *sim) configure(cfg fleet.Config) error {
	s.cfg = cfg
	return s.rec.Configure(map[string]fleet.Class{simClass: {Config: cfg, Launch: s.spec, Interval: 15 * time.Second,
		Pool: simPool{mgr: s.mgr, t: s.t}, Ceiling: simCeiling{s.ledger}}})
}

// poll feeds the ceiling the cloud's figure (pending + running), as a
// usage "ec2" source does.
func (s *sim) poll() {
	_ = s.ledger.ObserveUsage(s.cloud.live(), s.clock.Now())
	s.lastPoll = s.clock.Now()
}

// step advances the clock by d, feeds a figure when a poll is due, lets
// the booted runners offer themselves, and runs a pass.
func (s *sim) step(d time.Duration, force bool) error {
	s.clock.Advance(d)
	if s.clock.Now().Sub(s.lastPoll) >= 5*time.Second {
		s.poll()
	}
	if err := s.offerReady(); err != nil {
		return err
	}
	return s.rec.Pass(s.ctx, force)
}

// offerReady makes every booted fleet runner offer itself, as its boot
// script would.
func (s *sim) offerReady() error {
	for _, vm := range s.cloud.ready() {
		err := s.mgr.Offer(s.ctx, pickup.Instance{ID: vm.ID, Class: simClass, UsageClass: pickup.UsageOnDemand, InstanceType: "c6i.large",
			CPU: 2, MemMiB: 4096, ResourceClass: simClass, Threshold: s.clock.Now().Add(24 * time.Hour)})
		if err != nil {
			return err
		}
		s.cloud.mu.Lock()
		vm.offered = true
		s.cloud.mu.Unlock()
	}
	return nil
}

// pickup asks the pool for a runner for a job, without waiting.
func (s *sim) pickup(owner string) (pickup.Instance, bool, error) {
	in, err := s.mgr.Pickup(s.ctx, pickup.Requirements{UsageClass: pickup.UsageOnDemand}, owner)
	if err != nil {
		if errorsIs(err, pickup.ErrExhausted) {
			return pickup.Instance{}, false, nil
		}
		return pickup.Instance{}, false, err
	}
	return in, true, nil
}

// state counts the class's records by state.
func (s *sim) state() map[pickup.State]int {
	insts, _ := s.t.List(s.ctx, simClass, "")
	out := map[pickup.State]int{}
	for _, in := range insts {
		out[in.State]++
	}
	return out
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
