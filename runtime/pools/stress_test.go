package pools

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestStressInvariants hammers two pools from many goroutines, some of which
// cancel while waiting, and checks: held slots never exceed the total (seen
// by the holders themselves and by a status poller), every request that is
// not cancelled is eventually granted (no lost wake-up: a request still
// waiting after testWait fails the test), and releasing everything returns
// each pool to full with consistent counters.
func TestStressInvariants(t *testing.T) {
	m := newTestManager(t, Options{})
	totals := map[string]int{"a": 3, "b": 5}
	inUse := map[string]*atomic.Int64{"a": {}, "b": {}}
	for name, n := range totals {
		if err := m.CreatePool(name, n, ""); err != nil {
			t.Fatal(err)
		}
	}
	const workers, rounds = 16, 150
	var attempts, cancels atomic.Int64
	stop := make(chan struct{})
	var pollErr atomic.Value
	pollDone := make(chan struct{})
	go func() { // status poller
		defer close(pollDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, st := range m.ListPools() {
				if st.Used > st.Total || st.Available < 0 || st.Available != max(st.Total-st.Used, 0) {
					pollErr.Store(st)
				}
			}
			runtime.Gosched()
		}
	}()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range rounds {
				name := []string{"a", "b"}[rng.IntN(2)]
				req := Request{TaskID: "t", Priority: rng.IntN(4), Slots: 1 + rng.IntN(2)}
				ctx, cancel := context.WithTimeout(context.Background(), testWait)
				willCancel := rng.IntN(5) == 0
				if willCancel {
					spins := rng.IntN(3)
					go func() {
						for range spins {
							runtime.Gosched()
						}
						cancel()
					}()
				}
				attempts.Add(1)
				l, err := m.Acquire(ctx, name, req)
				switch {
				case err == nil:
				case willCancel && errors.Is(err, context.Canceled):
					cancels.Add(1)
					cancel()
					continue
				default:
					t.Errorf("acquire %+v in %s: %v (lost wake-up?)", req, name, err)
					cancel()
					return
				}
				if n := inUse[name].Add(int64(l.Slots())); n > int64(totals[name]) {
					t.Errorf("pool %s: %d slots held, total %d", name, n, totals[name])
				}
				runtime.Gosched()
				inUse[name].Add(-int64(l.Slots()))
				if err := l.Release(); err != nil {
					t.Error(err)
				}
				cancel()
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-pollDone
	if st := pollErr.Load(); st != nil {
		t.Fatalf("status poller saw %+v", st)
	}
	var granted, released, cancelled uint64
	for _, st := range m.ListPools() {
		if st.Used != 0 || st.Queued != 0 || st.QueuedSlots != 0 || st.Available != st.Total {
			t.Errorf("pool %s not back to full: %+v", st.Name, st)
		}
		granted += st.Stats.Granted
		released += st.Stats.Released
		cancelled += st.Stats.Cancelled
	}
	t.Logf("%d acquires, %d cancelled", attempts.Load(), cancelled)
	if cancelled == 0 {
		t.Error("no request was cancelled; the test exercised nothing of cancellation")
	}
	if granted != released || granted+cancelled != uint64(attempts.Load()) || cancelled != uint64(cancels.Load()) {
		t.Fatalf("granted %d released %d cancelled %d; attempts %d cancels seen %d", granted, released, cancelled, attempts.Load(), cancels.Load())
	}
}

// TestStressGrantOrder queues many goroutines at once behind one held slot;
// once the slot is released they must be granted in exactly (priority desc,
// arrival asc) order, arrival being the order the pool queued them in.
func TestStressGrantOrder(t *testing.T) {
	for round := range 3 {
		m := newTestManager(t, Options{})
		if err := m.CreatePool("p", 1, ""); err != nil {
			t.Fatal(err)
		}
		held := mustAcquire(t, m, "p", Request{TaskID: "held"})
		const n = 200
		rng := rand.New(rand.NewPCG(uint64(round), 11))
		var mu sync.Mutex
		var order []*Lease
		var wg sync.WaitGroup
		for range n {
			prio := rng.IntN(10)
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), testWait)
				defer cancel()
				l, err := m.Acquire(ctx, "p", Request{TaskID: "w", Priority: prio})
				if err != nil {
					t.Errorf("lost wake-up: %v", err)
					return
				}
				mu.Lock()
				order = append(order, l)
				mu.Unlock()
				l.Release()
			}()
		}
		waitQueued(t, m, "p", n)
		held.Release()
		wg.Wait()
		if len(order) != n {
			t.Fatalf("%d of %d granted", len(order), n)
		}
		for i := 1; i < n; i++ {
			a, b := order[i-1], order[i]
			if a.priority < b.priority || a.priority == b.priority && a.seq > b.seq {
				t.Fatalf("round %d: grant %d (priority %d, arrival %d) before grant %d (priority %d, arrival %d)",
					round, i-1, a.priority, a.seq, i, b.priority, b.seq)
			}
		}
		if st := mustStatus(t, m, "p"); st.Used != 0 || st.Available != 1 {
			t.Fatalf("not back to full: %+v", st)
		}
	}
}

// TestStressResize resizes a pool back and forth (4 ↔ 2 slots) while
// requests of 1–2 slots come and go: no request is lost (each is granted
// within testWait, none fails since none exceeds 2 slots), Available never
// goes negative, held slots never exceed the largest size, and the pool ends
// full at its final size.
func TestStressResize(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.CreatePool("p", 4, ""); err != nil {
		t.Fatal(err)
	}
	var inUse atomic.Int64
	stop := make(chan struct{})
	resized := make(chan int)
	go func() {
		n := 0
		for size := 2; ; size = 6 - size {
			select {
			case <-stop:
				resized <- n
				return
			default:
			}
			if err := m.UpdatePool("p", size); err != nil {
				t.Error(err)
			}
			if st, err := m.PoolStatus("p"); err != nil || st.Available < 0 {
				t.Errorf("status %+v, %v", st, err)
			}
			n++
			runtime.Gosched()
		}
	}()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			for range 150 {
				ctx, cancel := context.WithTimeout(context.Background(), testWait)
				l, err := m.Acquire(ctx, "p", Request{Priority: rng.IntN(3), Slots: 1 + rng.IntN(2)})
				cancel()
				if err != nil {
					t.Errorf("acquire: %v", err)
					return
				}
				if n := inUse.Add(int64(l.Slots())); n > 4 {
					t.Errorf("%d slots held, the pool never had more than 4", n)
				}
				runtime.Gosched()
				inUse.Add(-int64(l.Slots()))
				l.Release()
			}
		}()
	}
	wg.Wait()
	close(stop)
	t.Logf("%d resizes", <-resized)
	st := mustStatus(t, m, "p")
	if st.Used != 0 || st.Queued != 0 || st.Available != st.Total || st.Stats.Granted != 8*150 {
		t.Fatalf("at the end: %+v", st)
	}
}

// TestStressStoreNoResurrection races heartbeats of each lease (from a
// second goroutine) against its release: a heartbeat's PutLease must never
// land after the release's DeleteLease, so the store ends empty.
func TestStressStoreNoResurrection(t *testing.T) {
	store := &slowPutStore{}
	m := newTestManager(t, Options{Store: store})
	if err := m.ConfigurePool(PoolConfig{Name: "p", Slots: 4, LeaseTTL: testWait}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				l, err := m.Acquire(ctx, "p", Request{TaskID: "t"})
				if err != nil {
					t.Error(err)
					return
				}
				beat := make(chan struct{})
				go func() {
					defer close(beat)
					for range 3 {
						err := l.Heartbeat(ctx)
						if err != nil && !errors.Is(err, ErrLeaseReleased) {
							t.Error(err)
						}
					}
				}()
				runtime.Gosched()
				if err := l.Release(); err != nil {
					t.Error(err)
				}
				<-beat
			}
		}()
	}
	wg.Wait()
	recs, err := store.LoadLeases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 0 {
		t.Fatalf("store after every release: %d record(s), e.g. %+v", len(recs), recs[0])
	}
	if st := mustStatus(t, m, "p"); st.Used != 0 || st.Stats.Granted != 800 {
		t.Fatalf("at the end: %+v", st)
	}
}

// slowPutStore yields before each write, widening the window in which a
// heartbeat's write could overtake a release's delete.
type slowPutStore struct{ MemoryStore }

func (s *slowPutStore) PutLease(ctx context.Context, rec LeaseRecord) error {
	for range 3 {
		runtime.Gosched()
	}
	return s.MemoryStore.PutLease(ctx, rec)
}
