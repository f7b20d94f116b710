package fatjob

import (
	"context"
	"errors"
	"math"
	"math/big"
	"testing"

	"pgregory.net/rapid"
)

// bytesNear draws a byte count that is small, near MaxBudgetBytes, or near
// the uint64 limit.
func bytesNear(t *rapid.T, label string) uint64 {
	return rapid.OneOf(
		rapid.Uint64Range(0, 8),
		rapid.Uint64Range(MaxBudgetBytes-8, MaxBudgetBytes+8),
		rapid.Uint64Range(math.MaxUint64-8, math.MaxUint64),
		rapid.Uint64Range(MaxBudgetBytes/2-4, MaxBudgetBytes/2+4),
	).Draw(t, label)
}

// TestPropertyNoOverflowNearLimits grants, restores, releases and
// reconfigures with byte counts near the int64 and uint64 limits, and
// checks against exact (big.Int) arithmetic that the counters never wrap:
// the available amount is always max(0, total - held), held never exceeds
// MaxBudgetBytes, and a grant (not a restore) never takes held over the total.
func TestPropertyNoOverflowNearLimits(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		totalGen := rapid.OneOf(rapid.Uint64Range(1, 16), rapid.Uint64Range(MaxBudgetBytes-16, MaxBudgetBytes))
		cfg := Config{ScanRingBytes: totalGen.Draw(t, "scan"), DeltaCacheBytes: totalGen.Draw(t, "delta")}
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		type held struct {
			perm *Permit
			req  Request
		}
		var permits []held
		sum := func(f func(Request) uint64) *big.Int {
			s := new(big.Int)
			for _, h := range permits {
				s.Add(s, new(big.Int).SetUint64(f(h.req)))
			}
			return s
		}
		scanOf := func(r Request) uint64 { return r.ScanRingBytes }
		deltaOf := func(r Request) uint64 { return r.DeltaCacheBytes }
		maxBudget := new(big.Int).SetUint64(MaxBudgetBytes)
		check := func(what string) {
			for _, b := range []struct {
				name         string
				total, avail uint64
				held         *big.Int
			}{
				{"scan ring", p.ScanRingTotal(), p.ScanRingAvailable(), sum(scanOf)},
				{"delta cache", p.DeltaCacheTotal(), p.DeltaCacheAvailable(), sum(deltaOf)},
			} {
				if b.held.Cmp(maxBudget) > 0 {
					t.Fatalf("after %s: %s: %v bytes held, over MaxBudgetBytes", what, b.name, b.held)
				}
				want := new(big.Int).Sub(new(big.Int).SetUint64(b.total), b.held)
				if want.Sign() < 0 {
					want.SetInt64(0)
				}
				if want.Cmp(new(big.Int).SetUint64(b.avail)) != 0 {
					t.Fatalf("after %s: %s available %d, want max(0, %d - %v) = %v", what, b.name, b.avail, b.total, b.held, want)
				}
			}
			if err := p.checkInvariants(); err != nil {
				t.Fatalf("after %s: %v", what, err)
			}
		}
		t.Repeat(map[string]func(*rapid.T){
			"try acquire": func(t *rapid.T) {
				r := Request{ScanRingBytes: bytesNear(t, "scan"), DeltaCacheBytes: bytesNear(t, "delta")}
				freeScan, freeDelta := p.ScanRingAvailable(), p.DeltaCacheAvailable()
				perm, ok := p.TryAcquire(r)
				if fits := r.ScanRingBytes <= freeScan && r.DeltaCacheBytes <= freeDelta; ok != fits {
					t.Fatalf("TryAcquire(%+v) = %v with %d, %d free", r, ok, freeScan, freeDelta)
				}
				if ok {
					permits = append(permits, held{perm, r})
				}
				check("try acquire")
			},
			"restore": func(t *rapid.T) {
				r := Request{ScanRingBytes: bytesNear(t, "scan"), DeltaCacheBytes: bytesNear(t, "delta")}
				perm, err := p.Restore(r)
				if err == nil {
					permits = append(permits, held{perm, r})
				} else if r.ScanRingBytes <= MaxBudgetBytes && r.DeltaCacheBytes <= MaxBudgetBytes && !errors.Is(err, ErrRestoreOverflow) {
					t.Fatalf("Restore(%+v): %v", r, err)
				}
				check("restore")
			},
			"release": func(t *rapid.T) {
				if len(permits) == 0 {
					t.Skip("nothing held")
				}
				i := rapid.IntRange(0, len(permits)-1).Draw(t, "i")
				permits[i].perm.Release()
				permits = append(permits[:i], permits[i+1:]...)
				check("release")
			},
			"reconfigure": func(t *rapid.T) {
				c := Config{ScanRingBytes: bytesNear(t, "scan"), DeltaCacheBytes: bytesNear(t, "delta")}
				err := p.Reconfigure(c)
				valid := c.ScanRingBytes >= 1 && c.ScanRingBytes <= MaxBudgetBytes && c.DeltaCacheBytes >= 1 && c.DeltaCacheBytes <= MaxBudgetBytes
				if valid != (err == nil) {
					t.Fatalf("Reconfigure(%+v): %v", c, err)
				}
				check("reconfigure")
			},
		})
	})
}

// TestRestoreCannotWrapTheCounter: two restores of MaxBudgetBytes each into
// a full pool used to drive the available count past the int64 minimum, so
// it wrapped to a large positive amount and new permits were granted
// against a budget held twice over.
func TestRestoreCannotWrapTheCounter(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: MaxBudgetBytes, DeltaCacheBytes: 1})
	if _, err := p.Restore(Request{ScanRingBytes: MaxBudgetBytes}); err != nil {
		t.Fatal(err)
	}
	_, err := p.Restore(Request{ScanRingBytes: MaxBudgetBytes})
	if !errors.Is(err, ErrRestoreOverflow) {
		t.Fatalf("second Restore of MaxBudgetBytes: %v, want ErrRestoreOverflow", err)
	}
	if _, ok := p.TryAcquire(Request{ScanRingBytes: 1}); ok {
		t.Fatal("granted a byte of a budget that is fully held")
	}
	if got := p.ScanRingAvailable(); got != 0 {
		t.Fatalf("available %d, want 0", got)
	}
}

// TestMaxQueuedBoundsWaiters: with MaxQueued 1, a second request that
// would wait fails at once with ErrQueueFull, changes nothing, and the
// waiting one is still granted on release.
func TestMaxQueuedBoundsWaiters(t *testing.T) {
	cfg := Config{ScanRingBytes: 10, DeltaCacheBytes: 10, MaxQueued: 1}
	p := newPool(t, cfg)
	held := mustAcquire(t, p, Request{ScanRingBytes: 10})
	ctx := context.Background()
	first := acquireAsync(t, ctx, p, Request{ScanRingBytes: 5}, 1)
	if _, err := p.Acquire(ctx, Request{ScanRingBytes: 1}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("second waiter: %v, want ErrQueueFull", err)
	}
	if st := p.Stats(); st.Queued != 1 {
		t.Fatalf("stats %+v: want the one waiter queued", st)
	}
	held.Release()
	if r := receive(t, first); r.err != nil {
		t.Fatalf("the queued request: %v", r.err)
	} else {
		r.perm.Release()
	}
	cfg.MaxQueued = -1
	if err := p.Reconfigure(cfg); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("MaxQueued -1: %v, want ErrInvalidConfig", err)
	}
	if err := p.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}
