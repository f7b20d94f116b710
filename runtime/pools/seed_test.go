package pools

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// The seed's test list, Go-cased.

func TestAcquireNSlotsThenNextWaits(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.CreatePool("db", 3, "three at a time"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		mustAcquire(t, m, "db", Request{TaskID: string(rune('a' + i))})
	}
	next := acquireAsync(context.Background(), m, "db", Request{TaskID: "d"})
	waitQueued(t, m, "db", 1)
	mustPend(t, next)
}

func TestReleaseResolvesWaiter(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.CreatePool("db", 1, ""); err != nil {
		t.Fatal(err)
	}
	held := mustAcquire(t, m, "db", Request{TaskID: "a"})
	next := acquireAsync(context.Background(), m, "db", Request{TaskID: "b"})
	waitQueued(t, m, "db", 1)
	if err := held.Release(); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, next).TaskID(); got != "b" {
		t.Fatalf("granted %q, want b", got)
	}
}

// grantOrder queues reqs one after another behind a held single slot, then
// releases it; each granted request records itself and releases at once, so
// the record is the grant order.
func grantOrder(t *testing.T, reqs []Request) []string {
	t.Helper()
	m := newTestManager(t, Options{})
	if err := m.CreatePool("p", 1, ""); err != nil {
		t.Fatal(err)
	}
	held := mustAcquire(t, m, "p", Request{TaskID: "holder"})
	order := make(chan string, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := m.Acquire(context.Background(), "p", r)
			if err != nil {
				t.Errorf("task %s: %v", r.TaskID, err)
				return
			}
			order <- l.TaskID()
			l.Release()
		}()
		waitQueued(t, m, "p", i+1)
	}
	if err := held.Release(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(order)
	var got []string
	for id := range order {
		got = append(got, id)
	}
	return got
}

func TestPriorityOrdering(t *testing.T) {
	got := grantOrder(t, []Request{
		{TaskID: "low", Priority: 1},
		{TaskID: "high", Priority: 10},
		{TaskID: "mid", Priority: 5},
		{TaskID: "negative", Priority: -3},
	})
	want := []string{"high", "mid", "low", "negative"}
	if !slices.Equal(got, want) {
		t.Fatalf("grant order %v, want %v", got, want)
	}
}

func TestFIFOForSamePriority(t *testing.T) {
	got := grantOrder(t, []Request{
		{TaskID: "first", Priority: 5},
		{TaskID: "second", Priority: 5},
		{TaskID: "third", Priority: 5},
		{TaskID: "fourth", Priority: 5},
	})
	want := []string{"first", "second", "third", "fourth"}
	if !slices.Equal(got, want) {
		t.Fatalf("grant order %v, want %v", got, want)
	}
}

func TestDefaultPoolSize(t *testing.T) {
	for _, tc := range []struct {
		name  string
		slots int
		want  int
	}{
		{"default", 0, 16},
		{"configured", 4, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestManager(t, Options{DefaultPoolSlots: tc.slots})
			st := mustStatus(t, m, DefaultPool)
			if st.Total != tc.want || st.Available != tc.want {
				t.Fatalf("default pool total %d available %d, want %d", st.Total, st.Available, tc.want)
			}
			// An acquire that names no pool uses it.
			l := mustAcquire(t, m, "", Request{TaskID: "t"})
			if l.Pool() != DefaultPool {
				t.Fatalf("lease pool %q, want %q", l.Pool(), DefaultPool)
			}
			if st := mustStatus(t, m, DefaultPool); st.Used != 1 {
				t.Fatalf("default pool used %d, want 1", st.Used)
			}
		})
	}
	if _, err := NewManager(Options{DefaultPoolSlots: -1}); !errors.Is(err, ErrInvalidPool) {
		t.Fatalf("NewManager(-1 slots) = %v, want ErrInvalidPool", err)
	}
}

func TestDeletePoolWithActiveSlots(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.CreatePool("db", 2, ""); err != nil {
		t.Fatal(err)
	}
	l := mustAcquire(t, m, "db", Request{TaskID: "a"})
	if err := m.DeletePool("db"); !errors.Is(err, ErrPoolInUse) {
		t.Fatalf("DeletePool with a holder = %v, want ErrPoolInUse", err)
	}
	if st := mustStatus(t, m, "db"); st.Used != 1 {
		t.Fatalf("failed delete changed the pool: used %d", st.Used)
	}
	l.Release()
	if err := m.DeletePool("db"); err != nil {
		t.Fatalf("DeletePool when idle: %v", err)
	}
	if _, err := m.PoolStatus("db"); !errors.Is(err, ErrUnknownPool) {
		t.Fatalf("status of deleted pool = %v, want ErrUnknownPool", err)
	}
	if _, err := m.Acquire(context.Background(), "db", Request{}); !errors.Is(err, ErrUnknownPool) {
		t.Fatalf("acquire in deleted pool = %v, want ErrUnknownPool", err)
	}
}

func TestPoolStatusCounts(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.CreatePool("db", 3, "database"); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, m, "db", Request{TaskID: "a", Slots: 2})
	mustAcquire(t, m, "db", Request{TaskID: "b"})
	acquireAsync(context.Background(), m, "db", Request{TaskID: "c", Slots: 2})
	waitQueued(t, m, "db", 1)
	acquireAsync(context.Background(), m, "db", Request{TaskID: "d"})
	waitQueued(t, m, "db", 2)
	st := mustStatus(t, m, "db")
	got := [6]any{st.Name, st.Description, st.Total, st.Used, st.Available, st.Queued}
	want := [6]any{"db", "database", 3, 3, 0, 2}
	if got != want {
		t.Fatalf("status %v, want %v", got, want)
	}
	if st.QueuedSlots != 3 {
		t.Fatalf("queued slots %d, want 3", st.QueuedSlots)
	}
	m.Release("db", "a")
	m.Release("db", "b")
	m.Release("db", "c")
	m.Release("db", "d")
}

// The seed's integration tests: 4 tasks sharing a 2-slot pool never run more
// than 2 at a time.
func TestFourTasksShareTwoSlotPool(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.CreatePool("shared", 2, ""); err != nil {
		t.Fatal(err)
	}
	var running, peak atomic.Int32
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := m.Acquire(context.Background(), "shared", Request{TaskID: string(rune('a' + i))})
			if err != nil {
				t.Error(err)
				return
			}
			n := running.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			<-gate
			running.Add(-1)
			l.Release()
		}()
	}
	waitQueued(t, m, "shared", 2)
	if st := mustStatus(t, m, "shared"); st.Used != 2 {
		t.Fatalf("used %d, want 2 with two tasks waiting", st.Used)
	}
	close(gate)
	wg.Wait()
	if p := peak.Load(); p != 2 {
		t.Fatalf("peak concurrency %d, want 2", p)
	}
	if st := mustStatus(t, m, "shared"); st.Used != 0 || st.Available != 2 {
		t.Fatalf("after all released: %+v", st)
	}
}

func TestHigherPriorityOvertakesQueuedNotRunning(t *testing.T) {
	m := newTestManager(t, Options{})
	if err := m.CreatePool("p", 1, ""); err != nil {
		t.Fatal(err)
	}
	running := mustAcquire(t, m, "p", Request{TaskID: "running", Priority: 1})
	low := acquireAsync(context.Background(), m, "p", Request{TaskID: "low", Priority: 1})
	waitQueued(t, m, "p", 1)
	high := acquireAsync(context.Background(), m, "p", Request{TaskID: "high", Priority: 100})
	waitQueued(t, m, "p", 2)
	// Not preempted: the running task keeps its slot.
	if !running.Held() {
		t.Fatal("a higher-priority request preempted the running lease")
	}
	mustPend(t, high)
	running.Release()
	h := mustGet(t, high)
	mustPend(t, low)
	h.Release()
	mustGet(t, low).Release()
}
