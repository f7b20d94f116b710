package pools

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestPoolAdminErrors(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.CreatePool("db", 2, ""); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"create duplicate", m.CreatePool("db", 3, ""), ErrPoolExists},
		{"create default", m.CreatePool(DefaultPool, 3, ""), ErrPoolExists},
		{"create empty name", m.CreatePool("", 3, ""), ErrInvalidPool},
		{"create slash in name", m.CreatePool("a/b", 3, ""), ErrInvalidPool},
		{"create space in name", m.CreatePool("a b", 3, ""), ErrInvalidPool},
		{"create long name", m.CreatePool(strings.Repeat("x", 129), 3, ""), ErrInvalidPool},
		{"create zero slots", m.CreatePool("z", 0, ""), ErrInvalidPool},
		{"create negative slots", m.CreatePool("z", -1, ""), ErrInvalidPool},
		{"configure negative max queued", m.ConfigurePool(PoolConfig{Name: "z", Slots: 1, MaxQueued: -1}), ErrInvalidPool},
		{"configure negative TTL", m.ConfigurePool(PoolConfig{Name: "z", Slots: 1, LeaseTTL: -time.Second}), ErrInvalidPool},
		{"update unknown", m.UpdatePool("nope", 3), ErrUnknownPool},
		{"update zero slots", m.UpdatePool("db", 0), ErrInvalidPool},
		{"delete default", m.DeletePool(DefaultPool), ErrDefaultPool},
		{"delete unknown", m.DeletePool("nope"), ErrUnknownPool},
		{"release unknown pool", m.Release("nope", "t"), ErrUnknownPool},
		{"release empty task", m.Release("db", ""), ErrInvalidRequest},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if _, err := m.PoolStatus("z"); !errors.Is(err, ErrUnknownPool) {
		t.Fatalf("a rejected configuration created pool z: %v", err)
	}
	var names []string
	for _, st := range m.ListPools() {
		names = append(names, st.Name)
	}
	if got, want := strings.Join(names, ","), "db,"+DefaultPool; got != want {
		t.Fatalf("ListPools = %s, want %s", got, want)
	}
}

func TestAcquireBadInput(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.CreatePool("db", 2, ""); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		pool string
		req  Request
		want error
	}{
		{"unknown pool", context.Background(), "nope", Request{}, ErrUnknownPool},
		{"negative slots", context.Background(), "db", Request{Slots: -1}, ErrInvalidRequest},
		{"negative TTL", context.Background(), "db", Request{TTL: -1}, ErrInvalidRequest},
		{"negative timeout", context.Background(), "db", Request{Timeout: -1}, ErrInvalidRequest},
		{"exceeds capacity", context.Background(), "db", Request{Slots: 3}, ErrExceedsCapacity},
		{"context already done", cancelled, "db", Request{}, context.Canceled},
	} {
		l, err := m.Acquire(tc.ctx, tc.pool, tc.req)
		if !errors.Is(err, tc.want) || l != nil {
			t.Errorf("%s: got (%v, %v), want %v", tc.name, l, err, tc.want)
		}
	}
	st := mustStatus(t, m, "db")
	if st.Used != 0 || st.Queued != 0 || st.Stats.Rejected != 1 || st.Stats.Cancelled != 1 {
		t.Fatalf("after bad requests: used %d queued %d rejected %d cancelled %d, want 0 0 1 1", st.Used, st.Queued, st.Stats.Rejected, st.Stats.Cancelled)
	}
}

func TestMultiSlotStrictHeadOfLine(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.CreatePool("p", 4, ""); err != nil {
		t.Fatal(err)
	}
	a := mustAcquire(t, m, "p", Request{TaskID: "a", Slots: 3})
	big := acquireAsync(context.Background(), m, "p", Request{TaskID: "big", Slots: 3, Priority: 5})
	waitQueued(t, m, "p", 1)
	// One slot is free and "small" would fit, but it must not pass the head.
	small := acquireAsync(context.Background(), m, "p", Request{TaskID: "small", Slots: 1})
	waitQueued(t, m, "p", 2)
	mustPend(t, small)
	if st := mustStatus(t, m, "p"); st.Available != 1 || st.QueuedSlots != 4 {
		t.Fatalf("available %d queued slots %d, want 1 and 4", st.Available, st.QueuedSlots)
	}
	a.Release()
	b := mustGet(t, big)
	// big (3) + small (1) = 4: both granted by the same release.
	s := mustGet(t, small)
	if st := mustStatus(t, m, "p"); st.Used != 4 {
		t.Fatalf("used %d, want 4", st.Used)
	}
	b.Release()
	s.Release()
}

func TestCancelRemovesWaiter(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.CreatePool("p", 1, ""); err != nil {
		t.Fatal(err)
	}
	held := mustAcquire(t, m, "p", Request{TaskID: "held"})
	ctx, cancel := context.WithCancel(context.Background())
	w := acquireAsync(ctx, m, "p", Request{TaskID: "w"})
	waitQueued(t, m, "p", 1)
	cancel()
	if err := mustFail(t, w); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled acquire = %v, want context.Canceled", err)
	}
	st := mustStatus(t, m, "p")
	if st.Queued != 0 || st.QueuedSlots != 0 || st.Stats.Cancelled != 1 {
		t.Fatalf("after cancel: %+v", st)
	}
	held.Release()
	if st := mustStatus(t, m, "p"); st.Used != 0 {
		t.Fatalf("cancelled waiter was granted: used %d", st.Used)
	}
}

func TestCancelledHeadWakesNext(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.CreatePool("p", 3, ""); err != nil {
		t.Fatal(err)
	}
	held := mustAcquire(t, m, "p", Request{TaskID: "held", Slots: 2})
	ctx, cancel := context.WithCancel(context.Background())
	head := acquireAsync(ctx, m, "p", Request{TaskID: "head", Slots: 3, Priority: 9})
	waitQueued(t, m, "p", 1)
	next := acquireAsync(context.Background(), m, "p", Request{TaskID: "next", Slots: 1})
	waitQueued(t, m, "p", 2)
	mustPend(t, next) // blocked behind the head although one slot is free
	cancel()
	mustFail(t, head)
	mustGet(t, next).Release()
	held.Release()
}

// A grant that lands while the waiter is being cancelled is handed back.
func TestGrantRacingCancelIsHandedBack(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.CreatePool("p", 1, ""); err != nil {
		t.Fatal(err)
	}
	p := m.lookup("p")
	held := mustAcquire(t, m, "p", Request{TaskID: "held"})
	l := &Lease{p: p, taskID: "racer", slots: 1, index: -1}
	p.mu.Lock()
	p.seq++
	l.seq = p.seq
	w := p.enqueueLocked(l)
	p.mu.Unlock()
	queued := acquireAsync(context.Background(), m, "p", Request{TaskID: "next"})
	waitQueued(t, m, "p", 2)
	// Grant the racer by hand without waking it, as a release would just
	// before the waiter sees its cancelled context.
	held.Release() // grants racer: ready is closed, state granted
	if w.state != granted {
		t.Fatalf("racer state %v, want granted", w.state)
	}
	w.ready = make(chan struct{}) // hide the grant from the select
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got, err := m.wait(ctx, w); !errors.Is(err, context.Canceled) || got != nil {
		t.Fatalf("wait = (%v, %v), want context.Canceled", got, err)
	}
	if l.Held() {
		t.Fatal("the raced grant was kept")
	}
	// The slot went to the next waiter.
	mustGet(t, queued).Release()
	if st := mustStatus(t, m, "p"); st.Stats.Cancelled != 1 || st.Used != 0 {
		t.Fatalf("cancelled %d used %d, want 1 and 0", st.Stats.Cancelled, st.Used)
	}
}

func TestMaxQueued(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.ConfigurePool(PoolConfig{Name: "p", Slots: 1, MaxQueued: 1}); err != nil {
		t.Fatal(err)
	}
	held := mustAcquire(t, m, "p", Request{TaskID: "held"})
	w := acquireAsync(context.Background(), m, "p", Request{TaskID: "w"})
	waitQueued(t, m, "p", 1)
	if _, err := m.Acquire(context.Background(), "p", Request{TaskID: "x"}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("acquire beyond MaxQueued = %v, want ErrQueueFull", err)
	}
	held.Release()
	mustGet(t, w).Release()
	if st := mustStatus(t, m, "p"); st.Stats.Rejected != 1 {
		t.Fatalf("rejected %d, want 1", st.Stats.Rejected)
	}
}

func TestRequestTimeout(t *testing.T) {
	clk := newFakeClock()
	m := newTestManager(t, Options{Clock: clk})
	if err := m.CreatePool("p", 1, ""); err != nil {
		t.Fatal(err)
	}
	held := mustAcquire(t, m, "p", Request{TaskID: "held"})
	w := acquireAsync(context.Background(), m, "p", Request{TaskID: "w", Timeout: time.Minute})
	waitQueued(t, m, "p", 1)
	clk.Advance(59 * time.Second)
	mustPend(t, w)
	if st := mustStatus(t, m, "p"); st.OldestWait != 59*time.Second {
		t.Fatalf("oldest wait %v, want 59s", st.OldestWait)
	}
	clk.Advance(time.Second)
	if err := mustFail(t, w); !errors.Is(err, ErrTimeout) {
		t.Fatalf("timed-out acquire = %v, want ErrTimeout", err)
	}
	st := mustStatus(t, m, "p")
	if st.Queued != 0 || st.Stats.TimedOut != 1 {
		t.Fatalf("after timeout: queued %d timed out %d", st.Queued, st.Stats.TimedOut)
	}
	// A granted request's timer is stopped.
	w2 := acquireAsync(context.Background(), m, "p", Request{TaskID: "w2", Timeout: time.Minute})
	waitQueued(t, m, "p", 1)
	held.Release()
	mustGet(t, w2).Release()
	if n := clk.Pending(); n != 0 {
		t.Fatalf("%d timers still armed after grant", n)
	}
}

func TestLeaseTTLExpiry(t *testing.T) {
	clk := newFakeClock()
	m := newTestManager(t, Options{Clock: clk})
	if err := m.ConfigurePool(PoolConfig{Name: "p", Slots: 2, LeaseTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	a := mustAcquire(t, m, "p", Request{TaskID: "a", Slots: 2})
	if got, want := a.ExpiresAt(), clk.Now().Add(time.Minute); !got.Equal(want) {
		t.Fatalf("ExpiresAt %v, want %v", got, want)
	}
	w := acquireAsync(context.Background(), m, "p", Request{TaskID: "w", TTL: time.Hour})
	waitQueued(t, m, "p", 1)
	clk.Advance(40 * time.Second)
	if err := a.Heartbeat(context.Background()); err != nil {
		t.Fatal(err)
	}
	clk.Advance(40 * time.Second) // 80s after grant, 40s after heartbeat
	if !a.Held() {
		t.Fatal("heartbeated lease expired early")
	}
	clk.Advance(20 * time.Second)
	if a.Held() {
		t.Fatal("lease still held 60s after its last heartbeat")
	}
	wl := mustGet(t, w)
	if wl.TTL() != time.Hour {
		t.Fatalf("request TTL %v, want 1h (request overrides pool)", wl.TTL())
	}
	if err := a.Heartbeat(context.Background()); !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("heartbeat after expiry = %v, want ErrLeaseExpired", err)
	}
	if err := a.Release(); err != nil {
		t.Fatalf("release after expiry = %v, want nil", err)
	}
	wl.Release()
	if err := wl.Heartbeat(context.Background()); !errors.Is(err, ErrLeaseReleased) {
		t.Fatalf("heartbeat after release = %v, want ErrLeaseReleased", err)
	}
	st := mustStatus(t, m, "p")
	if st.Used != 0 || st.Stats.Expired != 1 || st.Stats.Released != 1 {
		t.Fatalf("used %d expired %d released %d, want 0 1 1", st.Used, st.Stats.Expired, st.Stats.Released)
	}
	if n := clk.Pending(); n != 0 {
		t.Fatalf("%d timers still armed", n)
	}
}

func TestHeartbeatWithoutTTL(t *testing.T) {
	m := newTestManager(t, Options{})
	l := mustAcquire(t, m, "", Request{TaskID: "a"})
	if err := l.Heartbeat(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !l.ExpiresAt().IsZero() {
		t.Fatalf("lease without TTL expires at %v", l.ExpiresAt())
	}
	l.Release()
}

func TestReleaseIdempotentAndByTask(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.CreatePool("p", 4, ""); err != nil {
		t.Fatal(err)
	}
	a1 := mustAcquire(t, m, "p", Request{TaskID: "a"})
	mustAcquire(t, m, "p", Request{TaskID: "b"})
	a2 := mustAcquire(t, m, "p", Request{TaskID: "a", Slots: 2})
	if err := m.Release("p", "a"); err != nil {
		t.Fatal(err)
	}
	if a1.Held() || a2.Held() {
		t.Fatal("Release by task left one of its leases held")
	}
	for range 2 {
		if err := m.Release("p", "a"); err != nil {
			t.Fatalf("repeated release by task: %v", err)
		}
		if err := a1.Release(); err != nil {
			t.Fatalf("repeated lease release: %v", err)
		}
	}
	if st := mustStatus(t, m, "p"); st.Used != 1 || st.Stats.Released != 2 {
		t.Fatalf("used %d released %d, want 1 and 2", st.Used, st.Stats.Released)
	}
	m.Release("p", "b")
	if st := mustStatus(t, m, "p"); st.Used != 0 {
		t.Fatalf("used %d, want 0", st.Used)
	}
}

func TestGrowWakesWaiters(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.CreatePool("p", 1, ""); err != nil {
		t.Fatal(err)
	}
	held := mustAcquire(t, m, "p", Request{TaskID: "held"})
	w1 := acquireAsync(context.Background(), m, "p", Request{TaskID: "w1", Slots: 1})
	waitQueued(t, m, "p", 1)
	w2 := acquireAsync(context.Background(), m, "p", Request{TaskID: "w2", Slots: 1})
	waitQueued(t, m, "p", 2)
	if err := m.UpdatePool("p", 3); err != nil {
		t.Fatal(err)
	}
	l1, l2 := mustGet(t, w1), mustGet(t, w2)
	if st := mustStatus(t, m, "p"); st.Used != 3 || st.Total != 3 {
		t.Fatalf("used %d total %d, want 3 3", st.Used, st.Total)
	}
	held.Release()
	l1.Release()
	l2.Release()
}

func TestShrinkNeverPreempts(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.CreatePool("p", 4, ""); err != nil {
		t.Fatal(err)
	}
	a := mustAcquire(t, m, "p", Request{TaskID: "a", Slots: 3})
	big := acquireAsync(context.Background(), m, "p", Request{TaskID: "big", Slots: 3, Priority: 9})
	waitQueued(t, m, "p", 1)
	small := acquireAsync(context.Background(), m, "p", Request{TaskID: "small", Slots: 2})
	waitQueued(t, m, "p", 2)
	if err := m.UpdatePool("p", 2); err != nil {
		t.Fatal(err)
	}
	if err := mustFail(t, big); !errors.Is(err, ErrExceedsCapacity) {
		t.Fatalf("queued request larger than the new size = %v, want ErrExceedsCapacity", err)
	}
	st := mustStatus(t, m, "p")
	if !a.Held() || st.Used != 3 || st.Total != 2 || st.Available != 0 || st.Queued != 1 {
		t.Fatalf("after shrink: held %v, %+v", a.Held(), st)
	}
	mustPend(t, small)
	a.Release()
	mustGet(t, small).Release()
	if st := mustStatus(t, m, "p"); st.Used != 0 || st.Available != 2 || st.Stats.Rejected != 1 {
		t.Fatalf("after release: %+v", st)
	}
}

func TestConfigurePoolUpdatesInPlace(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.ConfigurePool(PoolConfig{Name: "p", Slots: 1, Description: "one"}); err != nil {
		t.Fatal(err)
	}
	l := mustAcquire(t, m, "p", Request{TaskID: "a"})
	if err := m.ConfigurePool(PoolConfig{Name: "p", Slots: 5, Description: "five", MaxQueued: 7, LeaseTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	st := mustStatus(t, m, "p")
	if st.Total != 5 || st.Used != 1 || st.Description != "five" || st.MaxQueued != 7 || st.LeaseTTL != time.Minute {
		t.Fatalf("after reconfigure: %+v", st)
	}
	if l.TTL() != 0 {
		t.Fatal("a new LeaseTTL changed an existing lease")
	}
	l.Release()
}

func TestStatsWaitSummary(t *testing.T) {
	clk := newFakeClock()
	m := newTestManager(t, Options{Clock: clk})
	if err := m.CreatePool("p", 1, ""); err != nil {
		t.Fatal(err)
	}
	held := mustAcquire(t, m, "p", Request{TaskID: "held"})
	w1 := acquireAsync(context.Background(), m, "p", Request{TaskID: "w1"})
	waitQueued(t, m, "p", 1)
	clk.Advance(10 * time.Second)
	w2 := acquireAsync(context.Background(), m, "p", Request{TaskID: "w2"})
	waitQueued(t, m, "p", 2)
	clk.Advance(20 * time.Second)
	if st := mustStatus(t, m, "p"); st.OldestWait != 30*time.Second {
		t.Fatalf("oldest wait %v, want 30s", st.OldestWait)
	}
	held.Release()
	mustGet(t, w1).Release()
	mustGet(t, w2).Release()
	st := mustStatus(t, m, "p")
	want := WaitSummary{Count: 2, Sum: 50 * time.Second, Max: 30 * time.Second}
	if st.Stats.Wait != want || st.Stats.Wait.Mean() != 25*time.Second {
		t.Fatalf("wait summary %+v, want %+v", st.Stats.Wait, want)
	}
	if st.Stats.Granted != 3 || st.Stats.Released != 3 || st.OldestWait != 0 {
		t.Fatalf("stats %+v", st)
	}
	if (WaitSummary{}).Mean() != 0 {
		t.Fatal("mean of nothing is not 0")
	}
}

func TestLeaseByIDWithoutStore(t *testing.T) {
	m := newTestManager(t, Options{})
	l := mustAcquire(t, m, "", Request{TaskID: "a"})
	id := l.ID()
	if !strings.HasPrefix(id, DefaultPool+"/") || l.ID() != id {
		t.Fatalf("ID %q: want a stable %s/... ID", id, DefaultPool)
	}
	got, err := m.Lease(id)
	if err != nil || got != l {
		t.Fatalf("Lease(%q) = (%p, %v), want %p", id, got, err, l)
	}
	l.Release()
	if _, err := m.Lease(id); !errors.Is(err, ErrUnknownLease) {
		t.Fatalf("Lease of released ID = %v, want ErrUnknownLease", err)
	}
	if _, err := m.Lease("nope"); !errors.Is(err, ErrUnknownLease) {
		t.Fatalf("Lease(nope) = %v, want ErrUnknownLease", err)
	}
}

func TestDeletePoolWithQueuedRequest(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.CreatePool("p", 1, ""); err != nil {
		t.Fatal(err)
	}
	held := mustAcquire(t, m, "p", Request{TaskID: "a"})
	ctx, cancel := context.WithCancel(context.Background())
	w := acquireAsync(ctx, m, "p", Request{TaskID: "w"})
	waitQueued(t, m, "p", 1)
	held.Release()
	l := mustGet(t, w)
	cancel()
	if err := m.DeletePool("p"); !errors.Is(err, ErrPoolInUse) {
		t.Fatalf("delete = %v, want ErrPoolInUse", err)
	}
	l.Release()
	if err := m.DeletePool("p"); err != nil {
		t.Fatal(err)
	}
	// The name can be reused; the old lease stays released.
	if err := m.CreatePool("p", 2, ""); err != nil {
		t.Fatal(err)
	}
	if l.Release() != nil || mustStatus(t, m, "p").Used != 0 {
		t.Fatal("releasing a lease of the deleted pool touched the new one")
	}
}

// Lookups go through a scanned slice for a few pools and the map beyond
// fewPools; both agree as pools come and go.
func TestPoolLookupFewAndMany(t *testing.T) {
	m := newTestManager(t, Options{})
	names := []string{DefaultPool}
	check := func(stage string) {
		t.Helper()
		for _, name := range names {
			if p := m.lookup(name); p == nil || p.name != name {
				t.Fatalf("%s: lookup(%q) = %v", stage, name, p)
			}
		}
		if p := m.lookup("absent"); p != nil {
			t.Fatalf("%s: lookup of an absent pool found %q", stage, p.name)
		}
		if _, err := m.Acquire(context.Background(), "absent", Request{}); !errors.Is(err, ErrUnknownPool) {
			t.Fatalf("%s: acquire on an absent pool: %v, want ErrUnknownPool", stage, err)
		}
	}
	for i := range 3 * fewPools {
		name := "p" + strings.Repeat("x", i%3) + string(rune('a'+i))
		if err := m.CreatePool(name, 1, ""); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
		check("grown to " + name)
	}
	for len(names) > 2 {
		if err := m.DeletePool(names[len(names)-1]); err != nil {
			t.Fatal(err)
		}
		names = names[:len(names)-1]
		check("shrunk to " + names[len(names)-1])
	}
}

// Leases come from blocks; each is distinct, and releasing one twice (a
// stale handle) never frees a neighbour's slots.
func TestLeasesFromBlocksAreDistinct(t *testing.T) {
	m := newTestManager(t, Options{})
	const n = 2*leaseBlockSize + 3
	if err := m.CreatePool("blk", n, ""); err != nil {
		t.Fatal(err)
	}
	seen := map[*Lease]bool{}
	var held []*Lease
	for range n {
		l := mustAcquire(t, m, "blk", Request{TaskID: "t"})
		if seen[l] {
			t.Fatal("a lease was handed out twice")
		}
		seen[l] = true
		held = append(held, l)
	}
	for i := 0; i < n; i += 2 {
		for range 2 {
			if err := held[i].Release(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if st := mustStatus(t, m, "blk"); st.Used != n/2 {
		t.Fatalf("after releasing every other lease twice: used %d, want %d", st.Used, n/2)
	}
	for i := 1; i < n; i += 2 {
		if !held[i].Held() {
			t.Fatalf("lease %d lost its slot to a neighbour's double release", i)
		}
	}
}

// ConfigurePools creates and updates many pools in one snapshot; an invalid
// or repeated entry changes nothing.
func TestConfigurePools(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.CreatePool("old", 2, ""); err != nil {
		t.Fatal(err)
	}
	held := mustAcquire(t, m, "old", Request{TaskID: "t", Slots: 2})
	var cfgs []PoolConfig
	for i := range 2000 {
		cfgs = append(cfgs, PoolConfig{Name: "p" + strconv.Itoa(i), Slots: 1 + i%5})
	}
	cfgs = append(cfgs, PoolConfig{Name: "old", Slots: 1, Description: "shrunk"})
	if err := m.ConfigurePools(cfgs...); err != nil {
		t.Fatal(err)
	}
	if got := len(m.ListPools()); got != 2002 {
		t.Fatalf("%d pools, want 2002 (default_pool, old and 2000 new)", got)
	}
	if st := mustStatus(t, m, "p1999"); st.Total != 5 {
		t.Fatalf("p1999: %+v, want 5 slots", st)
	}
	if st := mustStatus(t, m, "old"); st.Total != 1 || st.Used != 2 || st.Available != 0 || st.Description != "shrunk" {
		t.Fatalf("old after a shrink below its holder: %+v", st)
	}
	held.Release()

	for name, bad := range map[string][]PoolConfig{
		"invalid":  {{Name: "fresh", Slots: 1}, {Name: "bad", Slots: 0}},
		"repeated": {{Name: "fresh", Slots: 1}, {Name: "fresh", Slots: 2}},
	} {
		err := m.ConfigurePools(bad...)
		if !errors.Is(err, ErrInvalidPool) {
			t.Fatalf("%s: %v, want ErrInvalidPool", name, err)
		}
		if m.lookup("fresh") != nil {
			t.Fatalf("%s: a rejected call created a pool", name)
		}
	}
}
