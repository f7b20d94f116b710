package fatjob

import (
	"testing"
)

// The claim counter wraps after 2^48 grants without disturbing the spill
// slots packed beside it, and Stats.Granted keeps counting.
func TestClaimCounterWraps(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 10, DeltaCacheBytes: 10, SpillSlots: LimitedSpill(2)})
	// Pretend claimMax-1 permits were granted and released.
	p.claims.Store(uint64(claimMax-1)<<claimShift | p.claims.Load()&spillMask)
	var held []*Permit
	for range 4 {
		held = append(held, mustAcquire(t, p, Request{ScanRingBytes: 1}))
	}
	held = append(held, mustAcquire(t, p, Request{NeedsSpillSlot: true}))
	if got := p.claimWraps.Load(); got != 1 {
		t.Errorf("claimWraps = %d, want 1", got)
	}
	if got, want := p.Stats().Granted, uint64(claimMax-1)+5; got != want {
		t.Errorf("Stats().Granted = %d, want %d", got, want)
	}
	wantAvailable(t, p, 6, 10, 1)
	for _, perm := range held {
		perm.Release()
	}
	wantAvailable(t, p, 10, 10, 2)
}

// A shrink to fewer spill slots than are held drives the packed slot field
// negative without touching the count, and releases bring it back.
func TestSpillFieldGoesNegativeWithoutBorrowing(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 10, DeltaCacheBytes: 10, SpillSlots: LimitedSpill(MaxSpillSlots)})
	var held []*Permit
	for range 3 {
		held = append(held, mustAcquire(t, p, Request{NeedsSpillSlot: true}))
	}
	before := p.claimed()
	if err := p.Reconfigure(Config{ScanRingBytes: 10, DeltaCacheBytes: 10}); err != nil {
		t.Fatal(err)
	}
	if got := p.spillAvailable(); got != -3 {
		t.Errorf("spill field after switching to unlimited with 3 held = %d, want -3", got)
	}
	if p.claimed() != before {
		t.Errorf("claim count changed from %d to %d on Reconfigure", before, p.claimed())
	}
	for _, perm := range held {
		perm.Release()
	}
	if got := p.spillAvailable(); got != 0 {
		t.Errorf("spill field after releases = %d, want 0", got)
	}
	if err := p.Reconfigure(Config{ScanRingBytes: 10, DeltaCacheBytes: 10, SpillSlots: LimitedSpill(MaxSpillSlots)}); err != nil {
		t.Fatal(err)
	}
	wantAvailable(t, p, 10, 10, MaxSpillSlots)
	if p.claimed() != before {
		t.Errorf("claim count changed from %d to %d", before, p.claimed())
	}
}
