package ledger

import (
	"errors"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestPropertyEffectiveNeverExceedsMax: with an exact provider (a figure
// counts precisely the VMs running when it is taken), effective usage never
// exceeds Max, and neither do real VMs plus live claims, whatever the order
// of requests, confirms, cancels, finishes, clock jumps and figures.
func TestPropertyEffectiveNeverExceedsMax(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clk := newFakeClock()
		mode := rapid.SampledFrom([]GrantMode{GrantNextUsage, GrantImmediate}).Draw(t, "mode")
		l, err := New(Config{Max: rapid.IntRange(1, 10).Draw(t, "max"), Grant: mode}, WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		var held []*Claim  // granted, VM not started yet
		var slow []Reading // figures taken, not yet delivered (poll latency)
		running := 0       // VMs up at the provider
		workers := []string{"a", "b", "c", "d", "e"}

		check := func(what string) {
			st := l.Status()
			if st.Effective > st.Max {
				t.Fatalf("after %s: effective %d > max %d (%+v)", what, st.Effective, st.Max, st)
			}
			if st.Effective != st.ProviderActive+st.LocalClaims {
				t.Fatalf("after %s: effective %d != %d + %d", what, st.Effective, st.ProviderActive, st.LocalClaims)
			}
			real, now := running, clk.Now()
			for _, c := range held {
				if c.ExpiresAt().After(now) {
					real += c.Count()
				}
			}
			if real > st.Max {
				t.Fatalf("after %s: %d running VMs + live claims > max %d", what, real, st.Max)
			}
		}
		t.Repeat(map[string]func(*rapid.T){
			"request": func(t *rapid.T) {
				stale := l.Status().Stale
				w := rapid.SampledFrom(workers).Draw(t, "worker")
				c, err := l.TryRequest(Request{WorkerID: w, Count: rapid.IntRange(1, 3).Draw(t, "count")})
				if err == nil {
					if stale && c.GrantedAt().Equal(clk.Now()) {
						t.Fatalf("granted while stale") // collecting an earlier grant is fine
					}
					held = append(held, c)
				} else if !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrTooLarge) {
					t.Fatalf("TryRequest: %v", err)
				}
				check("request")
			},
			"confirm": func(t *rapid.T) {
				if len(held) == 0 {
					t.Skip("nothing held")
				}
				i := rapid.IntRange(0, len(held)-1).Draw(t, "i")
				c := held[i]
				held = append(held[:i], held[i+1:]...)
				switch err := c.Confirm(); {
				case err == nil:
					running += c.Count() // the VM is up and the provider counts it
				case errors.Is(err, ErrClaimEnded):
					// The claim lapsed: the worker must not start the VM.
				default:
					t.Fatalf("Confirm: %v", err)
				}
				check("confirm")
			},
			"cancel": func(t *rapid.T) {
				if len(held) == 0 {
					t.Skip("nothing held")
				}
				i := rapid.IntRange(0, len(held)-1).Draw(t, "i")
				held[i].Cancel()
				held = append(held[:i], held[i+1:]...)
				check("cancel")
			},
			"finish": func(t *rapid.T) {
				if running == 0 {
					t.Skip("nothing running")
				}
				running -= rapid.IntRange(1, running).Draw(t, "n")
				check("finish")
			},
			"advance": func(t *rapid.T) {
				clk.Advance(time.Duration(rapid.IntRange(0, 90).Draw(t, "seconds")) * time.Second)
				check("advance")
			},
			"figure": func(t *rapid.T) {
				clk.Advance(time.Millisecond) // a figure taken after everything so far
				if err := l.ObserveUsage(running, clk.Now()); err != nil {
					t.Fatal(err)
				}
				check("figure")
			},
			"take slow figure": func(t *rapid.T) {
				clk.Advance(time.Millisecond)
				slow = append(slow, Reading{Active: running, At: clk.Now()})
			},
			"deliver slow figure": func(t *rapid.T) {
				if len(slow) == 0 {
					t.Skip("no figure in flight")
				}
				r := slow[0]
				slow = slow[1:]
				// Exact as of r.At; VMs may have started or finished since.
				if err := l.ObserveUsage(r.Active, r.At); err != nil {
					t.Fatal(err)
				}
				check("deliver slow figure")
			},
			"raise max": func(t *rapid.T) {
				cfg := l.Config()
				cfg.Max += rapid.IntRange(0, 3).Draw(t, "by")
				if err := l.Reconfigure(cfg); err != nil {
					t.Fatal(err)
				}
				check("raise max")
			},
		})
	})
}
