package pools

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
)

func TestHolders(t *testing.T) {
	clock := newFakeClock()
	m := newTestManager(t, Options{Clock: clock})
	if err := m.ConfigurePool(PoolConfig{Name: "db", Slots: 3}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Holders("nope"); !errors.Is(err, ErrUnknownPool) {
		t.Fatalf("Holders(nope) = %v, want ErrUnknownPool", err)
	}
	hs, qs, err := m.Holders("db")
	if err != nil || len(hs) != 0 || len(qs) != 0 {
		t.Fatalf("idle pool: holders %v, queued %v, err %v; want none", hs, qs, err)
	}

	start := clock.Now()
	a := mustAcquire(t, m, "db", Request{TaskID: "a", Slots: 2, Priority: 1, TTL: time.Minute})
	clock.Advance(10 * time.Second)
	mustAcquire(t, m, "db", Request{TaskID: "b", TTL: time.Minute})
	clock.Advance(5 * time.Second)
	if err := a.Heartbeat(context.Background()); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	acquireAsync(ctx, m, "db", Request{TaskID: "w1", Priority: 5, Slots: 1})
	waitQueued(t, m, "db", 1)
	clock.Advance(3 * time.Second)
	acquireAsync(ctx, m, "db", Request{TaskID: "w2", Priority: 5, Slots: 2})
	waitQueued(t, m, "db", 2)
	acquireAsync(ctx, m, "db", Request{TaskID: "w3", Priority: -1, Slots: 1})
	waitQueued(t, m, "db", 3)

	hs, qs, err = m.Holders("db")
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 2 {
		t.Fatalf("got %d holders, want 2: %+v", len(hs), hs)
	}
	ha, hb := hs[0], hs[1]
	if ha.TaskID != "a" || ha.Slots != 2 || ha.Priority != 1 || ha.ID != a.ID() {
		t.Errorf("first holder = %+v, want task a (2 slots, priority 1, ID %s)", ha, a.ID())
	}
	if !ha.GrantedAt.Equal(start) || !ha.RenewedAt.Equal(start.Add(15*time.Second)) || !ha.ExpiresAt.Equal(start.Add(75*time.Second)) {
		t.Errorf("holder a: granted %v renewed %v expires %v; want %v, +15s, +75s", ha.GrantedAt, ha.RenewedAt, ha.ExpiresAt, start)
	}
	if hb.TaskID != "b" || !hb.RenewedAt.Equal(hb.GrantedAt) || !hb.GrantedAt.Equal(start.Add(10*time.Second)) {
		t.Errorf("holder b = %+v: want granted at +10s and never renewed", hb)
	}
	want := []QueuedPriority{{Priority: 5, Requests: 2, Slots: 3, Oldest: 3 * time.Second, TaskIDs: []string{"w1", "w2"}}, {Priority: -1, Requests: 1, Slots: 1, TaskIDs: []string{"w3"}}}
	if len(qs) != len(want) {
		t.Fatalf("queued = %+v, want %+v", qs, want)
	}
	for i := range want {
		if !reflect.DeepEqual(qs[i], want[i]) {
			t.Errorf("queued[%d] = %+v, want %+v", i, qs[i], want[i])
		}
	}

	// A released holder leaves the list; a store-less lease without a TTL
	// still gets an ID that Lease finds.
	aID := a.ID()
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	cancel()
	waitQueued(t, m, "db", 0)
	hs, _, _ = m.Holders("db")
	for _, h := range hs {
		if h.TaskID == "a" {
			t.Fatalf("released lease still listed: %+v", hs)
		}
		if l, err := m.Lease(h.ID); err != nil || l.TaskID() != h.TaskID {
			t.Fatalf("Lease(%q) = %v, %v; want the holder of task %s", h.ID, l, err, h.TaskID)
		}
		if l, ok := m.Held(h.ID); !ok || l.TaskID() != h.TaskID {
			t.Fatalf("Held(%q) = %v, %v; want the holder of task %s", h.ID, l, ok, h.TaskID)
		}
	}
	// A released lease is neither found nor held.
	if _, err := m.Lease(aID); !errors.Is(err, ErrUnknownLease) {
		t.Fatalf("Lease of the released lease: %v; want ErrUnknownLease", err)
	}
	if l, ok := m.Held(aID); ok {
		t.Fatalf("Held of the released lease = %v, true", l)
	}
}

// With more waiters than MaxListedWaiters, the first ones (in the order
// they are served) are named.
func TestHoldersNamesTheFirstWaiters(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.ConfigurePool(PoolConfig{Name: "db", Slots: 1}); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, m, "db", Request{TaskID: "holder"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range MaxListedWaiters + 5 {
		acquireAsync(ctx, m, "db", Request{TaskID: fmt.Sprintf("w%02d", i)})
		waitQueued(t, m, "db", i+1)
	}
	_, qs, err := m.Holders("db")
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 1 || qs[0].Requests != MaxListedWaiters+5 || len(qs[0].TaskIDs) != MaxListedWaiters || qs[0].TaskIDs[0] != "w00" || qs[0].TaskIDs[MaxListedWaiters-1] != fmt.Sprintf("w%02d", MaxListedWaiters-1) {
		t.Fatalf("queued = %+v; want %d requests naming w00..w%02d", qs, MaxListedWaiters+5, MaxListedWaiters-1)
	}
}

// Record says what the accessors say, with and without a Store, TTL or ID.
func TestLeaseRecordIsTheAccessors(t *testing.T) {
	for _, opts := range []Options{{}, {Store: &MemoryStore{}}} {
		m := newTestManager(t, opts)
		for _, req := range []Request{
			{TaskID: "plain"},
			{TaskID: "ttl", Priority: 3, Slots: 2, TTL: time.Minute, Owner: "alice"},
			{TaskID: "id", ID: DefaultPool + "/r-fixed"},
		} {
			l := mustAcquire(t, m, "", req)
			rec := l.Record()
			want := LeaseRecord{LeaseID: l.ID(), Pool: l.Pool(), TaskID: l.TaskID(), Priority: l.Priority(), Slots: l.Slots(),
				ExpiresAt: l.ExpiresAt(), TTL: l.TTL(), Owner: l.Owner(), GrantedAt: rec.GrantedAt}
			if rec != want {
				t.Errorf("store %v, request %+v: Record %+v, accessors %+v", opts.Store != nil, req, rec, want)
			}
			if err := l.Release(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
