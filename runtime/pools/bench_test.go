package pools

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"golang.org/x/sync/semaphore"
)

// BenchmarkAcquireRelease is the uncontended fast path: by pool name, with a
// task ID, released through the Lease.
func BenchmarkAcquireRelease(b *testing.B) {
	m := newBenchManager(b)
	if err := m.CreatePool("bench", 4, ""); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	req := Request{TaskID: "task-1", Priority: 1}
	b.ReportAllocs()
	for b.Loop() {
		l, err := m.Acquire(ctx, "bench", req)
		if err != nil {
			b.Fatal(err)
		}
		l.Release()
	}
}

// BenchmarkXSyncSemaphore is the baseline for BenchmarkAcquireRelease.
func BenchmarkXSyncSemaphore(b *testing.B) {
	s := semaphore.NewWeighted(4)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Acquire(ctx, 1); err != nil {
			b.Fatal(err)
		}
		s.Release(1)
	}
}

func BenchmarkAcquireReleaseParallel(b *testing.B) {
	m := newBenchManager(b)
	if err := m.CreatePool("bench", 1<<20, ""); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := Request{TaskID: "task-p"}
		for pb.Next() {
			l, err := m.Acquire(ctx, "bench", req)
			if err != nil {
				b.Error(err)
				return
			}
			l.Release()
		}
	})
}

// BenchmarkHandoff100k measures one release → grant of the next of n queued
// waiters (random priorities) in a one-slot pool. Each iteration also queues
// one new waiter, so n stays constant; both steps are O(log n). Waiters are
// queued directly (no goroutine each), so goroutine wake-up is not included.
func BenchmarkHandoff100k(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("waiters=%d", n), func(b *testing.B) { benchHandoff(b, n) })
	}
}

func benchHandoff(b *testing.B, n int) {
	m := newBenchManager(b)
	if err := m.CreatePool("handoff", 1, ""); err != nil {
		b.Fatal(err)
	}
	p := m.lookup("handoff")
	holder, err := m.Acquire(context.Background(), "handoff", Request{TaskID: "first"})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	enqueue := func() {
		p.mu.Lock()
		p.seq++
		l := &Lease{p: p, priority: rng.IntN(1000), slots: 1, seq: p.seq, index: -1}
		p.enqueueLocked(l)
		p.mu.Unlock()
	}
	for range n {
		enqueue()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p.mu.Lock()
		next := p.waiters[0]
		p.mu.Unlock()
		holder.Release()
		if next.state != granted {
			b.Fatal("head of the queue was not granted")
		}
		holder = next.lease
		enqueue()
	}
}

func newBenchManager(b *testing.B) *Manager {
	b.Helper()
	m, err := NewManager(Options{})
	if err != nil {
		b.Fatal(err)
	}
	return m
}
