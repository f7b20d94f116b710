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

// The behaviours beyond the seed: holding misfits, waiting, idempotent
// pickup, claim confirmation and the repair pass (docs/pickup.md).
var beyondBehaviours = []behaviour{
	{"HeldMisfitsServeTheOtherKind", testHeldServeOtherKind},
	{"HoldBoundedAndGivenBack", testHoldBounded},
	{"HeldDuplicateDeleted", testHeldDuplicate},
	{"WaitForARunner", testWait},
	{"RetryWithOwnerReturnsSameInstance", testResume},
	{"ConcurrentSameOwnerOneClaim", testResumeConcurrent},
	{"ConfirmAndLapse", testConfirmLapse},
	{"RepairReoffersIdleWithoutMessage", testRepair},
}

func TestBeyondSeed(t *testing.T) { runBehaviours(t, beyondBehaviours) }

var anySpot = pickup.Requirements{UsageClass: pickup.UsageSpot}

// testHeldServeOtherKind is the first report: drain the on-demand
// runners, then ask at once for spot runners. The seed hid the spot
// messages for the re-queue delay and answered "exhausted"; held, they are
// handed out without a receive.
func testHeldServeOtherKind(t *testing.T, e *env) {
	ctx := ctxT(t)
	m := e.manager(t, func(c *pickup.Config) { c.RequeueDelay = time.Minute })
	for i := range 6 {
		e.offer(t, m, e.inst(fmt.Sprint("od", i), pickup.UsageOnDemand, "c6i.large"))
	}
	for i := range 4 {
		e.offer(t, m, e.inst(fmt.Sprint("sp", i), pickup.UsageSpot, "m6i.large"))
	}
	served := 0
	for i := range 10 {
		_, err := m.Pickup(ctx, anyOnDemand, fmt.Sprint("od-run-", i))
		if errors.Is(err, pickup.ErrExhausted) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		served++
	}
	if served != 6 {
		t.Fatalf("served %d on-demand runners; want 6", served)
	}
	if h := m.Held(); h != 4 {
		t.Fatalf("held %d misfits; want the 4 spot runners", h)
	}
	got := map[string]bool{}
	for i := range 4 {
		inst, err := m.Pickup(ctx, pickup.Requirements{UsageClass: pickup.UsageSpot, InstanceTypes: []string{"m6i.large"}}, fmt.Sprint("sp-run-", i))
		if err != nil {
			t.Fatalf("spot pickup %d right after the on-demand drain: %v; want one of the 4 idle spot runners", i, err)
		}
		got[inst.ID] = true
	}
	if len(got) != 4 || m.Held() != 0 {
		t.Fatalf("got %d distinct spot runners, %d still held; want 4, 0", len(got), m.Held())
	}
	_, err := m.Pickup(ctx, anySpot, "sp-run-5")
	wantExhausted(t, err, pickup.Global)
	if s := m.Stats(ctx); s.ExhaustedGlobal != 2 || s.Claimed != 10 {
		t.Fatalf("stats %+v; want 2 global exhaustions (one per kind, both true), 10 claimed", s)
	}
}

// testHoldBounded: beyond HoldMisfits the oldest misfit goes back visible at
// once (no re-queue delay), and GiveBack returns the rest.
func testHoldBounded(t *testing.T, e *env) {
	ctx := ctxT(t)
	m := e.manager(t, func(c *pickup.Config) { c.HoldMisfits = 2; c.RequeueDelay = time.Minute })
	for i := range 4 {
		e.offer(t, m, e.inst(fmt.Sprint("s", i), pickup.UsageSpot, "c6i.large"))
	}
	_, err := m.Pickup(ctx, anyOnDemand, "od")
	if !errors.Is(err, pickup.ErrExhausted) {
		t.Fatalf("got %v; want exhausted", err)
	}
	if h := m.Held(); h != 2 {
		t.Fatalf("held %d; want the bound, 2", h)
	}
	// The two given back are visible at once to another consumer of the
	// queue; the two held are not.
	other := e.manager(t, func(c *pickup.Config) { c.HoldMisfits = pickup.NoHold })
	for i := range 2 {
		if _, err := other.Pickup(ctx, anySpot, fmt.Sprint("other-", i)); err != nil {
			t.Fatalf("another consumer, pickup %d: %v; want a runner given back at once", i, err)
		}
	}
	if _, err := other.Pickup(ctx, anySpot, "other-3"); !errors.Is(err, pickup.ErrExhausted) {
		t.Fatalf("another consumer, third pickup: %v; want exhausted while 2 are held", err)
	}
	m.GiveBack(ctx)
	if h := m.Held(); h != 0 {
		t.Fatalf("held %d after GiveBack; want 0", h)
	}
	for i := range 2 {
		if _, err := other.Pickup(ctx, anySpot, fmt.Sprint("other-late-", i)); err != nil {
			t.Fatalf("after GiveBack, pickup %d: %v", i, err)
		}
	}
	if s := m.Stats(ctx); s.Returned < 4 {
		t.Fatalf("returned %d; want at least 4 (2 over the bound, 2 by GiveBack)", s.Returned)
	}
}

// testHeldDuplicate: a second message of a held instance is deleted.
func testHeldDuplicate(t *testing.T, e *env) {
	ctx := ctxT(t)
	m := e.manager(t, nil)
	s := e.inst("s", pickup.UsageSpot, "c6i.large")
	e.offer(t, m, s, s) // Offer twice: two messages
	if _, err := m.Pickup(ctx, anyOnDemand, "od"); !errors.Is(err, pickup.ErrExhausted) {
		t.Fatalf("got %v; want exhausted", err)
	}
	if h, d := m.Held(), m.Stats(ctx).Duplicates; h != 1 || d != 1 {
		t.Fatalf("held %d, duplicates %d; want 1, 1", h, d)
	}
	m.GiveBack(ctx)
	if ids, bad := e.drain(t); ids[s.ID] != 1 || len(ids) != 1 || bad != 0 {
		t.Fatalf("queue holds %v +%d; want %s once", ids, bad, s.ID)
	}
}

// arrivingQueue offers an instance on the n-th receive: a runner that
// becomes idle while a request waits.
type arrivingQueue struct {
	pickup.Queue
	mu      sync.Mutex
	n       int
	arrive  func()
	arrived bool
}

func (q *arrivingQueue) Receive(ctx context.Context, max int, vis, wait time.Duration) ([]pickup.Message, error) {
	q.mu.Lock()
	q.n--
	fire := q.n == 0 && !q.arrived
	q.arrived = q.arrived || fire
	q.mu.Unlock()
	if fire {
		q.arrive()
	}
	return q.Queue.Receive(ctx, max, vis, wait)
}

func testWait(t *testing.T, e *env) {
	ctx := ctxT(t)
	setup := e.manager(t, nil)
	late := e.inst("late", pickup.UsageOnDemand, "c6i.large")
	aq := &arrivingQueue{Queue: e.q, n: 5, arrive: func() { e.offer(t, setup, late) }}
	m, err := pickup.NewManager(e.config(), aq, e.t, pickup.Options{Clock: e.clock, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Pickup(ctx, anyOnDemand, "impatient"); !errors.Is(err, pickup.ErrExhausted) {
		t.Fatalf("without wait: %v; want exhausted at once", err)
	}
	req := anyOnDemand
	req.Wait = 5 * time.Second
	got, err := m.Pickup(ctx, req, "patient")
	if err != nil || got.ID != late.ID {
		t.Fatalf("with wait: got %s, %v; want %s, which arrived while it waited", got.ID, err, late.ID)
	}
	if s := m.Stats(ctx); s.ExhaustedGlobal != 1 {
		t.Fatalf("global exhaustions %d; want 1 (a request that waited and was served is not one)", s.ExhaustedGlobal)
	}
	req.Wait = 500 * time.Millisecond
	start := e.clock.Now()
	if _, err := m.Pickup(ctx, req, "patient-2"); !errors.Is(err, pickup.ErrExhausted) {
		t.Fatalf("with wait, nothing arrives: %v; want exhausted", err)
	}
	if waited := e.clock.Now().Sub(start); waited < req.Wait {
		t.Fatalf("answered exhausted after %v; want after the %v wait", waited, req.Wait)
	}
	for _, bad := range []time.Duration{-time.Second, 21 * time.Second} {
		if _, err := m.Pickup(ctx, pickup.Requirements{Wait: bad}, "x"); err == nil || errors.Is(err, pickup.ErrExhausted) {
			t.Fatalf("wait %v: %v; want a validation error", bad, err)
		}
	}
}

func testResume(t *testing.T, e *env) {
	ctx := ctxT(t)
	m := e.manager(t, nil)
	a, b := e.inst("a", pickup.UsageOnDemand, "c6i.large"), e.inst("b", pickup.UsageOnDemand, "c6i.large")
	e.offer(t, m, a, b)
	first, err := m.Pickup(ctx, anyOnDemand, "job-1")
	if err != nil {
		t.Fatal(err)
	}
	// The answer was lost; the worker retries with its owner, from a new
	// manager (a restarted daemon).
	fresh := e.manager(t, nil)
	again, err := fresh.Pickup(ctx, anyOnDemand, "job-1")
	if err != nil || again.ID != first.ID || again.Owner != "job-1" {
		t.Fatalf("retry: got %s/%q, %v; want %s again", again.ID, again.Owner, err, first.ID)
	}
	if s := fresh.Stats(ctx); s.Resumed != 1 || s.Claimed != 0 || s.Decisions() != 0 {
		t.Fatalf("retry stats %+v; want 1 resumed, no claim, no decision", s)
	}
	// A request the held claim does not meet claims another instance.
	other, err := fresh.Pickup(ctx, pickup.Requirements{UsageClass: pickup.UsageSpot}, "job-1")
	if !errors.Is(err, pickup.ErrExhausted) {
		t.Fatalf("a spot request of job-1: got %s, %v; want exhausted (job-1's claim is on-demand, the other runner too)", other.ID, err)
	}
	second, err := fresh.Pickup(ctx, anyOnDemand, "job-2")
	if err != nil || second.ID == first.ID {
		t.Fatalf("another owner: got %s, %v; want the other instance", second.ID, err)
	}
	// Once released, the owner's retry claims afresh.
	if _, err := fresh.Release(ctx, first.ID, "job-1", pickup.ReOffer); err != nil {
		t.Fatal(err)
	}
	if got, err := fresh.Pickup(ctx, anyOnDemand, "job-1"); err != nil || got.ID != first.ID {
		t.Fatalf("after release: %s, %v; want %s claimed again", got.ID, err, first.ID)
	}
	if s := fresh.Stats(ctx); s.Claimed != 2 || s.Resumed != 1 {
		t.Fatalf("stats %+v; want 2 claimed, 1 resumed", s)
	}
}

func testResumeConcurrent(t *testing.T, e *env) {
	ctx := ctxT(t)
	m := e.manager(t, nil)
	for i := range 4 {
		e.offer(t, m, e.inst(fmt.Sprint("a", i), pickup.UsageOnDemand, "c6i.large"))
	}
	var wg sync.WaitGroup
	got := make([]pickup.Instance, 4)
	errs := make([]error, 4)
	for i := range 4 {
		wg.Go(func() { got[i], errs[i] = m.Pickup(ctx, anyOnDemand, "same-job") })
	}
	wg.Wait()
	for i := range 4 {
		if errs[i] != nil || got[i].ID != got[0].ID {
			t.Fatalf("call %d: %s, %v; want %s like call 0", i, got[i].ID, errs[i], got[0].ID)
		}
	}
	if s := m.Stats(ctx); s.Claimed != 1 || s.Resumed != 3 {
		t.Fatalf("claimed %d resumed %d; want 1, 3", s.Claimed, s.Resumed)
	}
}

func testConfirmLapse(t *testing.T, e *env) {
	ctx := ctxT(t)
	ttl := 2 * time.Minute
	if e.realTime {
		ttl = 2 * time.Second
	}
	m := e.manager(t, func(c *pickup.Config) { c.ClaimTTL = ttl })
	a, b := e.inst("a", pickup.UsageOnDemand, "c6i.large"), e.inst("b", pickup.UsageOnDemand, "c6i.large")
	e.offer(t, m, a, b)
	kept, err := m.Pickup(ctx, anyOnDemand, "keeper")
	if err != nil {
		t.Fatal(err)
	}
	if kept.ClaimExpires.IsZero() || kept.ClaimExpires.Sub(e.clock.Now()) > ttl {
		t.Fatalf("claim deadline %v; want within %v from now", kept.ClaimExpires, ttl)
	}
	lost, err := m.Pickup(ctx, anyOnDemand, "vanished")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Confirm(ctx, kept.ID, "intruder"); !errors.Is(err, pickup.ErrConditionFailed) {
		t.Fatalf("confirm by another owner: %v; want ErrConditionFailed", err)
	}
	for range 2 { // confirming twice is fine
		rec, err := m.Confirm(ctx, kept.ID, "keeper")
		if err != nil || !rec.ClaimExpires.IsZero() || rec.State != pickup.StateClaimed {
			t.Fatalf("confirm: %+v, %v; want claimed without a deadline", rec, err)
		}
	}
	if rep, err := m.Maintain(ctx); err != nil || rep.Lapsed != 0 {
		t.Fatalf("before the deadline: %+v, %v; want nothing lapsed", rep, err)
	}
	e.clock.Advance(ttl + 100*time.Millisecond)
	rep, err := m.Maintain(ctx)
	if err != nil || rep.Lapsed != 1 {
		t.Fatalf("after the deadline: %+v, %v; want 1 lapsed", rep, err)
	}
	if rec := e.get(t, lost.ID); rec.State != pickup.StateIdle || rec.Owner != "" || !rec.ClaimExpires.IsZero() {
		t.Fatalf("lapsed claim: %+v; want idle, no owner, no deadline", rec)
	}
	if rec := e.get(t, kept.ID); rec.State != pickup.StateClaimed || rec.Owner != "keeper" {
		t.Fatalf("confirmed claim: %+v; want still claimed by keeper", rec)
	}
	if _, err := m.Confirm(ctx, lost.ID, "vanished"); !errors.Is(err, pickup.ErrConditionFailed) {
		t.Fatalf("confirm after the lapse: %v; want ErrConditionFailed", err)
	}
	got, err := m.Pickup(ctx, anyOnDemand, "next")
	if err != nil || got.ID != lost.ID {
		t.Fatalf("after the lapse: %s, %v; want %s offered again", got.ID, err, lost.ID)
	}
	if s := m.Stats(ctx); s.Confirmed != 2 || s.Lapsed != 1 {
		t.Fatalf("confirmed %d lapsed %d; want 2, 1", s.Confirmed, s.Lapsed)
	}
	if _, err := m.Confirm(ctx, kept.ID, ""); err == nil {
		t.Fatal("confirm with an empty owner succeeded")
	}
}

func testRepair(t *testing.T, e *env) {
	if e.realTime {
		t.Skip("the repair's 10s grace is waited out on the fake clocks only")
	}
	ctx := ctxT(t)
	m := e.manager(t, nil)
	with := e.inst("with", pickup.UsageOnDemand, "c6i.large")
	e.offer(t, m, with)
	// A crash between Offer's table write and its publish: an idle
	// record, no message.
	orphan := e.inst("orphan", pickup.UsageSpot, "c6i.large")
	orphan.State, orphan.UpdatedAt = pickup.StateIdle, e.clock.Now()
	if err := e.t.Put(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Pickup(ctx, anySpot, "early"); !errors.Is(err, pickup.ErrExhausted) {
		t.Fatalf("before the repair: %v; want exhausted (the orphan has no message)", err)
	}
	if rep, err := m.Maintain(ctx); err != nil || rep.Reoffered != 0 || !rep.Complete {
		t.Fatalf("within the grace: %+v, %v; want a complete scan and nothing re-offered", rep, err)
	}
	e.clock.Advance(time.Minute)
	rep, err := m.Maintain(ctx)
	if err != nil || rep.Reoffered != 1 || !rep.Complete {
		t.Fatalf("after the grace: %+v, %v; want the orphan re-offered, nothing else", rep, err)
	}
	got, err := m.Pickup(ctx, anySpot, "late")
	if err != nil || got.ID != orphan.ID {
		t.Fatalf("after the repair: %s, %v; want %s", got.ID, err, orphan.ID)
	}
	if rep, err := m.Maintain(ctx); err != nil || rep.Reoffered != 0 {
		t.Fatalf("a second pass: %+v, %v; want nothing re-offered", rep, err)
	}
	if s := m.Stats(ctx); s.Reoffered != 1 {
		t.Fatalf("reoffered %d; want 1", s.Reoffered)
	}
	if got, err := m.Pickup(ctx, anyOnDemand, "od"); err != nil || got.ID != with.ID {
		t.Fatalf("the held runner: %s, %v; want %s", got.ID, err, with.ID)
	}
}
