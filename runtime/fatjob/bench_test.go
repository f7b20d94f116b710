package fatjob

import (
	"context"
	"sync/atomic"
	"testing"
)

var benchRequest = Request{ScanRingBytes: 50 << 20, DeltaCacheBytes: 100 << 20, NeedsSpillSlot: true}

func benchPool(b *testing.B) *Pool {
	b.Helper()
	p, err := New(DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkTryAcquireRelease: try-acquire and release one 3-resource permit
// (scan ring, delta cache, limited spill slot), one goroutine.
func BenchmarkTryAcquireRelease(b *testing.B) {
	p := benchPool(b)
	b.ReportAllocs()
	for b.Loop() {
		perm, ok := p.TryAcquire(benchRequest)
		if !ok {
			b.Fatal("TryAcquire failed on an idle pool")
		}
		perm.Release()
	}
}

// BenchmarkTryAcquireReleaseHeld: as BenchmarkTryAcquireRelease, but the
// permit outlives the call that acquired it (it is kept in a ring of 8 and
// released 8 grants later), so it is allocated on the heap: the cost for a
// caller that hands its permit to another goroutine or keeps it in a map.
func BenchmarkTryAcquireReleaseHeld(b *testing.B) {
	p := benchPool(b)
	var held [8]*Permit
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		held[i].Release() // nil for the first 8: a no-op
		perm, ok := p.TryAcquire(Request{ScanRingBytes: 1 << 20, DeltaCacheBytes: 1 << 20, NeedsSpillSlot: true})
		if !ok {
			b.Fatal("TryAcquire failed with 8 small permits held")
		}
		held[i] = perm
		i = (i + 1) % len(held)
	}
	for _, perm := range held {
		perm.Release()
	}
}

// rawCAS3 is the baseline: the same three budgets as bare atomic counters,
// with no permit object, no queue and no statistics.
type rawCAS3 struct{ scan, delta, spill atomic.Int64 }

func rawTake(a *atomic.Int64, n int64) bool {
	for {
		cur := a.Load()
		if cur < n {
			return false
		}
		if a.CompareAndSwap(cur, cur-n) {
			return true
		}
	}
}

func (r *rawCAS3) acquire(scan, delta int64) bool {
	if !rawTake(&r.scan, scan) {
		return false
	}
	if !rawTake(&r.delta, delta) {
		r.scan.Add(scan)
		return false
	}
	if !rawTake(&r.spill, 1) {
		r.scan.Add(scan)
		r.delta.Add(delta)
		return false
	}
	return true
}

func (r *rawCAS3) release(scan, delta int64) {
	r.scan.Add(scan)
	r.delta.Add(delta)
	r.spill.Add(1)
}

// BenchmarkRawCAS3 is the same-run baseline of BenchmarkTryAcquireRelease.
func BenchmarkRawCAS3(b *testing.B) {
	var r rawCAS3
	r.scan.Store(int64(DefaultScanRingBytes))
	r.delta.Store(int64(DefaultDeltaCacheBytes))
	r.spill.Store(DefaultSpillSlots)
	scan, delta := int64(benchRequest.ScanRingBytes), int64(benchRequest.DeltaCacheBytes)
	b.ReportAllocs()
	for b.Loop() {
		if !r.acquire(scan, delta) {
			b.Fatal("acquire failed on idle counters")
		}
		r.release(scan, delta)
	}
}

// BenchmarkTryAcquireReleaseParallel: as BenchmarkTryAcquireRelease from
// GOMAXPROCS goroutines; a failed TryAcquire (pool momentarily full) counts
// as an iteration too.
func BenchmarkTryAcquireReleaseParallel(b *testing.B) {
	p := benchPool(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if perm, ok := p.TryAcquire(benchRequest); ok {
				perm.Release()
			}
		}
	})
}

// BenchmarkAcquireContended: blocking Acquire and Release from 4×GOMAXPROCS
// goroutines on a pool that fits only 2 requests at a time.
func BenchmarkAcquireContended(b *testing.B) {
	p, err := New(Config{ScanRingBytes: 2 * benchRequest.ScanRingBytes, DeltaCacheBytes: 4 * benchRequest.DeltaCacheBytes, SpillSlots: LimitedSpill(8)})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			perm, err := p.Acquire(ctx, benchRequest)
			if err != nil {
				b.Error(err)
				return
			}
			perm.Release()
		}
	})
	if s := p.Stats(); s.ScanRingInUse != 0 || s.Queued != 0 {
		b.Fatalf("pool not back to full after the run: %+v", s)
	}
}
