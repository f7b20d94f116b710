package fatjob

import (
	"context"
	"errors"
	"testing"
)

func TestReconfigureGrowWakesWaiters(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 100, DeltaCacheBytes: 100, SpillSlots: LimitedSpill(1)})
	hold := mustAcquire(t, p, Request{ScanRingBytes: 100, NeedsSpillSlot: true})
	a := acquireAsync(t, context.Background(), p, Request{ScanRingBytes: 50, NeedsSpillSlot: true}, 1)
	b := acquireAsync(t, context.Background(), p, Request{ScanRingBytes: 50}, 2)
	if err := p.Reconfigure(Config{ScanRingBytes: 200, DeltaCacheBytes: 100, SpillSlots: LimitedSpill(2)}); err != nil {
		t.Fatal(err)
	}
	ra, rb := receive(t, a), receive(t, b)
	if ra.err != nil || rb.err != nil {
		t.Fatal(ra.err, rb.err)
	}
	wantAvailable(t, p, 0, 100, 0)
	for _, perm := range []*Permit{hold, ra.perm, rb.perm} {
		perm.Release()
	}
	wantAvailable(t, p, 200, 100, 2)
	if p.ScanRingTotal() != 200 {
		t.Errorf("ScanRingTotal() = %d, want 200", p.ScanRingTotal())
	}
}

func TestReconfigureShrinkNeverRevokes(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 200, DeltaCacheBytes: 200, SpillSlots: LimitedSpill(3)})
	held := mustAcquire(t, p, Request{ScanRingBytes: 150, DeltaCacheBytes: 50, NeedsSpillSlot: true})
	held2 := mustAcquire(t, p, Request{NeedsSpillSlot: true})
	if err := p.Reconfigure(Config{ScanRingBytes: 100, DeltaCacheBytes: 100, SpillSlots: LimitedSpill(1)}); err != nil {
		t.Fatal(err)
	}
	// 150 held of 100: nothing revoked, available reads 0 (not negative).
	wantAvailable(t, p, 0, 50, 0)
	if s := p.Stats(); s.ScanRingInUse != 150 || s.DeltaCacheInUse != 50 || s.SpillSlotsInUse != 2 {
		t.Errorf("Stats in use = %d/%d/%d, want 150/50/2", s.ScanRingInUse, s.DeltaCacheInUse, s.SpillSlotsInUse)
	}
	if held.ScanRingBytes() != 150 || !held.SpillIsLimited() {
		t.Error("a held permit changed on Reconfigure")
	}
	if _, ok := p.TryAcquire(Request{ScanRingBytes: 1}); ok {
		t.Fatal("granted a scan byte while more than the total is held")
	}
	// Resources that are not over-committed can still be granted.
	mustAcquire(t, p, Request{DeltaCacheBytes: 50}).Release()

	// Acquire waits until enough is released.
	w := acquireAsync(t, context.Background(), p, Request{ScanRingBytes: 100, NeedsSpillSlot: true}, 1)
	held2.Release()
	wantPending(t, w)
	wantAvailable(t, p, 0, 50, 0)
	held.Release()
	r := receive(t, w)
	if r.err != nil {
		t.Fatal(r.err)
	}
	wantAvailable(t, p, 0, 100, 0)
	r.perm.Release()
	wantAvailable(t, p, 100, 100, 1)
}

func TestReconfigureShrinkFailsWaitersThatCanNeverFit(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 200, DeltaCacheBytes: 200})
	hold := mustAcquire(t, p, Request{ScanRingBytes: 200})
	big := acquireAsync(t, context.Background(), p, Request{ScanRingBytes: 150}, 1)
	fits := acquireAsync(t, context.Background(), p, Request{ScanRingBytes: 100}, 2)
	bigDelta := acquireAsync(t, context.Background(), p, Request{DeltaCacheBytes: 101}, 3)
	if err := p.Reconfigure(Config{ScanRingBytes: 100, DeltaCacheBytes: 100}); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan result{big, bigDelta} {
		if r := receive(t, ch); !errors.Is(r.err, ErrExceedsCapacity) {
			t.Errorf("waiter that no longer fits got %v, %v; want ErrExceedsCapacity", r.perm, r.err)
		}
	}
	wantPending(t, fits)
	if s := p.Stats(); s.Queued != 1 || s.Denied != 2 {
		t.Errorf("Stats: Queued=%d Denied=%d, want 1 and 2", s.Queued, s.Denied)
	}
	hold.Release()
	r := receive(t, fits)
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.perm.Release()
	wantAvailable(t, p, 100, 100, -1)
}

func TestReconfigureInvalidLeavesPoolUnchanged(t *testing.T) {
	p := newPool(t, DefaultConfig())
	hold := mustAcquire(t, p, Request{ScanRingBytes: 1})
	for _, cfg := range []Config{{}, {ScanRingBytes: 1, DeltaCacheBytes: 1, SpillSlots: LimitedSpill(0)}, {ScanRingBytes: MaxBudgetBytes + 1, DeltaCacheBytes: 1}} {
		if err := p.Reconfigure(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Reconfigure(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
	wantAvailable(t, p, DefaultScanRingBytes-1, DefaultDeltaCacheBytes, DefaultSpillSlots)
	hold.Release()
	if got := p.Config(); got.ScanRingBytes != DefaultScanRingBytes || *got.SpillSlots != DefaultSpillSlots {
		t.Errorf("Config() = %+v after rejected reconfigurations", got)
	}
}

func TestReconfigureUnchangedIsNoop(t *testing.T) {
	p := newPool(t, DefaultConfig())
	hold := mustAcquire(t, p, Request{ScanRingBytes: 5, NeedsSpillSlot: true})
	gate := p.gate.Load()
	if err := p.Reconfigure(DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	if p.gate.Load() != gate {
		t.Error("an unchanged config moved the gate, disturbing lock-free acquirers")
	}
	hold.Release()
	wantAvailable(t, p, DefaultScanRingBytes, DefaultDeltaCacheBytes, DefaultSpillSlots)
}

func TestReconfigureSpillLimitedUnlimitedAndBack(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 10, DeltaCacheBytes: 10, SpillSlots: LimitedSpill(2)})
	limited := mustAcquire(t, p, Request{NeedsSpillSlot: true})

	if err := p.Reconfigure(Config{ScanRingBytes: 10, DeltaCacheBytes: 10}); err != nil {
		t.Fatal(err)
	}
	wantAvailable(t, p, 10, 10, -1)
	unlimited := mustAcquire(t, p, Request{NeedsSpillSlot: true})
	if unlimited.Spill() != SpillUnlimited || limited.Spill() != SpillLimited {
		t.Errorf("spill grants %v/%v, want unlimited/limited", unlimited.Spill(), limited.Spill())
	}
	if s := p.Stats(); s.SpillSlotsInUse != 1 {
		t.Errorf("SpillSlotsInUse = %d, want 1 (the counted slot granted before the switch)", s.SpillSlotsInUse)
	}

	// Back to 2 slots: the limited permit still holds one of them.
	if err := p.Reconfigure(Config{ScanRingBytes: 10, DeltaCacheBytes: 10, SpillSlots: LimitedSpill(2)}); err != nil {
		t.Fatal(err)
	}
	wantAvailable(t, p, 10, 10, 1)
	unlimited.Release() // held no slot: frees none
	wantAvailable(t, p, 10, 10, 1)
	limited.Release()
	wantAvailable(t, p, 10, 10, 2)

	// A limited slot released while unlimited is counted back when limited again.
	limited = mustAcquire(t, p, Request{NeedsSpillSlot: true})
	if err := p.Reconfigure(Config{ScanRingBytes: 10, DeltaCacheBytes: 10}); err != nil {
		t.Fatal(err)
	}
	limited.Release()
	if err := p.Reconfigure(Config{ScanRingBytes: 10, DeltaCacheBytes: 10, SpillSlots: LimitedSpill(1)}); err != nil {
		t.Fatal(err)
	}
	wantAvailable(t, p, 10, 10, 1)
}
