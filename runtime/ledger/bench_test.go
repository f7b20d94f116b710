package ledger

import (
	"context"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"
)

// benchLedger returns an immediate-mode ledger on the wall clock with a fresh
// figure and room to spare, so every request is granted at once.
func benchLedger(b *testing.B) *Ledger {
	b.Helper()
	l, err := New(Config{Max: 1 << 20, Grant: GrantImmediate, StaleAfter: time.Hour, ClaimTTL: 2 * time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	if err := l.ObserveUsage(0, time.Time{}); err != nil {
		b.Fatal(err)
	}
	return l
}

// BenchmarkRequestRelease: one uncontended grant and cancel.
func BenchmarkRequestRelease(b *testing.B) {
	l := benchLedger(b)
	ctx := context.Background()
	req := Request{WorkerID: "bench", Count: 1}
	b.ReportAllocs()
	for b.Loop() {
		c, err := l.Request(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		c.Cancel()
	}
}

// BenchmarkTryRequestRelease: the same through the non-blocking path.
func BenchmarkTryRequestRelease(b *testing.B) {
	l := benchLedger(b)
	req := Request{WorkerID: "bench", Count: 1}
	b.ReportAllocs()
	for b.Loop() {
		c, err := l.TryRequest(req)
		if err != nil {
			b.Fatal(err)
		}
		c.Cancel()
	}
}

// BenchmarkRequestParallel: grant and cancel from every P at once.
func BenchmarkRequestParallel(b *testing.B) {
	l := benchLedger(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := Request{WorkerID: "bench", Count: 1}
		for pb.Next() {
			c, err := l.Request(ctx, req)
			if err != nil {
				b.Error(err)
				return
			}
			c.Cancel()
		}
	})
}

// Baselines measured in the same run: the cheapest possible counting
// primitives, for the ratio in the report.

func BenchmarkBaselineSemaphore(b *testing.B) {
	s := semaphore.NewWeighted(1 << 20)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Acquire(ctx, 1); err != nil {
			b.Fatal(err)
		}
		s.Release(1)
	}
}

func BenchmarkBaselineSemaphoreParallel(b *testing.B) {
	s := semaphore.NewWeighted(1 << 20)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := s.Acquire(ctx, 1); err != nil {
				b.Error(err)
				return
			}
			s.Release(1)
		}
	})
}

// BenchmarkBaselineMutexTimeNow is two lock/unlock pairs and a clock read:
// the floor of any grant+cancel that checks time under a lock.
func BenchmarkBaselineMutexTimeNow(b *testing.B) {
	var mu sync.Mutex
	var n int
	var last time.Time
	for b.Loop() {
		mu.Lock()
		last = time.Now()
		n++
		mu.Unlock()
		mu.Lock()
		n--
		mu.Unlock()
	}
	_ = last
}
