package fatjob

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestStressInvariants mixes TryAcquire, Acquire with random deadlines and
// cancellations, Release (also from other goroutines, also twice) and
// Reconfigure, while a checker verifies under the lock that no budget is
// over-committed (see checkInvariants). At the end the pool must be exactly
// full and its counters must match what the callers saw.
func TestStressInvariants(t *testing.T) {
	configs := []Config{
		{ScanRingBytes: 100, DeltaCacheBytes: 100, SpillSlots: LimitedSpill(3)},
		{ScanRingBytes: 50, DeltaCacheBytes: 80, SpillSlots: LimitedSpill(1)},
		{ScanRingBytes: 200, DeltaCacheBytes: 150},
		{ScanRingBytes: 30, DeltaCacheBytes: 30, SpillSlots: LimitedSpill(5)},
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	p := newPool(t, configs[0])

	const (
		workers      = 16
		opsPerWorker = 3000
	)
	deadline := time.Now().Add(2 * time.Second)
	var granted, denied, cancelled atomic.Uint64
	var held [3]atomic.Int64 // what the workers believe they hold

	stop := make(chan struct{})
	var background sync.WaitGroup
	background.Go(func() { // checker
		for checks := 0; ; checks++ {
			select {
			case <-stop:
				t.Logf("%d invariant checks", checks)
				return
			default:
			}
			if err := p.checkInvariants(); err != nil {
				t.Error(err)
				return
			}
		}
	})
	background.Go(func() { // reconfigurer
		rng := rand.New(rand.NewPCG(seed, 1))
		for n := 0; ; n++ {
			select {
			case <-stop:
				t.Logf("%d reconfigurations", n)
				return
			case <-time.After(time.Duration(rng.IntN(500)) * time.Microsecond):
			}
			if err := p.Reconfigure(configs[rng.IntN(len(configs))]); err != nil {
				t.Error(err)
				return
			}
		}
	})

	var releasers sync.WaitGroup
	release := func(rng *rand.Rand, perm *Permit) {
		held[resScan].Add(-int64(perm.ScanRingBytes()))
		held[resDelta].Add(-int64(perm.DeltaCacheBytes()))
		switch rng.IntN(4) {
		case 0:
			releasers.Go(perm.Release) // as a lease expiry would
		case 1:
			perm.Release()
			perm.Release()
		default:
			perm.Release()
		}
	}
	var workersWG sync.WaitGroup
	for w := range workers {
		workersWG.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)+2))
			var mine []*Permit
			for i := 0; i < opsPerWorker && time.Now().Before(deadline); i++ {
				if len(mine) > 0 && (len(mine) >= 3 || rng.IntN(2) == 0) {
					j := rng.IntN(len(mine))
					release(rng, mine[j])
					mine = append(mine[:j], mine[j+1:]...)
					continue
				}
				r := Request{
					ScanRingBytes:   uint64(rng.IntN(121)),
					DeltaCacheBytes: uint64(rng.IntN(121)),
					NeedsSpillSlot:  rng.IntN(2) == 0,
				}
				if rng.IntN(10) == 0 {
					r = Request{}
				}
				var perm *Permit
				if rng.IntN(3) == 0 {
					ok := false
					if perm, ok = p.TryAcquire(r); !ok {
						denied.Add(1)
						continue
					}
				} else {
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(3000))*time.Microsecond)
					if rng.IntN(4) == 0 {
						time.AfterFunc(time.Duration(rng.IntN(500))*time.Microsecond, cancel)
					}
					var err error
					perm, err = p.Acquire(ctx, r)
					cancel()
					switch {
					case err == nil:
					case errors.Is(err, ErrExceedsCapacity):
						denied.Add(1)
						continue
					case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
						cancelled.Add(1)
						continue
					default:
						t.Errorf("Acquire: unexpected error %v", err)
						return
					}
				}
				granted.Add(1)
				if perm.ScanRingBytes() != r.ScanRingBytes || perm.DeltaCacheBytes() != r.DeltaCacheBytes || perm.CanSpill() != r.NeedsSpillSlot {
					t.Errorf("permit %d/%d/%v for request %+v", perm.ScanRingBytes(), perm.DeltaCacheBytes(), perm.Spill(), r)
				}
				held[resScan].Add(int64(r.ScanRingBytes))
				held[resDelta].Add(int64(r.DeltaCacheBytes))
				mine = append(mine, perm)
			}
			for _, perm := range mine {
				release(rng, perm)
			}
		})
	}
	workersWG.Wait()
	releasers.Wait()
	close(stop)
	background.Wait()

	if held[resScan].Load() != 0 || held[resDelta].Load() != 0 {
		t.Fatalf("workers still hold %d/%d bytes", held[resScan].Load(), held[resDelta].Load())
	}
	if err := p.Reconfigure(configs[0]); err != nil {
		t.Fatal(err)
	}
	wantAvailable(t, p, 100, 100, 3)
	s := p.Stats()
	if s.Granted != granted.Load() || s.Denied != denied.Load() || s.Cancelled != cancelled.Load() {
		t.Errorf("Stats: Granted=%d Denied=%d Cancelled=%d; callers saw %d, %d, %d",
			s.Granted, s.Denied, s.Cancelled, granted.Load(), denied.Load(), cancelled.Load())
	}
	if s.Queued != 0 || s.ScanRingInUse != 0 || s.DeltaCacheInUse != 0 || s.SpillSlotsInUse != 0 || s.Waited > s.Granted {
		t.Errorf("Stats after the run = %+v", s)
	}
	t.Logf("granted %d (waited %d), denied %d, cancelled %d", s.Granted, s.Waited, s.Denied, s.Cancelled)
	if s.Waited == 0 || s.Cancelled == 0 || s.Denied == 0 {
		t.Errorf("the run did not exercise waiting, cancellation and denial: %+v", s)
	}
}
