package pickup_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rpdhq/rpd/runtime/pickup"
)

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func wantExhausted(t *testing.T, err error, kind pickup.Exhaustion) *pickup.ExhaustedError {
	t.Helper()
	var ex *pickup.ExhaustedError
	if !errors.Is(err, pickup.ErrExhausted) || !errors.As(err, &ex) {
		t.Fatalf("got err %v; want ErrExhausted (%s)", err, kind)
	}
	if ex.Kind != kind {
		t.Fatalf("got %s exhaustion (%v); want %s", ex.Kind, err, kind)
	}
	return ex
}

var anyOnDemand = pickup.Requirements{UsageClass: pickup.UsageOnDemand}

func TestBehaviours(t *testing.T) {
	runBehaviours(t, []behaviour{
		{"PassOnClaimsAndDeletes", testPassOn},
		{"RequeueMisfitWithDelay", testRequeue},
		{"DiscardMalformed", testDiscard},
		{"DiscardExpiredAndClassMismatch", testDiscardClass},
		{"LocalExhaustion", testLocalExhaustion},
		{"FrequencyMapBounded", testFrequencyBound},
		{"ConcurrentRequestsDifferentRequirements", testConcurrent},
		{"StaleHintDropped", testStale},
		{"TransientClaimErrorRetriedKeepsMessage", testTransient},
		{"ClaimGivesUpAndGivesBack", testGiveUp},
		{"CancelGivesBack", testCancel},
		{"OfferAndRelease", testOfferRelease},
		{"DeleteMode", testDeleteMode},
		{"Reconfigure", testReconfigure},
		{"StatsDepth", testStatsDepth},
	})
}

func testPassOn(t *testing.T, e *env) {
	ctx := ctxT(t)
	m := e.manager(t, nil)
	want := e.inst("a", pickup.UsageOnDemand, "c6i.large")
	e.offer(t, m, want)

	got, err := m.Pickup(ctx, pickup.Requirements{UsageClass: pickup.UsageOnDemand, InstanceTypes: []string{"c6i.*"}, MinCPU: 2, MinMemMiB: 4096, ResourceClass: "medium"}, "run-1")
	if err != nil {
		t.Fatalf("Pickup: %v", err)
	}
	if got.ID != want.ID || got.State != pickup.StateClaimed || got.Owner != "run-1" {
		t.Fatalf("got %s state %s owner %q; want %s claimed by run-1", got.ID, got.State, got.Owner, want.ID)
	}
	if rec := e.get(t, want.ID); rec.State != pickup.StateClaimed || rec.Owner != "run-1" {
		t.Fatalf("table: got %s/%q; want claimed/run-1", rec.State, rec.Owner)
	}
	// The message is gone: the next request finds the pool empty.
	_, err = m.Pickup(ctx, anyOnDemand, "run-2")
	wantExhausted(t, err, pickup.Global)
	s := m.Stats(ctx)
	if s.Passed != 1 || s.Claimed != 1 || s.ExhaustedGlobal != 1 || s.Latency.Count != 1 {
		t.Fatalf("stats %+v; want 1 passed, 1 claimed, 1 global exhaustion, 1 latency sample", s)
	}
	if ids, bad := e.drain(t); len(ids) != 0 || bad != 0 {
		t.Fatalf("queue still holds %v (+%d bad); want empty", ids, bad)
	}
}

// testRequeue is the seed's re-queue, with holding switched off.
func testRequeue(t *testing.T, e *env) {
	ctx := ctxT(t)
	m := e.manager(t, func(c *pickup.Config) { c.HoldMisfits = pickup.NoHold })
	spot := e.inst("s", pickup.UsageSpot, "m6i.large")
	e.offer(t, m, spot)

	_, err := m.Pickup(ctx, anyOnDemand, "od")
	wantExhausted(t, err, pickup.Global)
	if s := m.Stats(ctx); s.Requeued != 1 {
		t.Fatalf("requeued %d; want 1", s.Requeued)
	}
	// Within the delay it is invisible; after it, a spot request gets it.
	if _, err := m.Pickup(ctx, pickup.Requirements{UsageClass: pickup.UsageSpot}, "sp"); !errors.Is(err, pickup.ErrExhausted) {
		t.Fatalf("during the re-queue delay: got %v; want exhausted", err)
	}
	e.clock.Advance(e.delay + 100*time.Millisecond)
	got, err := m.Pickup(ctx, pickup.Requirements{UsageClass: pickup.UsageSpot, InstanceTypes: []string{"m?i.large"}}, "sp")
	if err != nil || got.ID != spot.ID {
		t.Fatalf("after the delay: got %s, %v; want %s", got.ID, err, spot.ID)
	}
	if rec := e.get(t, spot.ID); rec.Owner != "sp" {
		t.Fatalf("owner %q; want sp", rec.Owner)
	}
}

func testDiscard(t *testing.T, e *env) {
	ctx := ctxT(t)
	m := e.manager(t, nil)
	th := e.clock.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	good := `"instanceId":"i-1","usageClass":"on-demand","instanceType":"c6i.large","cpu":2,"mem":4096,"resourceClass":"medium","threshold":"` + th + `"`
	bodies := map[string]pickup.DiscardReason{
		`not json`:                              pickup.ReasonMalformed,
		`{` + good + `,"extra":1}`:              pickup.ReasonMalformed,
		`{` + good[len(`"instanceId":"i-1",`):]: pickup.ReasonMalformed, // missing instanceId
		`{"instanceId":"i-2","usageClass":"preemptible","instanceType":"c6i.large","cpu":2,"mem":4096,"resourceClass":"medium","threshold":"` + th + `"}`: pickup.ReasonUnknownUsageClass,
		`{"instanceId":"i-3","usageClass":"spot","instanceType":"c6i.large","cpu":"2","mem":4096,"resourceClass":"medium","threshold":"` + th + `"}`:      pickup.ReasonMalformed,
		`{"instanceId":"i-4","usageClass":"spot","instanceType":"c6i.large","cpu":2,"mem":4096,"resourceClass":"medium","threshold":"tomorrow"}`:          pickup.ReasonMalformed,
		`{` + good + `}` + strings.Repeat(" ", pickup.MaxBodySize):                                                                                        pickup.ReasonTooLarge,
	}
	want := map[pickup.DiscardReason]uint64{}
	for body, r := range bodies {
		if err := e.q.Send(ctx, body, 0); err != nil {
			t.Fatalf("send: %v", err)
		}
		want[r]++
	}
	for i := range 3 {
		_, err := m.Pickup(ctx, pickup.Requirements{}, fmt.Sprint("r", i))
		wantExhausted(t, err, pickup.Global)
	}
	s := m.Stats(ctx)
	for r, n := range want {
		if s.Discarded[r] != n {
			t.Errorf("discarded %s: %d; want %d (all: %v)", r, s.Discarded[r], n, s.Discarded)
		}
	}
	if s.Passed+s.Requeued != 0 {
		t.Errorf("passed %d requeued %d; want 0", s.Passed, s.Requeued)
	}
	if ids, bad := e.drain(t); len(ids)+bad != 0 {
		t.Fatalf("discarded messages came back: %v +%d", ids, bad)
	}
}

func testDiscardClass(t *testing.T, e *env) {
	ctx := ctxT(t)
	m := e.manager(t, nil)
	expiring := e.inst("x", pickup.UsageOnDemand, "c6i.large")
	expiring.Threshold = e.clock.Now().Add(e.delay)
	e.offer(t, m, expiring)
	wrong := e.inst("w", pickup.UsageOnDemand, "c6i.large")
	wrong.CPU = 4 // the class declares 2
	if err := e.q.Send(ctx, pickup.EntryFor(wrong).Body(), 0); err != nil {
		t.Fatal(err)
	}
	foreign := e.inst("f", pickup.UsageOnDemand, "r5.large") // not among the class's types
	if err := e.q.Send(ctx, pickup.EntryFor(foreign).Body(), 0); err != nil {
		t.Fatal(err)
	}
	if err := m.Offer(ctx, wrong); err == nil {
		t.Fatal("Offer of an instance contradicting its class succeeded; want an error")
	}
	e.clock.Advance(e.delay + 100*time.Millisecond)
	_, err := m.Pickup(ctx, pickup.Requirements{}, "r")
	wantExhausted(t, err, pickup.Global)
	s := m.Stats(ctx)
	if s.Discarded[pickup.ReasonExpired] != 1 || s.Discarded[pickup.ReasonClassMismatch] != 2 {
		t.Fatalf("discarded %v; want 1 expired, 2 class_mismatch", s.Discarded)
	}
}

func testLocalExhaustion(t *testing.T, e *env) {
	ctx := ctxT(t)
	// A misfit that keeps coming back: the queue ticks the clock past the
	// re-queue delay before each receive.
	ticking := &tickQueue{Queue: e.q, clock: e.clock, tick: e.delay + 50*time.Millisecond}
	if e.realTime {
		ticking.tick = 0
	}
	m, err := pickup.NewManager(func() pickup.Config {
		c := e.config()
		c.LocalExhaustion = 2
		c.HoldMisfits = pickup.NoHold // a held misfit is not seen again
		if e.realTime {
			c.ReceiveWait = 3 * time.Second // long poll through the 1s delay
		}
		return c
	}(), ticking, e.t, pickup.Options{Clock: e.clock, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	spot := e.inst("s", pickup.UsageSpot, "c6i.large")
	e.offer(t, m, spot)
	_, err = m.Pickup(ctx, anyOnDemand, "od")
	ex := wantExhausted(t, err, pickup.Local)
	if ex.InstanceID != spot.ID || ex.Seen != 3 {
		t.Fatalf("got %+v; want %s seen 3 times (more than 2)", ex, spot.ID)
	}
	s := m.Stats(ctx)
	if s.Requeued != 3 || s.ExhaustedLocal != 1 {
		t.Fatalf("requeued %d, local %d; want 3 (the tripping one included), 1", s.Requeued, s.ExhaustedLocal)
	}
	// The tripping message was still re-queued: another request gets it.
	got, err := m.Pickup(ctx, pickup.Requirements{UsageClass: pickup.UsageSpot}, "sp")
	if err != nil || got.ID != spot.ID {
		t.Fatalf("got %s, %v; want %s", got.ID, err, spot.ID)
	}
}

// tickQueue advances a clock before each receive.
type tickQueue struct {
	pickup.Queue
	clock envClock
	tick  time.Duration
}

func (q *tickQueue) Receive(ctx context.Context, max int, vis, wait time.Duration) ([]pickup.Message, error) {
	if q.tick > 0 {
		q.clock.Advance(q.tick)
	}
	return q.Queue.Receive(ctx, max, vis, wait)
}

func testFrequencyBound(t *testing.T, e *env) {
	ctx := ctxT(t)
	m := e.manager(t, func(c *pickup.Config) { c.MaxTracked = 3 })
	for i := range 5 {
		e.offer(t, m, e.inst(fmt.Sprint("s", i), pickup.UsageSpot, "c6i.large"))
	}
	_, err := m.Pickup(ctx, anyOnDemand, "od")
	ex := wantExhausted(t, err, pickup.Local)
	if ex.InstanceID != "" || ex.Seen != 3 {
		t.Fatalf("got %+v; want a full map of 3", ex)
	}
	if s := m.Stats(ctx); s.Requeued != 4 {
		t.Fatalf("requeued %d; want 4 (3 tracked + the one that found the map full)", s.Requeued)
	}
}

func testConcurrent(t *testing.T, e *env) {
	ctx := ctxT(t)
	m := e.manager(t, nil)
	const n = 6
	for i := range n {
		e.offer(t, m, e.inst(fmt.Sprint("s", i), pickup.UsageSpot, "c6i.large"),
			e.inst(fmt.Sprint("o", i), pickup.UsageOnDemand, "m6i.xlarge"))
	}
	reqs := []pickup.Requirements{
		{UsageClass: pickup.UsageSpot, InstanceTypes: []string{"c6i.*"}},
		{UsageClass: pickup.UsageOnDemand, InstanceTypes: []string{"m6i.*"}},
	}
	var wg sync.WaitGroup
	got := make([]pickup.Instance, 2*n)
	errs := make([]error, 2*n)
	for i := range 2 * n {
		wg.Go(func() {
			got[i], errs[i] = m.Pickup(ctx, reqs[i%2], fmt.Sprint("run-", i))
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range 2 * n {
		if errs[i] != nil {
			// A request may meet the other kind's misfits, delayed, and
			// find the queue empty; the delay then brings them back.
			if !errors.Is(errs[i], pickup.ErrExhausted) {
				t.Fatalf("request %d: %v", i, errs[i])
			}
			e.clock.Advance(e.delay + 100*time.Millisecond)
			got[i], errs[i] = m.Pickup(ctx, reqs[i%2], fmt.Sprint("run-", i))
			if errs[i] != nil {
				t.Fatalf("request %d again: %v", i, errs[i])
			}
		}
		if seen[got[i].ID] {
			t.Fatalf("instance %s handed out twice", got[i].ID)
		}
		seen[got[i].ID] = true
		if !reqs[i%2].Matches(pickup.EntryFor(got[i])) {
			t.Fatalf("request %d got %s (%s %s), which does not match", i, got[i].ID, got[i].UsageClass, got[i].InstanceType)
		}
	}
}

func testStale(t *testing.T, e *env) {
	ctx := ctxT(t)
	m := e.manager(t, nil)
	a, b := e.inst("a", pickup.UsageOnDemand, "c6i.large"), e.inst("b", pickup.UsageOnDemand, "c6i.large")
	e.offer(t, m, a, b)
	// Someone else claims a behind the queue's back: its message is a
	// stale hint.
	if _, err := e.t.Transition(ctx, pickup.Transition{ID: a.ID, From: pickup.StateIdle, To: pickup.StateClaimed, Owner: "other"}); err != nil {
		t.Fatal(err)
	}
	got, err := m.Pickup(ctx, anyOnDemand, "me")
	if err != nil || got.ID != b.ID {
		t.Fatalf("got %s, %v; want %s after dropping the stale hint", got.ID, err, b.ID)
	}
	if s := m.Stats(ctx); s.ClaimLostRace != 1 || s.Claimed != 1 {
		t.Fatalf("lost %d claimed %d; want 1, 1", s.ClaimLostRace, s.Claimed)
	}
	if ids, _ := e.drain(t); len(ids) != 0 {
		t.Fatalf("stale message kept: %v", ids)
	}
	if rec := e.get(t, a.ID); rec.Owner != "other" {
		t.Fatalf("a's owner %q; want other", rec.Owner)
	}
}

// flakyTable fails Transition with a transient error while fail > 0,
// optionally after applying it (the reply lost).
type flakyTable struct {
	pickup.InstanceTable
	mu          sync.Mutex
	fail        int
	afterCommit bool
	block       chan struct{} // when set, Transition waits for ctx
}

var errFlaky = errors.New("injected transient error")

func (f *flakyTable) Transition(ctx context.Context, tr pickup.Transition) (pickup.Instance, error) {
	if f.block != nil && tr.To == pickup.StateClaimed {
		close(f.block)
		f.block = nil
		<-ctx.Done()
		return pickup.Instance{}, ctx.Err()
	}
	f.mu.Lock()
	fail := f.fail > 0 && tr.To == pickup.StateClaimed
	if fail {
		f.fail--
	}
	f.mu.Unlock()
	if !fail {
		return f.InstanceTable.Transition(ctx, tr)
	}
	if f.afterCommit {
		f.InstanceTable.Transition(ctx, tr)
	}
	return pickup.Instance{}, errFlaky
}

func testTransient(t *testing.T, e *env) {
	ctx := ctxT(t)
	for _, afterCommit := range []bool{false, true} {
		ft := &flakyTable{InstanceTable: e.t, fail: 2, afterCommit: afterCommit}
		m, err := pickup.NewManager(e.config(), e.q, ft, pickup.Options{Clock: e.clock, Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		a := e.inst(fmt.Sprint("a", afterCommit), pickup.UsageOnDemand, "c6i.large")
		e.offer(t, m, a)
		me := fmt.Sprint("me-", afterCommit)
		got, err := m.Pickup(ctx, anyOnDemand, me)
		if err != nil || got.ID != a.ID || got.Owner != me {
			t.Fatalf("afterCommit=%v: got %s/%q, %v; want %s claimed by %s", afterCommit, got.ID, got.Owner, err, a.ID, me)
		}
		if s := m.Stats(ctx); s.ClaimRetried != 2 || s.ClaimLostRace != 0 {
			t.Fatalf("afterCommit=%v: retried %d lost %d; want 2, 0", afterCommit, s.ClaimRetried, s.ClaimLostRace)
		}
	}
}

func testGiveUp(t *testing.T, e *env) {
	ctx := ctxT(t)
	for _, afterCommit := range []bool{false, true} {
		ft := &flakyTable{InstanceTable: e.t, fail: 3, afterCommit: afterCommit}
		m, err := pickup.NewManager(func() pickup.Config { c := e.config(); c.ClaimAttempts = 3; return c }(), e.q, ft, pickup.Options{Clock: e.clock, Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		a := e.inst(fmt.Sprint("a", afterCommit), pickup.UsageOnDemand, "c6i.large")
		e.offer(t, m, a)
		_, err = m.Pickup(ctx, anyOnDemand, "me")
		if !errors.Is(err, errFlaky) || errors.Is(err, pickup.ErrExhausted) {
			t.Fatalf("afterCommit=%v: got %v; want the transient error after 3 attempts", afterCommit, err)
		}
		// Never lost: the claim (if it committed) was undone and the
		// message given back at once.
		if rec := e.get(t, a.ID); rec.State != pickup.StateIdle || rec.Owner != "" {
			t.Fatalf("afterCommit=%v: record %s/%q; want idle, no owner", afterCommit, rec.State, rec.Owner)
		}
		got, err := m.Pickup(ctx, anyOnDemand, fmt.Sprint("me2-", afterCommit))
		if err != nil || got.ID != a.ID {
			t.Fatalf("afterCommit=%v: next pickup got %s, %v; want %s", afterCommit, got.ID, err, a.ID)
		}
		if s := m.Stats(ctx); s.ClaimGaveUp != 1 {
			t.Fatalf("gave up %d; want 1", s.ClaimGaveUp)
		}
	}
}

func testCancel(t *testing.T, e *env) {
	ctx := ctxT(t)
	blocked := make(chan struct{})
	ft := &flakyTable{InstanceTable: e.t, block: blocked}
	m, err := pickup.NewManager(e.config(), e.q, ft, pickup.Options{Clock: e.clock, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	a := e.inst("a", pickup.UsageOnDemand, "c6i.large")
	e.offer(t, m, a)
	cctx, cancel := context.WithCancel(ctx)
	go func() { <-blocked; cancel() }()
	if _, err := m.Pickup(cctx, anyOnDemand, "me"); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v; want context.Canceled", err)
	}
	got, err := m.Pickup(ctx, anyOnDemand, "me2")
	if err != nil || got.ID != a.ID {
		t.Fatalf("after a cancelled pickup: got %s, %v; want %s given back", got.ID, err, a.ID)
	}
	// A request cancelled before it starts never touches the queue.
	done, cancel2 := context.WithCancel(ctx)
	cancel2()
	if _, err := m.Pickup(done, anyOnDemand, "me3"); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v; want context.Canceled", err)
	}
}

func testOfferRelease(t *testing.T, e *env) {
	ctx := ctxT(t)
	m := e.manager(t, nil)
	a := e.inst("a", pickup.UsageOnDemand, "c6i.large")
	e.offer(t, m, a)
	if rec := e.get(t, a.ID); rec.State != pickup.StateIdle || rec.Class != e.class {
		t.Fatalf("after Offer: %s class %q; want idle %q", rec.State, rec.Class, e.class)
	}
	got, err := m.Pickup(ctx, anyOnDemand, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Release(ctx, got.ID, "intruder", pickup.ReOffer); !errors.Is(err, pickup.ErrConditionFailed) {
		t.Fatalf("release by a non-owner: %v; want ErrConditionFailed", err)
	}
	rec, err := m.Release(ctx, got.ID, "run-1", pickup.ReOffer)
	if err != nil || rec.State != pickup.StateIdle || rec.Owner != "" {
		t.Fatalf("ReOffer: %s/%q, %v; want idle", rec.State, rec.Owner, err)
	}
	again, err := m.Pickup(ctx, anyOnDemand, "run-2")
	if err != nil || again.ID != a.ID {
		t.Fatalf("after ReOffer: %s, %v; want %s again", again.ID, err, a.ID)
	}
	rec, err = m.Release(ctx, a.ID, "run-2", pickup.Retire)
	if err != nil || rec.State != pickup.StateRetired {
		t.Fatalf("Retire: %s, %v; want retired", rec.State, err)
	}
	if _, err := m.Pickup(ctx, anyOnDemand, "run-3"); !errors.Is(err, pickup.ErrExhausted) {
		t.Fatalf("after Retire: %v; want exhausted", err)
	}
	if _, err := m.Release(ctx, "no-such", "x", pickup.ReOffer); !errors.Is(err, pickup.ErrNotFound) {
		t.Fatalf("release of an unknown instance: %v; want ErrNotFound", err)
	}
	if _, err := m.Release(ctx, a.ID, "x", pickup.Disposition(7)); err == nil {
		t.Fatal("unknown disposition accepted")
	}
	bad := e.inst("b", "preemptible", "c6i.large")
	if err := m.Offer(ctx, bad); err == nil {
		t.Fatal("Offer with an unknown usage class succeeded")
	}
	other := e.inst("c", pickup.UsageSpot, "c6i.large")
	other.Class = "another"
	if err := m.Offer(ctx, other); err == nil {
		t.Fatal("Offer of another class's instance succeeded")
	}
	// A re-offer past the threshold retires instead.
	short := e.inst("d", pickup.UsageOnDemand, "c6i.large")
	short.Threshold = e.clock.Now().Add(e.delay * 2)
	e.offer(t, m, short)
	if _, err := m.Pickup(ctx, pickup.Requirements{}, "run-4"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(e.delay*2 + 100*time.Millisecond)
	if rec, err := m.Release(ctx, short.ID, "run-4", pickup.ReOffer); err != nil || rec.State != pickup.StateRetired {
		t.Fatalf("re-offer past threshold: %s, %v; want retired", rec.State, err)
	}
}

func testDeleteMode(t *testing.T, e *env) {
	ctx := ctxT(t)
	m := e.manager(t, func(c *pickup.Config) { c.Mode = pickup.ModeDelete })
	spot, od := e.inst("s", pickup.UsageSpot, "c6i.large"), e.inst("o", pickup.UsageOnDemand, "c6i.large")
	e.offer(t, m, spot, od)
	if err := e.q.Send(ctx, "garbage", 0); err != nil {
		t.Fatal(err)
	}
	got, err := m.Pickup(ctx, anyOnDemand, "me")
	if err != nil || got.ID != od.ID {
		t.Fatalf("got %s, %v; want %s", got.ID, err, od.ID)
	}
	_, err = m.Pickup(ctx, anyOnDemand, "me2")
	wantExhausted(t, err, pickup.Global)
	s := m.Stats(ctx)
	if s.Passed != 1 || s.Requeued != 1 || s.Discarded[pickup.ReasonMalformed] != 1 {
		t.Fatalf("stats %+v; want 1 passed, 1 requeued, 1 malformed", s)
	}
	// The misfit was re-sent (a new message) with the delay.
	ids, bad := e.drain(t)
	if ids[spot.ID] != 1 || len(ids) != 1 || bad != 0 {
		t.Fatalf("queue holds %v +%d; want only %s once", ids, bad, spot.ID)
	}
}

func testReconfigure(t *testing.T, e *env) {
	ctx := ctxT(t)
	m := e.manager(t, nil)
	a := e.inst("a", pickup.UsageOnDemand, "c6i.large")
	e.offer(t, m, a)
	cfg := m.Config()
	if err := m.Reconfigure(pickup.Config{Class: cfg.Class, InstanceTypes: []string{"[bad"}}); err == nil {
		t.Fatal("a pattern that does not compile was accepted")
	}
	if err := m.Reconfigure(pickup.Config{Class: "renamed"}); err == nil {
		t.Fatal("renaming the class was accepted")
	}
	if got := m.Config(); got.CPU != 2 {
		t.Fatalf("a failed Reconfigure changed the config: %+v", got)
	}
	cfg.CPU = 8 // the class now declares 8 vCPUs: a's message contradicts it
	if err := m.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	_, err := m.Pickup(ctx, pickup.Requirements{}, "me")
	wantExhausted(t, err, pickup.Global)
	if s := m.Stats(ctx); s.Discarded[pickup.ReasonClassMismatch] != 1 {
		t.Fatalf("discarded %v; want 1 class_mismatch", s.Discarded)
	}
}

func testStatsDepth(t *testing.T, e *env) {
	ctx := ctxT(t)
	if e.depth == nil {
		e.depth = func(context.Context) (int, error) { return 0, errors.New("no depth here") }
	}
	m := e.manager(t, nil)
	e.offer(t, m, e.inst("a", pickup.UsageOnDemand, "c6i.large"), e.inst("b", pickup.UsageSpot, "c6i.large"))
	s := m.Stats(ctx)
	// SQS's depth is approximate and may lag a moment.
	for i := 0; i < 50 && e.realTime && (s.QueueDepth == nil || *s.QueueDepth != 2); i++ {
		time.Sleep(100 * time.Millisecond)
		s = m.Stats(ctx)
	}
	if e.backend == "mem" {
		if s.DepthErr == nil {
			t.Fatal("want the depth error reported")
		}
		return
	}
	if s.QueueDepth == nil || *s.QueueDepth != 2 || s.Class != e.class {
		t.Fatalf("depth %v (err %v), class %q; want 2, %q", fmtDepth(s.QueueDepth), s.DepthErr, s.Class, e.class)
	}
}

func fmtDepth(d *int) string {
	if d == nil {
		return "unset"
	}
	return fmt.Sprint(*d)
}
