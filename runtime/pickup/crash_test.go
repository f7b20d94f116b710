package pickup_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rpdhq/rpd/runtime/pickup"
)

// How a crashPoint ends the manager at its k-th backend call.
type crashKind int

const (
	killBefore crashKind = iota // the process dies before call k reaches the backend
	killAfter                   // call k takes effect, then the process dies (the reply is lost)
	cancelAt                    // the requests' context is cancelled at call k; the process lives
)

func (k crashKind) String() string {
	return [...]string{"kill-before", "kill-after", "cancel"}[k]
}

var errKilled = errors.New("process killed")

// crashPoint counts backend calls across a queue and a table and ends the
// "process" at call k: after a kill no call reaches the backend any more,
// so whatever the manager still does is as if it never happened.
type crashPoint struct {
	mu     sync.Mutex
	k      int // 0 = never
	kind   crashKind
	calls  int
	dead   bool
	detach bool
	trace  []string
	cancel context.CancelFunc
}

func (c *crashPoint) do(ctx context.Context, op string, f func(context.Context) error) error {
	if c.detach {
		// The emulators' server side can wedge when a client aborts a
		// request mid-flight; let in-flight calls finish, as a server may
		// after its client died.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
	}
	c.mu.Lock()
	c.trace = append(c.trace, op)
	if c.dead {
		c.mu.Unlock()
		return errKilled
	}
	c.calls++
	hit := c.calls == c.k
	if hit && c.kind != cancelAt {
		c.dead = true
	}
	c.mu.Unlock()
	if !hit {
		return f(ctx)
	}
	switch c.kind {
	case killBefore:
		c.cancel()
		return errKilled
	case killAfter:
		f(ctx)
		c.cancel()
		return errKilled
	}
	c.cancel()
	return f(ctx)
}

type crashQueue struct {
	q pickup.Queue
	c *crashPoint
}

func (q crashQueue) Send(ctx context.Context, body string, delay time.Duration) error {
	return q.c.do(ctx, "Send", func(ctx context.Context) error { return q.q.Send(ctx, body, delay) })
}

func (q crashQueue) Receive(ctx context.Context, max int, vis, wait time.Duration) (msgs []pickup.Message, err error) {
	err = q.c.do(ctx, "Receive", func(ctx context.Context) error { msgs, err = q.q.Receive(ctx, max, vis, wait); return err })
	if err != nil {
		msgs = nil
	}
	return msgs, err
}

func (q crashQueue) Delete(ctx context.Context, h string) error {
	return q.c.do(ctx, "Delete", func(ctx context.Context) error { return q.q.Delete(ctx, h) })
}

func (q crashQueue) ChangeVisibility(ctx context.Context, h string, d time.Duration) error {
	return q.c.do(ctx, "ChangeVisibility", func(ctx context.Context) error { return q.q.ChangeVisibility(ctx, h, d) })
}

func (q crashQueue) DeleteBatch(ctx context.Context, hs []string) error {
	return q.c.do(ctx, "DeleteBatch", func(ctx context.Context) error { return q.q.DeleteBatch(ctx, hs) })
}

func (q crashQueue) ChangeVisibilityBatch(ctx context.Context, hs []string, d time.Duration) error {
	return q.c.do(ctx, "ChangeVisibilityBatch", func(ctx context.Context) error { return q.q.ChangeVisibilityBatch(ctx, hs, d) })
}

type crashTable struct {
	t pickup.InstanceTable
	c *crashPoint
}

func (t crashTable) Put(ctx context.Context, in pickup.Instance) error {
	return t.c.do(ctx, "Put", func(ctx context.Context) error { return t.t.Put(ctx, in) })
}

func (t crashTable) Get(ctx context.Context, id string) (in pickup.Instance, err error) {
	err = t.c.do(ctx, "Get", func(ctx context.Context) error { in, err = t.t.Get(ctx, id); return err })
	return in, err
}

func (t crashTable) Transition(ctx context.Context, tr pickup.Transition) (in pickup.Instance, err error) {
	err = t.c.do(ctx, "Transition", func(ctx context.Context) error { in, err = t.t.Transition(ctx, tr); return err })
	return in, err
}

func (t crashTable) List(ctx context.Context, class string, s pickup.State) (out []pickup.Instance, err error) {
	err = t.c.do(ctx, "List", func(ctx context.Context) error { out, err = t.t.List(ctx, class, s); return err })
	return out, err
}

func (t crashTable) ClaimedBy(ctx context.Context, class, owner string) (out []pickup.Instance, err error) {
	err = t.c.do(ctx, "ClaimedBy", func(ctx context.Context) error { out, err = t.t.ClaimedBy(ctx, class, owner); return err })
	return out, err
}

// tally is what became of the idle instances of a crash run.
type tally struct {
	reachable int // idle, with a message that is or will become visible
	delivered int // claimed by a request that got it back from Pickup
	ghost     int // claimed by a request that died or failed before learning it
	lost      int // idle, with no message left: nobody can ever pick it
}

// crashRun offers a mixed pool, runs pickups through a crashPoint set at
// call k, then counts what became of every idle instance. k = 0 runs
// without a crash and returns the number of backend calls.
func crashRun(t *testing.T, e *env, mode pickup.Mode, k int, kind crashKind) (tally, int) {
	ctx := ctxT(t)
	setup := e.manager(t, func(c *pickup.Config) { c.Mode = mode })
	insts := []pickup.Instance{
		e.inst("m1", pickup.UsageOnDemand, "c6i.large"),
		e.inst("m2", pickup.UsageOnDemand, "m6i.large"),
		e.inst("s1", pickup.UsageSpot, "c6i.large"),
		e.inst("s2", pickup.UsageSpot, "m6i.large"),
	}
	stale := e.inst("st", pickup.UsageOnDemand, "c6i.large")
	for i := range insts {
		insts[i].Threshold = e.clock.Now().Add(48 * time.Hour)
	}
	stale.Threshold = insts[0].Threshold
	e.offer(t, setup, insts[0], insts[2], stale, insts[1], insts[3])
	if _, err := e.t.Transition(ctx, pickup.Transition{ID: stale.ID, From: pickup.StateIdle, To: pickup.StateClaimed, Owner: "elsewhere"}); err != nil {
		t.Fatal(err)
	}
	if err := e.q.Send(ctx, `{"instanceId":"junk"}`, 0); err != nil {
		t.Fatal(err)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	cp := &crashPoint{k: k, kind: kind, cancel: cancel, detach: e.realTime}
	cfg := e.config()
	cfg.Mode = mode
	cfg.ClaimAttempts = 2
	if e.realTime {
		cfg.Visibility = e.visibility
	}
	m, err := pickup.NewManager(cfg, crashQueue{e.q, cp}, crashTable{e.t, cp}, pickup.Options{Clock: e.clock, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[string]string{} // instance -> owner that received it
	pick := func(req pickup.Requirements, owner string) {
		in, err := m.Pickup(runCtx, req, owner)
		if err == nil {
			mu.Lock()
			got[in.ID] = owner
			mu.Unlock()
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { pick(anyOnDemand, "r1") })
	wg.Go(func() { pick(anyOnDemand, "r2") })
	wg.Wait()
	e.clock.Advance(e.delay + 100*time.Millisecond) // the misfits come back
	pick(pickup.Requirements{UsageClass: pickup.UsageSpot}, "r3")
	pick(anyOnDemand, "r4")

	ids, _ := e.drain(t)
	var out tally
	for _, in := range insts {
		rec := e.get(t, in.ID)
		switch {
		case rec.State == pickup.StateIdle && ids[in.ID] > 0:
			out.reachable++
		case rec.State == pickup.StateIdle:
			out.lost++
		case rec.State == pickup.StateClaimed && got[in.ID] == rec.Owner:
			out.delivered++
		case rec.State == pickup.StateClaimed:
			out.ghost++
		default:
			t.Fatalf("instance %s ended %s", in.ID, rec.State)
		}
	}
	if out.lost > 0 {
		t.Logf("calls of the run that lost %d: %v", out.lost, cp.trace)
	}
	cp.mu.Lock() // a held misfit's timer may still call in
	defer cp.mu.Unlock()
	return out, cp.calls
}

// TestCrashLosesNothing ends the manager at every backend call of a mixed
// pickup run (before the call, after it, or by cancelling the requests)
// and counts the idle instances that are still reachable. Lease mode must
// lose none; delete mode's losses are reported.
func TestCrashLosesNothing(t *testing.T) {
	for _, k := range []backendKind{memKind, localKind, awsKind} {
		t.Run(k.name, func(t *testing.T) {
			fresh := k.open(t)
			for _, mode := range []pickup.Mode{pickup.ModeLease, pickup.ModeDelete} {
				t.Run(string(mode), func(t *testing.T) {
					crashMode(t, fresh, mode, k.name == "aws")
				})
			}
		})
	}
}

func crashMode(t *testing.T, fresh func(*testing.T) *env, mode pickup.Mode, realTime bool) {
	freshEnv := func(t *testing.T) *env {
		e := fresh(t)
		if realTime {
			e.visibility = time.Second
		}
		return e
	}
	clean, calls := crashRun(t, freshEnv(t), mode, 0, killBefore)
	if clean.lost+clean.ghost != 0 || clean.delivered != 3 {
		t.Fatalf("clean run: %+v; want 3 delivered, none lost", clean)
	}
	var mu sync.Mutex
	var lost, ghost, runs int
	kinds := []crashKind{killBefore, killAfter, cancelAt}
	// On the emulators each run waits out a visibility timeout on the wall
	// clock, and go test runs only GOMAXPROCS parallel tests: there, lease
	// mode gets both kill variants, delete mode kill-after only, and the
	// cancel variant (manager logic alone) is left to the other backends.
	slots := make(chan struct{}, 6)
	if realTime {
		kinds = kinds[:2]
		if mode == pickup.ModeDelete {
			kinds = []crashKind{killAfter}
		}
	}
	t.Run("points", func(t *testing.T) {
		for k := 1; k <= calls+1; k++ {
			for _, kind := range kinds {
				t.Run(fmt.Sprintf("%s-%d", kind, k), func(t *testing.T) {
					if realTime {
						t.Parallel()
						slots <- struct{}{}
						defer func() { <-slots }()
					}
					got, _ := crashRun(t, freshEnv(t), mode, k, kind)
					mu.Lock()
					runs++
					lost += got.lost
					ghost += got.ghost
					mu.Unlock()
					if got.lost > 0 && (mode == pickup.ModeLease || kind == cancelAt) {
						t.Errorf("%s at call %d: %d idle instances lost (%+v)", kind, k, got.lost, got)
					}
					if got.ghost > 0 && kind == cancelAt {
						t.Errorf("cancel at call %d left %d claims nobody received (%+v)", k, got.ghost, got)
					}
				})
			}
		}
	})
	t.Logf("%s mode: %d crash runs over %d call boundaries: %d idle instances lost, %d claimed by the crashed process (claim committed, reply lost)", mode, runs, calls+1, lost, ghost)
	if mode == pickup.ModeDelete && lost == 0 {
		t.Error("delete mode lost nothing: the crash points do not reach the window between delete and re-send")
	}
}
