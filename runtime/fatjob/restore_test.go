package fatjob

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A restored permit counts even when it does not fit, waiters wait behind
// it, and releasing it (once, however often it is called) brings the pool
// back to full.
func TestRestoreOverCommitsLikeAShrink(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 100, DeltaCacheBytes: 100, SpillSlots: LimitedSpill(1)})
	held := mustAcquire(t, p, Request{ScanRingBytes: 60, DeltaCacheBytes: 10, NeedsSpillSlot: true})
	restored, err := p.Restore(Request{ScanRingBytes: 70, DeltaCacheBytes: 20, NeedsSpillSlot: true})
	if err != nil {
		t.Fatal(err)
	}
	if !restored.SpillIsLimited() || restored.ScanRingBytes() != 70 || restored.DeltaCacheBytes() != 20 {
		t.Fatalf("restored permit: scan %d delta %d spill %v", restored.ScanRingBytes(), restored.DeltaCacheBytes(), restored.Spill())
	}
	wantAvailable(t, p, 0, 70, 0) // 130 of 100 scan held, 2 of 1 slots: read as 0

	if _, ok := p.TryAcquire(Request{ScanRingBytes: 1}); ok {
		t.Fatal("TryAcquire succeeded on an over-committed pool")
	}
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		perm, err := p.Acquire(ctx, Request{ScanRingBytes: 40})
		if err == nil {
			perm.Release()
		}
		got <- err
	}()
	held.Release() // 70 of 100 held: the waiter's 40 still does not fit
	select {
	case err := <-got:
		t.Fatalf("the waiter was served while the restored permit held 70 of 100: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	restored.Release()
	restored.Release()
	if err := <-got; err != nil {
		t.Fatalf("the waiter after the restored permit's release: %v", err)
	}
	wantAvailable(t, p, 100, 100, 1)
}

// With unlimited spilling a restored permit may spill but holds no counted
// slot; the empty request restores an empty permit.
func TestRestoreUnlimitedSpillAndEmpty(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 10, DeltaCacheBytes: 10})
	perm, err := p.Restore(Request{ScanRingBytes: 5, NeedsSpillSlot: true})
	if err != nil {
		t.Fatal(err)
	}
	if !perm.CanSpill() || perm.SpillIsLimited() {
		t.Fatalf("restored spill = %v, want unlimited", perm.Spill())
	}
	empty, err := p.Restore(Request{})
	if err != nil || empty.TotalBytes() != 0 || empty.CanSpill() {
		t.Fatalf("Restore(empty) = %+v, %v", empty, err)
	}
	perm.Release()
	empty.Release()
	wantAvailable(t, p, 10, 10, -1)
	if got := p.Stats().Granted; got != 2 {
		t.Fatalf("Stats().Granted = %d, want 2 (restores count as grants)", got)
	}
}

func TestRestoreRejects(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 10, DeltaCacheBytes: 10, SpillSlots: LimitedSpill(1)})
	if _, err := p.Restore(Request{ScanRingBytes: MaxBudgetBytes + 1}); err == nil {
		t.Fatal("Restore of more than MaxBudgetBytes succeeded")
	}
	var held []*Permit
	for range MaxSpillSlots + 1 {
		perm, err := p.Restore(Request{NeedsSpillSlot: true})
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, perm)
	}
	if _, err := p.Restore(Request{NeedsSpillSlot: true}); !errors.Is(err, ErrRestoreOverflow) {
		t.Fatalf("restoring past the slot counter's range: %v, want ErrRestoreOverflow", err)
	}
	for _, perm := range held {
		perm.Release()
	}
	wantAvailable(t, p, 10, 10, 1)
}
