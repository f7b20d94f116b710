package fatjob

import (
	"context"
	"testing"
)

// A permit that does not outlive its caller's frame costs no allocation
// (TryAcquire and Acquire are inlined, so escape analysis places it on the
// caller's stack), and one that is kept costs exactly one: the permit. This
// guards the inlining budget of TryAcquire and Acquire.
func TestPermitAllocations(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation changes inlining")
	}
	if testing.AllocsPerRun(10, func() { sink = *newInt() }) != 0 {
		t.Skip("the compiler does not inline here (-gcflags=-l?)")
	}
	p := newPool(t, DefaultConfig())
	r := Request{ScanRingBytes: 1 << 20, DeltaCacheBytes: 1 << 20, NeedsSpillSlot: true}
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		perm, ok := p.TryAcquire(r)
		if !ok {
			panic("TryAcquire failed on an idle pool")
		}
		perm.Release()
	}); n != 0 {
		t.Errorf("TryAcquire+Release of an unkept permit: %v allocs, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		perm, err := p.Acquire(ctx, r)
		if err != nil {
			panic(err)
		}
		perm.Release()
	}); n != 0 {
		t.Errorf("Acquire+Release of an unkept permit: %v allocs, want 0", n)
	}
	var kept *Permit
	if n := testing.AllocsPerRun(100, func() {
		perm, ok := p.TryAcquire(r)
		if !ok {
			panic("TryAcquire failed on an idle pool")
		}
		kept = perm
		kept.Release()
	}); n != 1 {
		t.Errorf("TryAcquire+Release of a kept permit: %v allocs, want 1", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		if _, ok := p.TryAcquire(Request{ScanRingBytes: DefaultScanRingBytes + 1}); ok {
			panic("TryAcquire granted more than the total")
		}
	}); n != 0 {
		t.Errorf("a denied TryAcquire: %v allocs, want 0", n)
	}
}

var sink int

// newInt allocates unless it is inlined.
func newInt() *int { return new(int) }
