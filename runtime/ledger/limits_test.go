package ledger

import (
	"context"
	"errors"
	"math"
	"math/big"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// figureNear draws a figure that is small, near MaxCount, or far beyond it
// (up to the int limits), where a sum that is not overflow-safe wraps.
func figureNear(t *rapid.T, label string) int {
	return rapid.OneOf(
		rapid.IntRange(0, 12),
		rapid.IntRange(MaxCount-12, MaxCount),
		rapid.IntRange(MaxCount+1, MaxCount+12),
		rapid.IntRange(math.MaxInt-12, math.MaxInt),
		rapid.IntRange(math.MinInt, math.MinInt+12),
		rapid.IntRange(-12, -1),
	).Draw(t, label)
}

// TestPropertyNoOverflowNearLimits drives a ledger with figures, counts,
// maxima and restored claims near the int limits. Whatever happens:
// figures outside 0..MaxCount are refused and change nothing, no status
// figure is negative, Effective is the true sum (saturated), and an
// operation that grants anything leaves ProviderActive + LocalClaims <= Max
// (computed without overflow).
func TestPropertyNoOverflowNearLimits(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clk := newFakeClock()
		mode := rapid.SampledFrom([]GrantMode{GrantNextUsage, GrantImmediate}).Draw(t, "mode")
		maxGen := rapid.OneOf(rapid.IntRange(1, 12), rapid.IntRange(MaxCount-12, MaxCount))
		l, err := New(Config{Max: maxGen.Draw(t, "max"), Grant: mode}, WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		nextRestoreID := ClaimID(1 << 40)
		workers := []string{"a", "b", "c"}

		step := func(what string, op func()) {
			before := l.Stats()
			op()
			st, after := l.Status(), l.Stats()
			if st.ProviderActive < 0 || st.LocalClaims < 0 || st.Effective < 0 || st.Available < 0 || st.Queued < 0 {
				t.Fatalf("after %s: negative figure in %+v", what, st)
			}
			sum := new(big.Int).Add(big.NewInt(int64(st.ProviderActive)), big.NewInt(int64(st.LocalClaims)))
			want := sum
			if !sum.IsInt64() || sum.Int64() > math.MaxInt {
				want = big.NewInt(math.MaxInt)
			}
			if big.NewInt(int64(st.Effective)).Cmp(want) != 0 {
				t.Fatalf("after %s: effective %d, want %v (= %d + %d)", what, st.Effective, want, st.ProviderActive, st.LocalClaims)
			}
			if after.Granted > before.Granted && sum.Cmp(big.NewInt(int64(st.Max))) > 0 {
				t.Fatalf("after %s: granted %d claim(s), leaving %d active + %d claimed > max %d",
					what, after.Granted-before.Granted, st.ProviderActive, st.LocalClaims, st.Max)
			}
		}
		t.Repeat(map[string]func(*rapid.T){
			"figure": func(t *rapid.T) {
				n := figureNear(t, "active")
				clk.Advance(time.Millisecond)
				step("figure", func() {
					prev := l.Status().ProviderActive
					err := l.ObserveUsage(n, clk.Now())
					switch inRange := n >= 0 && n <= MaxCount; {
					case inRange && err != nil:
						t.Fatalf("ObserveUsage(%d): %v", n, err)
					case !inRange && err == nil:
						t.Fatalf("ObserveUsage(%d) accepted a figure outside 0..%d", n, MaxCount)
					case !inRange && l.Status().ProviderActive != prev:
						t.Fatalf("refused figure %d changed provider_active from %d", n, prev)
					}
				})
			},
			"try request": func(t *rapid.T) {
				req := Request{WorkerID: rapid.SampledFrom(workers).Draw(t, "worker"), Count: figureNear(t, "count")}
				step("try request", func() {
					_, err := l.TryRequest(req)
					if req.Count < 1 && !errors.Is(err, ErrInvalidRequest) {
						t.Fatalf("TryRequest(count %d): %v, want ErrInvalidRequest", req.Count, err)
					}
				})
			},
			"restore": func(t *rapid.T) {
				count := figureNear(t, "count")
				nextRestoreID++
				step("restore", func() {
					_, err := l.Restore(RestoredClaim{ID: nextRestoreID, WorkerID: "r", Count: count,
						GrantedAt: clk.Now(), ExpiresAt: clk.Now().Add(time.Minute)})
					if (count < 1 || count > MaxCount) && err == nil {
						t.Fatalf("Restore accepted count %d", count)
					}
				})
			},
			"cancel all": func(t *rapid.T) {
				step("cancel all", func() {
					l.mu.Lock()
					var live []*Claim
					for _, c := range l.claims {
						live = append(live, c)
					}
					l.mu.Unlock()
					for _, c := range live {
						c.Cancel()
					}
				})
			},
			"reconfigure": func(t *rapid.T) {
				cfg := l.Config()
				cfg.Max = figureNear(t, "max")
				step("reconfigure", func() {
					err := l.Reconfigure(cfg)
					if (cfg.Max < 1 || cfg.Max > MaxCount) != (err != nil) {
						t.Fatalf("Reconfigure(max %d): %v", cfg.Max, err)
					}
				})
			},
			"advance": func(t *rapid.T) {
				d := time.Duration(rapid.IntRange(0, 200).Draw(t, "seconds")) * time.Second
				step("advance", func() { clk.Advance(d) })
			},
		})
	})
}

// TestIntLimitUsageFigureGrantsNothing is the reproduction of the
// over-booking report: usage at the max, a waiting request, then a figure
// of the int64 limit. Before the fix the sum wrapped negative and every
// waiting request was granted.
func TestIntLimitUsageFigureGrantsNothing(t *testing.T) {
	clk := newFakeClock()
	l, err := New(Config{Max: 10}, WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.ObserveUsage(10, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryRequest(Request{WorkerID: "a", Count: 1}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("TryRequest at the ceiling: %v, want ErrUnavailable", err)
	}
	clk.Advance(time.Second)
	if err := l.ObserveUsage(math.MaxInt64, time.Time{}); err == nil {
		t.Fatal("ObserveUsage(MaxInt64) accepted an impossible figure")
	}
	// A figure the ledger does accept, as large as it gets, still fits nothing.
	clk.Advance(time.Second)
	if err := l.ObserveUsage(MaxCount, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryRequest(Request{WorkerID: "a", Count: 1}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("TryRequest with usage %d: %v, want ErrUnavailable", MaxCount, err)
	}
	if st := l.Status(); st.Effective != MaxCount || st.Available != 0 || st.LocalClaims != 0 {
		t.Fatalf("status %+v: want effective %d, nothing available, no claims", st, MaxCount)
	}
}

// TestMaxQueuedBoundsTicketsAndWaiters: the flood report was 20,000
// answer-at-once claims with distinct worker IDs, each leaving a ticket.
// With MaxQueued, the queue stops at the bound; a worker that holds a
// ticket keeps it, and a blocking Request is refused alike.
func TestMaxQueuedBoundsTicketsAndWaiters(t *testing.T) {
	clk := newFakeClock()
	l, err := New(Config{Max: 1, MaxQueued: 2}, WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.ObserveUsage(1, time.Time{}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"a", "b"} {
		if _, err := l.TryRequest(Request{WorkerID: w, Count: 1}); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("worker %s: %v, want a ticket (ErrUnavailable)", w, err)
		}
	}
	if _, err := l.TryRequest(Request{WorkerID: "c", Count: 1}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third worker: %v, want ErrQueueFull", err)
	}
	if _, err := l.TryRequest(Request{WorkerID: "a", Count: 1}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a asking again: %v, want its ticket kept (ErrUnavailable)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := l.Request(ctx, Request{WorkerID: "d", Count: 1}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("blocking request: %v, want ErrQueueFull at once", err)
	}
	if st, s := l.Status(), l.Stats(); st.Queued != 2 || s.DeniedQueueFull != 2 {
		t.Fatalf("queued %d, denied %d; want 2 and 2", st.Queued, s.DeniedQueueFull)
	}
	// Raising the bound lets the next one in.
	cfg := l.Config()
	cfg.MaxQueued = 3
	if err := l.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryRequest(Request{WorkerID: "c", Count: 1}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("after raising max_queued: %v, want a ticket", err)
	}
	if err := (Config{Max: 1, MaxQueued: -1}).Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("negative MaxQueued: %v, want ErrInvalidConfig", err)
	}
}
