package pools

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

var errInjected = errors.New("injected store failure")

// faultyStore wraps a MemoryStore, logs calls, and fails on demand.
type faultyStore struct {
	MemoryStore
	mu       sync.Mutex
	calls    []string
	failPuts int // fail this many next PutLease calls
	failDels int
	failLoad bool
}

func (s *faultyStore) log(op string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, op)
	switch {
	case op == "put" && s.failPuts > 0:
		s.failPuts--
		return true
	case op == "delete" && s.failDels > 0:
		s.failDels--
		return true
	case op == "load" && s.failLoad:
		return true
	}
	return false
}

func (s *faultyStore) PutLease(ctx context.Context, rec LeaseRecord) error {
	if s.log("put") {
		return errInjected
	}
	return s.MemoryStore.PutLease(ctx, rec)
}

func (s *faultyStore) DeleteLease(ctx context.Context, id string) error {
	if s.log("delete") {
		return errInjected
	}
	return s.MemoryStore.DeleteLease(ctx, id)
}

func (s *faultyStore) LoadLeases(ctx context.Context) ([]LeaseRecord, error) {
	if s.log("load") {
		return nil, errInjected
	}
	return s.MemoryStore.LoadLeases(ctx)
}

func (s *faultyStore) takeCalls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls
	s.calls = nil
	return c
}

func (s *faultyStore) record(t *testing.T, id string) (LeaseRecord, bool) {
	t.Helper()
	recs, err := s.MemoryStore.LoadLeases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.LeaseID == id {
			return r, true
		}
	}
	return LeaseRecord{}, false
}

func TestStoreRecordsLeaseLifecycle(t *testing.T) {
	clk := newFakeClock()
	st := &faultyStore{}
	m := newTestManager(t, Options{Clock: clk, Store: st})
	if err := m.ConfigurePool(PoolConfig{Name: "p", Slots: 3, LeaseTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	start := clk.Now()
	l := mustAcquire(t, m, "p", Request{TaskID: "a", Priority: 7, Slots: 2})
	rec, ok := st.record(t, l.ID())
	want := LeaseRecord{LeaseID: l.ID(), Pool: "p", TaskID: "a", Priority: 7, Slots: 2, GrantedAt: start, ExpiresAt: start.Add(time.Minute), TTL: time.Minute}
	if !ok || rec != want {
		t.Fatalf("record after grant = %+v (found %v), want %+v", rec, ok, want)
	}
	clk.Advance(30 * time.Second)
	if err := l.Heartbeat(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rec, _ := st.record(t, l.ID()); !rec.ExpiresAt.Equal(start.Add(90 * time.Second)) {
		t.Fatalf("record expiry after heartbeat %v, want %v", rec.ExpiresAt, start.Add(90*time.Second))
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.record(t, l.ID()); ok {
		t.Fatal("record survived release")
	}
	e := mustAcquire(t, m, "p", Request{TaskID: "e"})
	clk.Advance(time.Minute)
	if e.Held() {
		t.Fatal("lease did not expire")
	}
	if _, ok := st.record(t, e.ID()); ok {
		t.Fatal("record survived expiry")
	}
	if got, want := st.takeCalls(), []string{"put", "put", "delete", "put", "delete"}; !slices.Equal(got, want) {
		t.Fatalf("store calls %v, want %v", got, want)
	}
}

// creatingStore is a faultyStore that tells a grant's record from later
// puts (pools.CreateLease).
type creatingStore struct{ faultyStore }

func (s *creatingStore) CreateLease(ctx context.Context, rec LeaseRecord) error {
	if s.log("create") {
		return errInjected
	}
	return s.MemoryStore.PutLease(ctx, rec)
}

// A store with CreateLease gets it for each grant and PutLease for the
// heartbeats; a rolled-back grant's record is deleted as before. (Without
// CreateLease a grant is a PutLease: TestStoreRecordsLeaseLifecycle.)
func TestStoreCreateLease(t *testing.T) {
	clk := newFakeClock()
	st := &creatingStore{}
	m := newTestManager(t, Options{Clock: clk, Store: st})
	if err := m.ConfigurePool(PoolConfig{Name: "p", Slots: 3, LeaseTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	l := mustAcquire(t, m, "p", Request{TaskID: "a"})
	if _, ok := st.record(t, l.ID()); !ok {
		t.Fatal("no record after the grant")
	}
	clk.Advance(30 * time.Second)
	if err := l.Heartbeat(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if got, want := st.takeCalls(), []string{"create", "put", "delete"}; !slices.Equal(got, want) {
		t.Fatalf("store calls %v, want %v", got, want)
	}
	// On a store without the method, CreateLease is its PutLease.
	st.mu.Lock()
	st.failPuts = 1
	st.mu.Unlock()
	if err := CreateLease(context.Background(), &st.faultyStore, LeaseRecord{LeaseID: "x"}); !errors.Is(err, errInjected) {
		t.Fatalf("CreateLease on a store without it: %v, want its PutLease's error", err)
	}
}

func TestRestoreRecountsHeldSlots(t *testing.T) {
	clk := newFakeClock()
	st := &faultyStore{}
	setup := func() *Manager {
		m := newTestManager(t, Options{Clock: clk, Store: st})
		if err := m.CreatePool("p", 3, ""); err != nil {
			t.Fatal(err)
		}
		return m
	}
	old := setup()
	forever := mustAcquire(t, old, "p", Request{TaskID: "forever", Slots: 2})
	ttl := mustAcquire(t, old, "p", Request{TaskID: "ttl", TTL: time.Minute})
	ctx := context.Background()
	// Records the restart must cope with: an expired one, one of an unknown
	// pool, a malformed one.
	st.MemoryStore.PutLease(ctx, LeaseRecord{LeaseID: "p/old-1", Pool: "p", TaskID: "dead", Slots: 1, GrantedAt: clk.Now().Add(-time.Hour), ExpiresAt: clk.Now().Add(-time.Minute)})
	st.MemoryStore.PutLease(ctx, LeaseRecord{LeaseID: "gone/old-2", Pool: "gone", TaskID: "x", Slots: 1})
	st.MemoryStore.PutLease(ctx, LeaseRecord{LeaseID: "p/old-3", Pool: "p", TaskID: "bad", Slots: 0})
	clk.Advance(20 * time.Second)

	// The process restarts: the old Manager is forgotten, its holders live on.
	m := setup()
	rep, err := m.Restore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(rep.Orphaned)
	if rep.Restored != 2 || rep.Expired != 1 || rep.Known != 0 || !slices.Equal(rep.Orphaned, []string{"gone/old-2", "p/old-3"}) {
		t.Fatalf("restore report %+v", rep)
	}
	if s := mustStatus(t, m, "p"); s.Used != 3 || s.Available != 0 || s.Stats.Expired != 1 {
		t.Fatalf("after restore: %+v", s)
	}
	if _, ok := st.record(t, "p/old-1"); ok {
		t.Fatal("expired record not deleted")
	}
	if _, ok := st.record(t, "gone/old-2"); !ok {
		t.Fatal("record of an unknown pool was deleted")
	}
	// Idempotent.
	if rep, err := m.Restore(ctx); err != nil || rep.Restored != 0 || rep.Known != 2 {
		t.Fatalf("second restore = %+v, %v", rep, err)
	}
	if s := mustStatus(t, m, "p"); s.Used != 3 {
		t.Fatalf("second restore changed used to %d", s.Used)
	}

	// A new request waits for the restored holders.
	w := acquireAsync(ctx, m, "p", Request{TaskID: "new"})
	waitQueued(t, m, "p", 1)

	// The TTL lease keeps its expiry: 60s after its grant, 40s from now.
	r, err := m.Lease(ttl.ID())
	if err != nil {
		t.Fatal(err)
	}
	if r.TaskID() != "ttl" || r.TTL() != time.Minute {
		t.Fatalf("restored lease task %q TTL %v", r.TaskID(), r.TTL())
	}
	clk.Advance(39 * time.Second)
	mustPend(t, w)
	clk.Advance(time.Second)
	nl := mustGet(t, w)

	// The one without TTL is released by ID as the daemon would.
	f, err := m.Lease(forever.ID())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Release(); err != nil {
		t.Fatal(err)
	}
	nl.Release()
	recs, _ := st.MemoryStore.LoadLeases(ctx)
	if len(recs) != 2 { // gone/old-2 and p/old-3 remain
		t.Fatalf("%d records left, want 2: %+v", len(recs), recs)
	}
	if s := mustStatus(t, m, "p"); s.Used != 0 || s.Stats.Expired != 2 {
		t.Fatalf("at the end: %+v", s)
	}
}

func TestStoreErrorOnGrantRollsBack(t *testing.T) {
	st := &faultyStore{}
	m := newTestManager(t, Options{Store: st})
	if err := m.CreatePool("p", 1, ""); err != nil {
		t.Fatal(err)
	}
	// Immediate grant.
	st.failPuts = 1
	if _, err := m.Acquire(context.Background(), "p", Request{TaskID: "a"}); !errors.Is(err, ErrStore) || !errors.Is(err, errInjected) {
		t.Fatalf("acquire with failing store = %v, want ErrStore wrapping the cause", err)
	}
	if s := mustStatus(t, m, "p"); s.Used != 0 || s.Stats.Rejected != 1 || s.Stats.Granted != 0 {
		t.Fatalf("after failed grant: %+v", s)
	}
	// Queued grant: the first waiter's record fails, the slot goes on to the next.
	held := mustAcquire(t, m, "p", Request{TaskID: "held"})
	w1 := acquireAsync(context.Background(), m, "p", Request{TaskID: "w1", Priority: 2})
	waitQueued(t, m, "p", 1)
	w2 := acquireAsync(context.Background(), m, "p", Request{TaskID: "w2", Priority: 1})
	waitQueued(t, m, "p", 2)
	st.failPuts = 1
	held.Release()
	if err := mustFail(t, w1); !errors.Is(err, ErrStore) {
		t.Fatalf("w1 = %v, want ErrStore", err)
	}
	l2 := mustGet(t, w2)
	if _, ok := st.record(t, l2.ID()); !ok {
		t.Fatal("w2's grant not recorded")
	}
	// A failing delete on release is reported, the slot is freed anyway.
	st.failDels = 1
	if err := l2.Release(); !errors.Is(err, ErrStore) {
		t.Fatalf("release with failing delete = %v, want ErrStore", err)
	}
	if s := mustStatus(t, m, "p"); s.Used != 0 {
		t.Fatalf("used %d after release, want 0", s.Used)
	}
	st.failDels = 1
	h := mustAcquire(t, m, "p", Request{TaskID: "h"})
	if err := m.Release("p", "h"); !errors.Is(err, ErrStore) || h.Held() {
		t.Fatalf("release by task with failing delete = %v (held %v)", err, h.Held())
	}
	// Heartbeat failures are reported; the lease stays held.
	h = mustAcquire(t, m, "p", Request{TaskID: "h"})
	st.failPuts = 1
	if err := h.Heartbeat(context.Background()); !errors.Is(err, ErrStore) || !h.Held() {
		t.Fatalf("heartbeat with failing put = %v (held %v)", err, h.Held())
	}
	h.Release()
	st.failLoad = true
	if _, err := m.Restore(context.Background()); !errors.Is(err, ErrStore) {
		t.Fatalf("restore with failing load = %v, want ErrStore", err)
	}
}

func TestRestoreWithoutStore(t *testing.T) {
	m := newTestManager(t, Options{})
	if rep, err := m.Restore(context.Background()); err != nil || rep.Restored != 0 {
		t.Fatalf("Restore without store = %+v, %v", rep, err)
	}
}

func TestMemoryStore(t *testing.T) {
	var s MemoryStore
	ctx := context.Background()
	if recs, err := s.LoadLeases(ctx); err != nil || len(recs) != 0 {
		t.Fatalf("empty store: %v, %v", recs, err)
	}
	r := LeaseRecord{LeaseID: "p/1", Pool: "p", Slots: 1}
	if err := s.PutLease(ctx, r); err != nil {
		t.Fatal(err)
	}
	r.Slots = 2
	if err := s.PutLease(ctx, r); err != nil {
		t.Fatal(err)
	}
	recs, _ := s.LoadLeases(ctx)
	if len(recs) != 1 || recs[0] != r {
		t.Fatalf("after replace: %+v", recs)
	}
	if err := s.DeleteLease(ctx, "missing"); err != nil {
		t.Fatalf("delete of a missing record = %v", err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if s.PutLease(done, r) == nil || s.DeleteLease(done, "p/1") == nil {
		t.Fatal("calls with a done context succeeded")
	}
	if _, err := s.LoadLeases(done); err == nil {
		t.Fatal("load with a done context succeeded")
	}
	if err := s.DeleteLease(ctx, "p/1"); err != nil {
		t.Fatal(err)
	}
	if recs, _ := s.LoadLeases(ctx); len(recs) != 0 {
		t.Fatalf("after delete: %+v", recs)
	}
}

func TestConcurrentRestoresCountOnce(t *testing.T) {
	store := &MemoryStore{}
	ctx := context.Background()
	for i := range 3 {
		store.PutLease(ctx, LeaseRecord{LeaseID: fmt.Sprintf("%s/old-%d", DefaultPool, i), Pool: DefaultPool, TaskID: "w", Slots: 2})
	}
	m := newTestManager(t, Options{Store: store})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := m.Restore(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if st := mustStatus(t, m, DefaultPool); st.Used != 6 {
		t.Fatalf("used %d after concurrent restores, want 6", st.Used)
	}
}

// A heartbeated lease is restored with the TTL it was granted with, not the
// pool's LeaseTTL nor ExpiresAt-GrantedAt (which heartbeats stretch); a
// record without TTL (an older rpd's) falls back to the derivation.
func TestRestoreKeepsGrantedTTL(t *testing.T) {
	clk := newFakeClock()
	st := &faultyStore{}
	setup := func() *Manager {
		m := newTestManager(t, Options{Clock: clk, Store: st})
		if err := m.ConfigurePool(PoolConfig{Name: "p", Slots: 3, LeaseTTL: 5 * time.Minute}); err != nil {
			t.Fatal(err)
		}
		if err := m.CreatePool("q", 1, ""); err != nil {
			t.Fatal(err)
		}
		return m
	}
	old := setup()
	l := mustAcquire(t, old, "p", Request{TaskID: "short", TTL: time.Minute})
	ctx := context.Background()
	clk.Advance(50 * time.Second)
	if err := l.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	rec, ok := st.record(t, l.ID())
	if !ok || rec.TTL != time.Minute {
		t.Fatalf("stored record %+v (found %v), want TTL 1m", rec, ok)
	}
	legacyGrant := clk.Now()
	st.MemoryStore.PutLease(ctx, LeaseRecord{LeaseID: "q/old-1", Pool: "q", TaskID: "legacy", Slots: 1, GrantedAt: legacyGrant, ExpiresAt: legacyGrant.Add(30 * time.Second)})
	clk.Advance(5 * time.Second)

	m := setup()
	if rep, err := m.Restore(ctx); err != nil || rep.Restored != 2 {
		t.Fatalf("Restore = %+v, %v; want 2 restored", rep, err)
	}
	r, err := m.Lease(l.ID())
	if err != nil {
		t.Fatal(err)
	}
	if r.TTL() != time.Minute {
		t.Errorf("restored TTL %v, want the granted 1m (pool LeaseTTL is 5m, expiry-grant is 1m50s)", r.TTL())
	}
	if want := legacyGrant.Add(time.Minute); !r.ExpiresAt().Equal(want) {
		t.Errorf("restored expiry %v, want %v (the heartbeat's)", r.ExpiresAt(), want)
	}
	legacy, err := m.Lease("q/old-1")
	if err != nil {
		t.Fatal(err)
	}
	if legacy.TTL() != 30*time.Second {
		t.Errorf("legacy record's TTL %v, want ExpiresAt-GrantedAt = 30s", legacy.TTL())
	}
	// The restored lease expires on its own schedule: 55s from now.
	clk.Advance(54 * time.Second)
	if !r.Held() {
		t.Fatal("restored lease expired early")
	}
	clk.Advance(time.Second)
	if r.Held() {
		t.Fatal("restored lease outlived its TTL")
	}
}

// RestoreWith spares the holders that had nobody to heartbeat to: a lease
// that ran out after Since and no more than Grace ago, or runs out within
// Grace, is restored until now+Grace; one that ran out before Since (its
// owner was serving then) or longer than Grace ago lapses; one that runs
// out later than now+Grace keeps its expiry.
func TestRestoreWithSparesHoldersWithoutAnOwner(t *testing.T) {
	clk := newFakeClock()
	st := &faultyStore{}
	m := newTestManager(t, Options{Clock: clk, Store: st})
	if err := m.CreatePool("p", 10, ""); err != nil {
		t.Fatal(err)
	}
	now := clk.Now()
	since, grace := now.Add(-10*time.Second), 5*time.Second
	ctx := context.Background()
	recs := map[string]struct {
		expires time.Time
		want    time.Time // zero: lapses
	}{
		"p/before-since":   {now.Add(-11 * time.Second), time.Time{}},
		"p/too-long-ago":   {now.Add(-6 * time.Second), time.Time{}},
		"p/ran-out":        {now.Add(-3 * time.Second), now.Add(grace)},
		"p/runs-out-soon":  {now.Add(time.Second), now.Add(grace)},
		"p/runs-out-later": {now.Add(time.Minute), now.Add(time.Minute)},
	}
	for id, r := range recs {
		st.MemoryStore.PutLease(ctx, LeaseRecord{LeaseID: id, Pool: "p", TaskID: id, Slots: 1, GrantedAt: now.Add(-time.Minute), ExpiresAt: r.expires, TTL: 6 * time.Second})
	}
	rep, err := m.RestoreWith(ctx, RestoreOptions{Since: since, Grace: grace})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Restored != 3 || rep.Expired != 2 || rep.Extended != 2 {
		t.Fatalf("restore report %+v; want 3 restored (2 extended), 2 expired", rep)
	}
	for id, r := range recs {
		l, err := m.Lease(id)
		switch {
		case r.want.IsZero() && err == nil:
			t.Errorf("%s: restored, want it lapsed", id)
		case !r.want.IsZero() && err != nil:
			t.Errorf("%s: %v, want it held", id, err)
		case !r.want.IsZero() && !l.ExpiresAt().Equal(r.want):
			t.Errorf("%s: expires %v, want %v", id, l.ExpiresAt(), r.want)
		}
	}
	// Zero options: every lease keeps its recorded expiry.
	if (RestoreOptions{}).Spares(now, now) {
		t.Fatal("zero RestoreOptions spare a lease")
	}
}

// A lease's owner is recorded with it and restored, and Holders reports it.
func TestOwnerRecordedAndRestored(t *testing.T) {
	st := &faultyStore{}
	setup := func() *Manager {
		m := newTestManager(t, Options{Store: st})
		if err := m.CreatePool("p", 2, ""); err != nil {
			t.Fatal(err)
		}
		return m
	}
	l := mustAcquire(t, setup(), "p", Request{TaskID: "job", Owner: "ci-workers"})
	if got := l.Owner(); got != "ci-workers" {
		t.Fatalf("Owner() = %q; want ci-workers", got)
	}
	if rec, ok := st.record(t, l.ID()); !ok || rec.Owner != "ci-workers" {
		t.Fatalf("stored record %+v (found %v); want owner ci-workers", rec, ok)
	}
	m := setup()
	if _, err := m.Restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	r, err := m.Lease(l.ID())
	if err != nil || r.Owner() != "ci-workers" {
		t.Fatalf("restored lease %v, %v; want owner ci-workers", r, err)
	}
	if h, _, err := m.Holders("p"); err != nil || len(h) != 1 || h[0].Owner != "ci-workers" {
		t.Fatalf("Holders = %+v, %v; want one held by ci-workers", h, err)
	}
	if anon := mustAcquire(t, m, "p", Request{TaskID: "anon"}); anon.Owner() != "" {
		t.Errorf("Owner() of a lease without one = %q; want \"\"", anon.Owner())
	}
}

// A store call without a caller's context gets at least StoreTimeout, and
// at most 1/64 more; the calls of one window share the context.
func TestStoreContextDeadline(t *testing.T) {
	const timeout = time.Hour // a window of ~56 s: two calls in a row share it
	m, err := NewManager(Options{StoreTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		before := time.Now()
		ctx := m.storeContext()
		after := time.Now()
		dl, ok := ctx.Deadline()
		if !ok || dl.Before(before.Add(timeout)) || dl.After(after.Add(timeout+timeout/storeWindows)) {
			t.Fatalf("deadline %v, called between %v and %v with a timeout of %v", dl, before, after, timeout)
		}
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
	}
	if a, b := m.storeContext(), m.storeContext(); a != b {
		t.Error("two calls in one window got two contexts")
	}
}
