package fleet_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rpdhq/rpd/runtime/fleet"
	"github.com/rpdhq/rpd/runtime/pickup"
)

var monday = time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)

// TestFleetProperties drives the real engine, pickup manager and ledger
// through random histories: pickups and releases, min_idle changes, VMs
// vanishing (spot interruptions), spot capacity errors, orphans planted by
// someone else, runners that never boot, and passes at random times, woken
// or not. After every step:
//
//   - the VMs rpd launched that run never exceed the ceiling;
//   - no VM whose runner is claimed is ever terminated.
//
// Then, with the disruptions stopped, the fleet converges: every VM that
// runs is an idle or a claimed runner (nothing booting forever, no
// orphan, nothing leaked), and the idle runners are exactly min_idle, or
// what the ceiling leaves room for.
func TestFleetProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		max := rapid.IntRange(1, 10).Draw(rt, "max")
		minIdle := rapid.IntRange(0, 12).Draw(rt, "min_idle")
		spot := rapid.Bool().Draw(rt, "spot")
		fallback := rapid.SampledFrom([]string{fleet.OnDemand, "none"}).Draw(rt, "fallback")
		maxIdleAge := rapid.SampledFrom([]time.Duration{0, 20 * time.Minute}).Draw(rt, "max_idle_age")
		never := rapid.Float64Range(0, 0.3).Draw(rt, "never_boots")
		cfg := fleet.Config{Class: simClass, MinIdle: minIdle, MaxIdleAge: maxIdleAge, BootTimeout: 5 * time.Minute, OrphanGrace: 10 * time.Minute, MaxLaunch: 50}
		usage := fleet.OnDemand
		if spot {
			usage = fleet.Spot
		}
		s, err := newSim(simOptions{seed: rapid.Uint64().Draw(rt, "seed"), max: max, cfg: cfg, start: monday,
			spec: fleet.LaunchSpec{UsageClass: usage, Fallback: fallback},
			boot: func(r *rand.Rand) (time.Duration, bool) {
				return time.Duration(30+r.IntN(120)) * time.Second, r.Float64() >= never
			}})
		if err != nil {
			rt.Fatal(err)
		}
		var violations []string
		s.cloud.onTerminate = func(id string) {
			if rec, err := s.t.Get(s.ctx, id); err == nil && rec.State == pickup.StateClaimed {
				violations = append(violations, fmt.Sprintf("%s terminated while claimed by %s", id, rec.Owner))
			}
		}
		planted := map[string]bool{}
		claimed := map[string]string{}
		check := func(when string) {
			if len(violations) > 0 {
				rt.Fatalf("%s: %v", when, violations)
			}
			if n := s.cloud.live() - livePlanted(s, planted); n > max {
				rt.Fatalf("%s: %d VMs launched by rpd run under a ceiling of %d", when, n, max)
			}
		}
		for i := range rapid.IntRange(5, 50).Draw(rt, "steps") {
			switch rapid.IntRange(0, 7).Draw(rt, "op") {
			case 0, 1:
				owner := fmt.Sprintf("job-%d", i)
				in, ok, err := s.pickup(owner)
				if err != nil {
					rt.Fatalf("pickup: %v", err)
				}
				if ok {
					claimed[in.ID] = owner
				}
			case 2:
				if ids := sortedKeys(claimed); len(ids) > 0 {
					id := rapid.SampledFrom(ids).Draw(rt, "release")
					disp := rapid.SampledFrom([]pickup.Disposition{pickup.ReOffer, pickup.Retire}).Draw(rt, "disposition")
					_, _ = s.mgr.Release(s.ctx, id, claimed[id], disp)
					delete(claimed, id)
				}
			case 3:
				cfg.MinIdle = rapid.IntRange(0, 12).Draw(rt, "new_min_idle")
				if err := s.configure(cfg); err != nil {
					rt.Fatal(err)
				}
			case 4:
				if ids := liveIDs(s); len(ids) > 0 {
					id := rapid.SampledFrom(ids).Draw(rt, "vanish")
					s.cloud.mu.Lock()
					s.cloud.terminateLocked(id)
					s.cloud.mu.Unlock()
				}
			case 5:
				s.cloud.mu.Lock()
				s.cloud.noSpot = !s.cloud.noSpot
				s.cloud.mu.Unlock()
			case 6:
				s.cloud.mu.Lock()
				vm := s.cloud.startLocked(simClass, "", fleet.OnDemand)
				vm.offers = false
				planted[vm.ID] = true
				s.cloud.mu.Unlock()
			}
			d := time.Duration(rapid.IntRange(1, 90).Draw(rt, "seconds")) * time.Second
			if err := s.step(d, rapid.Bool().Draw(rt, "woken")); err != nil {
				rt.Fatalf("step: %v", err)
			}
			check(fmt.Sprintf("step %d", i))
		}

		// Converge: no more disruptions, spot back, no more recycling by
		// max_idle_age (with the ceiling full, each replacement waits for
		// the booting VM's claim to be confirmed and retired by a figure),
		// a pass every 20 s for half an hour.
		cfg.MaxIdleAge = 0
		if err := s.configure(cfg); err != nil {
			rt.Fatal(err)
		}
		s.cloud.mu.Lock()
		s.cloud.noSpot = false
		for _, vm := range s.cloud.vms {
			vm.offers = vm.offers && !planted[vm.ID]
		}
		s.cloud.mu.Unlock()
		for i := range 100 {
			if err := s.step(20*time.Second, false); err != nil {
				rt.Fatalf("converging: %v", err)
			}
			check(fmt.Sprintf("converging, pass %d", i))
		}
		s.cloud.mu.Lock()
		s.cloud.boot = func(r *rand.Rand) (time.Duration, bool) { return time.Duration(30+r.IntN(120)) * time.Second, true }
		s.cloud.mu.Unlock()
		// The fleet holds still but for max_idle_age's recycling: one of
		// the next passes, 5 s apart, sees exactly what is wanted.
		var last string
		for i := range 40 {
			if i > 0 {
				if err := s.step(5*time.Second, false); err != nil {
					rt.Fatalf("converging: %v", err)
				}
				check("converged")
			}
			msg, final := converged(s, cfg, max, planted, spot && fallback == "none")
			if msg == "" {
				return
			}
			if final {
				rt.Fatal(msg)
			}
			last = msg
		}
		fst, _ := s.rec.Status()
		rt.Fatalf("%s\nfleet %+v\nledger %+v", last, fst, s.ledger.Status())
	})
}

// converged says what is wrong with the fleet now ("" when nothing is):
// final when it cannot be a transient.
func converged(s *sim, cfg fleet.Config, max int, planted map[string]bool, spotOnly bool) (msg string, final bool) {
	st := s.state()
	liveNow := liveIDs(s)
	claimedLive, booting := 0, 0
	for _, id := range liveNow {
		rec, err := s.t.Get(s.ctx, id)
		switch {
		case err == nil && rec.State == pickup.StateClaimed:
			claimedLive++
		case err != nil && s.clock.Now().Sub(s.cloud.vms[id].LaunchedAt) < cfg.BootTimeout:
			booting++ // a replacement on its way
		}
	}
	if n := livePlanted(s, planted); n > 0 {
		return fmt.Sprintf("%d planted orphans still run after half an hour (orphan_grace 10m)", n), true
	}
	if got := len(liveNow); got != st[pickup.StateIdle]+claimedLive+booting {
		return fmt.Sprintf("%d VMs run, but only %d idle, %d claimed and %d booting runners (records %v)", got, st[pickup.StateIdle], claimedLive, booting, st), false
	}
	want := min(cfg.MinIdle, max-claimedLive)
	if spotOnly {
		// Spot came back, but a snooze may still hold launches.
		if st[pickup.StateIdle]+booting > want {
			return fmt.Sprintf("%d idle (+%d booting) runners; want at most %d", st[pickup.StateIdle], booting, want), false
		}
		return "", false
	}
	if st[pickup.StateIdle]+booting != want {
		return fmt.Sprintf("%d idle (+%d booting) runners after converging; want %d (min_idle %d, ceiling %d, %d claimed)", st[pickup.StateIdle], booting, want, cfg.MinIdle, max, claimedLive), false
	}
	return "", false
}

func livePlanted(s *sim, planted map[string]bool) int {
	n := 0
	for _, id := range liveIDs(s) {
		if planted[id] {
			n++
		}
	}
	return n
}

func liveIDs(s *sim) []string {
	s.cloud.mu.Lock()
	defer s.cloud.mu.Unlock()
	var out []string
	for id, vm := range s.cloud.vms {
		if vm.State == fleet.InstancePending || vm.State == fleet.InstanceRunning {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
