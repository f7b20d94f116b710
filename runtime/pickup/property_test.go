package pickup_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rpdhq/rpd/runtime/pickup"
)

// randomFaults fails Transition and Receive at random with a transient
// error, before or after the call takes effect.
type randomFaults struct {
	mu   sync.Mutex
	rng  *rand.Rand
	p    float64
	q    pickup.Queue
	t    pickup.InstanceTable
	hits int
}

func (f *randomFaults) roll() (fail, after bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rng.Float64() >= f.p {
		return false, false
	}
	f.hits++
	return true, f.rng.IntN(2) == 0
}

type faultyTable struct{ *randomFaults }

func (f faultyTable) Put(ctx context.Context, in pickup.Instance) error { return f.t.Put(ctx, in) }
func (f faultyTable) Get(ctx context.Context, id string) (pickup.Instance, error) {
	return f.t.Get(ctx, id)
}
func (f faultyTable) List(ctx context.Context, c string, s pickup.State) ([]pickup.Instance, error) {
	return f.t.List(ctx, c, s)
}
func (f faultyTable) ClaimedBy(ctx context.Context, c, owner string) ([]pickup.Instance, error) {
	return f.t.ClaimedBy(ctx, c, owner)
}
func (f faultyTable) Transition(ctx context.Context, tr pickup.Transition) (pickup.Instance, error) {
	fail, after := f.roll()
	if !fail {
		return f.t.Transition(ctx, tr)
	}
	if after {
		f.t.Transition(ctx, tr)
	}
	return pickup.Instance{}, errFlaky
}

type faultyQueue struct {
	pickup.Queue
	*randomFaults
}

func (f faultyQueue) Receive(ctx context.Context, max int, vis, wait time.Duration) ([]pickup.Message, error) {
	fail, after := f.roll()
	if !fail {
		return f.Queue.Receive(ctx, max, vis, wait)
	}
	if after { // received and hidden, but the reply is lost
		f.Queue.Receive(ctx, max, vis, wait)
	}
	return nil, errFlaky
}

var (
	usages = []string{pickup.UsageSpot, pickup.UsageOnDemand}
	types  = []string{"c6i.large", "c6i.xlarge", "m6i.large", "m7i.large"}
	globs  = []string{"c6i.*", "m?i.large", "m6i.*", "*.xlarge"}
)

// TestPropertyNoLossNoDoubleClaim: for random pools, concurrent requests
// with random requirements and random transient faults, in either mode,
// no instance is handed out twice, every hand-out fits its request and is
// recorded for its owner, and every other instance is still idle with a
// message in the queue.
func TestPropertyNoLossNoDoubleClaim(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		clock := newTestClock()
		mq, mt := newMemQueue(clock.Now), newMemTable(clock.Now)
		mode := rapid.SampledFrom([]pickup.Mode{pickup.ModeLease, pickup.ModeDelete}).Draw(rt, "mode")
		faults := &randomFaults{rng: rand.New(rand.NewPCG(rapid.Uint64().Draw(rt, "seed"), 1)), p: rapid.Float64Range(0, 0.3).Draw(rt, "faultRate"), q: mq, t: mt}
		cfg := pickup.Config{
			Class: "c", CPU: 2, Mem: 4 << 30, Mode: mode, EmptyConfirmWait: pickup.ShortPollConfirm,
			LocalExhaustion: rapid.IntRange(1, 6).Draw(rt, "localExhaustion"),
			ClaimAttempts:   rapid.IntRange(1, 5).Draw(rt, "attempts"),
			Backoff:         time.Millisecond,
		}
		m, err := pickup.NewManager(cfg, faultyQueue{mq, faults}, faultyTable{faults}, pickup.Options{Clock: clock, Logger: discardLogger()})
		if err != nil {
			rt.Fatal(err)
		}
		setup, _ := pickup.NewManager(cfg, mq, mt, pickup.Options{Clock: clock, Logger: discardLogger()})
		n := rapid.IntRange(0, 25).Draw(rt, "instances")
		var ids []string
		for i := range n {
			in := pickup.Instance{
				ID: fmt.Sprint("i-", i), UsageClass: rapid.SampledFrom(usages).Draw(rt, "usage"),
				InstanceType: rapid.SampledFrom(types).Draw(rt, "type"), CPU: 2, MemMiB: 4096,
				ResourceClass: rapid.SampledFrom([]string{"small", "medium"}).Draw(rt, "rc"), Threshold: clock.Now().Add(time.Hour),
			}
			if err := setup.Offer(ctx, in); err != nil {
				rt.Fatal(err)
			}
			ids = append(ids, in.ID)
		}
		for range rapid.IntRange(0, 3).Draw(rt, "junk") {
			mq.Send(ctx, `{"instanceId":"junk"}`, 0)
		}
		type request struct {
			req   pickup.Requirements
			owner string
			got   pickup.Instance
			err   error
		}
		reqs := make([]*request, rapid.IntRange(1, 12).Draw(rt, "requests"))
		for i := range reqs {
			r := pickup.Requirements{}
			if rapid.Bool().Draw(rt, "wantUsage") {
				r.UsageClass = rapid.SampledFrom(usages).Draw(rt, "reqUsage")
			}
			if rapid.Bool().Draw(rt, "wantTypes") {
				r.InstanceTypes = []string{rapid.SampledFrom(globs).Draw(rt, "glob")}
			}
			if rapid.Bool().Draw(rt, "wantRC") {
				r.ResourceClass = rapid.SampledFrom([]string{"small", "medium"}).Draw(rt, "reqRC")
			}
			reqs[i] = &request{req: r, owner: fmt.Sprint("r", i)}
		}
		var wg sync.WaitGroup
		for _, r := range reqs {
			wg.Go(func() { r.got, r.err = m.Pickup(ctx, r.req, r.owner) })
		}
		wg.Wait()

		holder := map[string]string{}
		uncertain := map[string]string{} // instance -> owner whose undo failed
		successes := 0
		for _, r := range reqs {
			var ue *pickup.UncertainClaimError
			if errors.As(r.err, &ue) {
				uncertain[ue.InstanceID] = ue.Owner
			}
			if r.err != nil {
				if !errors.Is(r.err, pickup.ErrExhausted) && !errors.Is(r.err, errFlaky) {
					rt.Fatalf("request %s: unexpected error %v", r.owner, r.err)
				}
				continue
			}
			successes++
			if prev, dup := holder[r.got.ID]; dup {
				rt.Fatalf("instance %s handed to %s and %s", r.got.ID, prev, r.owner)
			}
			holder[r.got.ID] = r.owner
			if !r.req.Matches(pickup.EntryFor(r.got)) {
				rt.Fatalf("request %s got %+v, which does not fit %+v", r.owner, r.got, r.req)
			}
		}
		clock.Advance(2 * time.Minute) // past every delay and visibility timeout
		queued := map[string]int{}
		for _, body := range mq.bodies() {
			if e, err := pickup.ParseEntry(body); err == nil {
				queued[e.InstanceID]++
			}
		}
		for _, id := range ids {
			rec, err := mt.Get(ctx, id)
			if err != nil {
				rt.Fatal(err)
			}
			switch {
			case holder[id] != "":
				if rec.State != pickup.StateClaimed || rec.Owner != holder[id] {
					rt.Fatalf("%s handed to %s but recorded %s/%q", id, holder[id], rec.State, rec.Owner)
				}
			case rec.State == pickup.StateClaimed && uncertain[id] == rec.Owner:
				// Reported to its owner as an UncertainClaimError.
			case rec.State != pickup.StateIdle:
				rt.Fatalf("%s handed to nobody but recorded %s/%q (a claim left behind)", id, rec.State, rec.Owner)
			case queued[id] == 0:
				rt.Fatalf("%s is idle with no message: lost (%s mode, %d faults)", id, mode, faults.hits)
			}
		}
		if s := m.Stats(ctx); s.Claimed != uint64(successes) || s.Passed < s.Claimed {
			rt.Fatalf("stats claimed %d passed %d; want claimed = %d successes <= passed", s.Claimed, s.Passed, successes)
		}
	})
}

// TestStressRace hammers one manager on the SQLite backend from many
// goroutines, each picking up and releasing, and checks that no instance
// is ever held by two requests at once. Run it with -race.
func TestStressRace(t *testing.T) {
	e, _ := openLocal(t, filepath.Join(t.TempDir(), "state.db"), time.Now)
	e.clock = wall{}
	cfg := e.config()
	cfg.RequeueDelay = time.Millisecond
	m, err := pickup.NewManager(cfg, e.q, e.t, pickup.Options{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		e.offer(t, m, e.inst(fmt.Sprint("i", i), usages[i%2], types[i%len(types)]))
	}
	ctx := ctxT(t)
	var mu sync.Mutex
	held := map[string]string{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			req := pickup.Requirements{UsageClass: usages[w%2]}
			for i := range 40 {
				owner := fmt.Sprintf("w%d-%d", w, i)
				in, err := m.Pickup(ctx, req, owner)
				if errors.Is(err, pickup.ErrExhausted) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if prev, ok := held[in.ID]; ok {
					t.Errorf("%s held by %s and %s at once", in.ID, prev, owner)
				}
				held[in.ID] = owner
				mu.Unlock()
				mu.Lock()
				delete(held, in.ID) // before Release publishes it again
				mu.Unlock()
				if _, err := m.Release(ctx, in.ID, owner, pickup.ReOffer); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	s := m.Stats(ctx)
	if s.Claimed == 0 || s.ClaimGaveUp != 0 {
		t.Fatalf("stats %+v: want claims and no give-ups", s)
	}
	t.Logf("%d decisions, %d claims, %d lost races, %d exhausted", s.Decisions(), s.Claimed, s.ClaimLostRace, s.ExhaustedGlobal+s.ExhaustedLocal)
}
