package pools

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// testWait bounds every wait in these tests.
const testWait = 5 * time.Second

type result struct {
	lease *Lease
	err   error
}

func newTestManager(t testing.TB, opts Options) *Manager {
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
func waitQueued(t testing.TB, m *Manager, pool string, n int) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for {
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
		time.Sleep(time.Millisecond)
	}
}

func mustGet(t testing.TB, ch <-chan result) *Lease {
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

func mustFail(t testing.TB, ch <-chan result) error {
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
func mustPend(t testing.TB, ch <-chan result) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("request finished (lease %v, err %v), want it still queued", r.lease, r.err)
	default:
	}
}

func mustAcquire(t testing.TB, m *Manager, pool string, req Request) *Lease {
	t.Helper()
	l, err := m.Acquire(context.Background(), pool, req)
	if err != nil {
		t.Fatalf("Acquire(%q, %+v): %v", pool, req, err)
	}
	return l
}

func mustStatus(t testing.TB, m *Manager, pool string) PoolStatus {
	t.Helper()
	st, err := m.PoolStatus(pool)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
