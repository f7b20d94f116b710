package pools

import (
	"context"
	"log/slog"
	"runtime"
	"time"
)

// testWait bounds every wait in these tests.
const testWait = 5 * time.Second

// tb is what the helpers need of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

type result struct {
	lease *Lease
	err   error
}

func newTestManager(t tb, opts Options) *Manager {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := NewManager(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// acquireAsync runs Acquire in a goroutine; the result arrives on the channel.
func acquireAsync(ctx context.Context, m *Manager, pool string, req Request) <-chan result {
	ch := make(chan result, 1)
	go func() {
		l, err := m.Acquire(ctx, pool, req)
		ch <- result{l, err}
	}()
	return ch
}

// waitQueued waits until the pool has n queued requests.
func waitQueued(t tb, m *Manager, pool string, n int) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for i := 0; ; {
		st, err := m.PoolStatus(pool)
		if err != nil {
			t.Fatal(err)
		}
		if st.Queued == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool %q: %d queued after %v, want %d", pool, st.Queued, testWait, n)
		}
		if i++; i < 100 {
			runtime.Gosched()
		} else {
			time.Sleep(100 * time.Microsecond)
		}
	}
}

func mustGet(t tb, ch <-chan result) *Lease {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("acquire: %v", r.err)
		}
		return r.lease
	case <-time.After(testWait):
		t.Fatalf("acquire not granted within %v", testWait)
		return nil
	}
}

func mustFail(t tb, ch <-chan result) error {
	t.Helper()
	select {
	case r := <-ch:
		if r.err == nil {
			t.Fatalf("acquire granted %+v, want an error", r.lease)
		}
		return r.err
	case <-time.After(testWait):
		t.Fatalf("acquire did not finish within %v", testWait)
		return nil
	}
}

// mustPend checks that ch has no result yet (the request is queued, which
// waitQueued established before).
func mustPend(t tb, ch <-chan result) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("request finished (lease %v, err %v), want it still queued", r.lease, r.err)
	default:
	}
}

func mustAcquire(t tb, m *Manager, pool string, req Request) *Lease {
	t.Helper()
	l, err := m.Acquire(context.Background(), pool, req)
	if err != nil {
		t.Fatalf("Acquire(%q, %+v): %v", pool, req, err)
	}
	return l
}

func mustStatus(t tb, m *Manager, pool string) PoolStatus {
	t.Helper()
	st, err := m.PoolStatus(pool)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
