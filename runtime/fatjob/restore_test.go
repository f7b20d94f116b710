package fatjob

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rpdhq/rpd/internal/waitfor"
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
	waitQueued(t, p, 1)
	// 70 of 100 held: the waiter's 40 still does not fit. Release hands
	// off to the queue synchronously, so the waiter is still queued when
	// it returns.
	held.Release()
	if q := p.Stats().Queued; q != 1 {
		t.Fatalf("Stats().Queued = %d after releasing the live permit; want the waiter still queued behind the restored 70 of 100", q)
	}
	select {
	case err := <-got:
		t.Fatalf("the waiter was served while the restored permit held 70 of 100: %v", err)
	default:
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

// waitQueued waits (bounded) until n Acquire calls are queued.
func waitQueued(t *testing.T, p *Pool, n int) {
	t.Helper()
	waitfor.Within(t, 10*time.Second, fmt.Sprintf("Stats().Queued = %d", n), func() bool { return p.Stats().Queued == n })
}

// Restore racing lock-free TryAcquire/Release and queued Acquires (as a
// daemon restoring while in-process users already run would): every
// resource taken is given back exactly once, no acquirer is granted more
// than was free, and the pool ends full.
func TestRestoreConcurrentWithAcquirers(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 64, DeltaCacheBytes: 64, SpillSlots: LimitedSpill(4)})
	const workers, rounds, restores = 4, 300, 200
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, workers+1)
	for w := range workers {
		wg.Go(func() {
			r := Request{ScanRingBytes: uint64(1 + w*7), DeltaCacheBytes: uint64(w * 5), NeedsSpillSlot: w%2 == 0}
			for i := range rounds {
				if i%3 == 0 {
					perm, err := p.Acquire(ctx, r)
					if err != nil {
						errs <- fmt.Errorf("worker %d: Acquire: %w", w, err)
						return
					}
					perm.Release()
					continue
				}
				if perm, ok := p.TryAcquire(r); ok {
					perm.Release()
				}
			}
		})
	}
	wg.Go(func() {
		for i := range restores {
			perm, err := p.Restore(Request{ScanRingBytes: uint64(i % 70), DeltaCacheBytes: 3, NeedsSpillSlot: i%4 == 0})
			if err != nil {
				errs <- fmt.Errorf("Restore %d: %w", i, err)
				return
			}
			if err := p.checkInvariants(); err != nil {
				errs <- err
			}
			perm.Release()
			perm.Release() // idempotent
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	wantAvailable(t, p, 64, 64, 4)
	if q := p.Stats().Queued; q != 0 {
		t.Fatalf("Stats().Queued = %d at the end, want 0", q)
	}
}
