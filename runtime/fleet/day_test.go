package fleet_test

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/rpdhq/rpd/runtime/fleet"
	"github.com/rpdhq/rpd/runtime/ledger"
	"github.com/rpdhq/rpd/runtime/pickup"
)

// The day simulation (docs/fleet.md): a weekday of CI demand run through
// the real pickup manager, ledger and fleet engine on a virtual clock, for
// three warm-pool policies side by side.
//
// Demand: jobs arrive as a Poisson process whose rate follows the working
// day (0.1/min at night, two peaks of about 3/min at 10:30 and 15:00 UTC);
// a job runs for a lognormal time (median 6 min). A job asks the pool for a
// runner; when the pool is exhausted it launches a VM itself (claimed on
// the same ceiling, as callers do without a fleet) and waits for it to
// boot, asking the pool again at every step meanwhile. VMs boot in a
// lognormal time (median 75 s); 3 % never boot. A runner is used once:
// its job releases it for good and the fleet terminates it.

var updateDay = flag.Bool("update", false, "rewrite docs/fleet-day.svg from the day simulation")

const (
	dayStep    = 5 * time.Second
	dayCeiling = 60
)

// dayPolicy is one warm-pool policy.
type dayPolicy struct {
	name      string
	minIdle   int
	schedules []fleet.Schedule
}

func dayPolicies() []dayPolicy {
	weekdays, err := cron.ParseStandard("CRON_TZ=UTC 0 7 * * MON-FRI")
	if err != nil {
		panic(err)
	}
	return []dayPolicy{
		{name: "on demand only (min_idle 0)"},
		{name: "static min_idle 8", minIdle: 8},
		{name: "schedule (2, 12 from 07:00 to 19:00)", minIdle: 2, schedules: []fleet.Schedule{{Name: "weekdays", Starts: weekdays, Duration: 12 * time.Hour, MinIdle: 12}}},
	}
}

// dayResult is one policy's day.
type dayResult struct {
	policy          string
	jobs, hits      int
	waits           []time.Duration // arrival to runner, per job
	idleHours       float64
	overCeiling     int // most VMs over the ceiling at any step
	leaked          int // most VMs unaccounted for at any step
	launchedByFleet uint64
	launchedByJobs  int
	samples         []daySample
}

type daySample struct {
	at                     time.Duration // since midnight
	idle, booting, claimed int
}

func (r dayResult) hitRatio() float64 { return float64(r.hits) / float64(max(r.jobs, 1)) }

func (r dayResult) quantile(q float64) time.Duration {
	if len(r.waits) == 0 {
		return 0
	}
	w := slices.Clone(r.waits)
	slices.Sort(w)
	return w[min(len(w)-1, int(math.Ceil(q*float64(len(w))))-1)]
}

// arrivalRate is jobs per minute at hour h (UTC) of a weekday.
func arrivalRate(h float64) float64 {
	g := func(mu, sigma, peak float64) float64 { return peak * math.Exp(-(h-mu)*(h-mu)/(2*sigma*sigma)) }
	return 0.1 + g(10.5, 1.8, 2.9) + g(15, 2, 2.7)
}

func lognormal(r *rand.Rand, median time.Duration, sigma float64) time.Duration {
	return time.Duration(float64(median) * math.Exp(sigma*r.NormFloat64()))
}

// dayJob is one CI job.
type dayJob struct {
	id      int
	arrived time.Time
	dur     time.Duration
	// runner: the fleet runner it claimed, or its own VM.
	runner, ownVM string
	ownBoot       time.Time
	ownOK         bool
	ownClaim      *ledger.Claim
	started       time.Time
}

func runDay(seed uint64, p dayPolicy, length time.Duration) (dayResult, error) {
	res := dayResult{policy: p.name}
	boot := func(r *rand.Rand) (time.Duration, bool) {
		return lognormal(r, 75*time.Second, 0.35), r.Float64() >= 0.03
	}
	cfg := fleet.Config{Class: simClass, MinIdle: p.minIdle, Schedules: p.schedules, BootTimeout: 5 * time.Minute, OrphanGrace: 10 * time.Minute, MaxLaunch: 50}
	s, err := newSim(simOptions{seed: seed, max: dayCeiling, cfg: cfg, start: monday, spec: fleet.LaunchSpec{UsageClass: fleet.OnDemand}, boot: boot})
	if err != nil {
		return res, err
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	var waiting, running []*dayJob
	seq := 0
	end := monday.Add(length)
	for now := s.clock.Now(); now.Before(end); now = s.clock.Now() {
		// Arrivals in this step.
		lambda := arrivalRate(now.Sub(monday).Hours()) * dayStep.Minutes()
		for range poisson(rng, lambda) {
			seq++
			waiting = append(waiting, &dayJob{id: seq, arrived: now, dur: lognormal(rng, 6*time.Minute, 0.8)})
			res.jobs++
		}
		woken := false
		// Jobs that finished release their runner for good.
		kept := running[:0]
		for _, j := range running {
			if now.Sub(j.started) < j.dur {
				kept = append(kept, j)
				continue
			}
			if j.runner != "" {
				if _, err := s.mgr.Release(s.ctx, j.runner, fmt.Sprintf("job-%d", j.id), pickup.Retire); err != nil && !isCondition(err) {
					return res, err
				}
				woken = true
			} else {
				s.cloud.mu.Lock()
				s.cloud.terminateLocked(j.ownVM)
				s.cloud.mu.Unlock()
			}
		}
		running = kept
		// Waiting jobs: the pool first, else their own VM.
		kept = waiting[:0]
		for _, j := range waiting {
			owner := fmt.Sprintf("job-%d", j.id)
			in, ok, err := s.pickup(owner)
			if err != nil {
				return res, err
			}
			woken = true
			switch {
			case ok:
				if j.ownVM == "" && now.Equal(j.arrived) {
					res.hits++
				}
				if j.ownVM != "" { // a warm runner came first: the own VM goes
					s.cloud.mu.Lock()
					s.cloud.terminateLocked(j.ownVM)
					s.cloud.mu.Unlock()
					j.ownClaim.Cancel()
					delete(s.jobVMs, j.ownVM)
					j.ownVM = ""
				}
				j.runner, j.started = in.ID, now
			case j.ownVM != "" && j.ownOK && !now.Before(j.ownBoot):
				_ = j.ownClaim.Confirm()
				j.started = now
			case j.ownVM != "" && !j.ownOK && now.Sub(j.ownBoot) > 5*time.Minute:
				// It never booted: the job gives up on it and tries again.
				s.cloud.mu.Lock()
				s.cloud.terminateLocked(j.ownVM)
				s.cloud.mu.Unlock()
				j.ownClaim.Cancel()
				delete(s.jobVMs, j.ownVM)
				j.ownVM = ""
			case j.ownVM == "":
				done, cancel := context.WithCancel(s.ctx)
				cancel()
				cl, err := s.ledger.Request(done, ledger.Request{WorkerID: owner, Count: 1})
				if err == nil {
					s.cloud.mu.Lock()
					vm := s.cloud.startLocked("", "", fleet.OnDemand)
					vm.offered = true // a job's own VM never joins the pool
					s.cloud.mu.Unlock()
					j.ownVM, j.ownBoot, j.ownOK, j.ownClaim = vm.ID, vm.bootAt, vm.offers, cl
					s.jobVMs[vm.ID] = true
					res.launchedByJobs++
				}
			}
			if j.started.IsZero() {
				kept = append(kept, j)
				continue
			}
			res.waits = append(res.waits, now.Sub(j.arrived))
			running = append(running, j)
		}
		waiting = kept

		if err := s.step(dayStep, woken); err != nil {
			return res, err
		}
		if over := s.cloud.live() - dayCeiling; over > res.overCeiling {
			res.overCeiling = over
		}
		if n := unaccounted(s, cfg); n > res.leaked {
			res.leaked = n
		}
		if at := s.clock.Now().Sub(monday); at%(5*time.Minute) == 0 {
			// Jobs' own VMs count with the fleet's: booting until their job
			// starts, in use while it runs.
			st, _ := s.rec.Status()
			own := 0
			for _, j := range waiting {
				if j.ownVM != "" {
					own++
				}
			}
			res.samples = append(res.samples, daySample{at: at, idle: st[0].Idle, booting: st[0].Booting + own, claimed: len(running)})
		}
	}
	st, _ := s.rec.Status()
	res.idleHours = st[0].IdleSeconds / 3600
	res.launchedByFleet = st[0].Launched[fleet.OnDemand]
	return res, nil
}

// unaccounted counts the VMs that run without a reason: not a job's own
// VM, no idle or claimed record, and older than boot_timeout plus two
// passes (a VM may boot that long before it offers itself or is reaped).
func unaccounted(s *sim, cfg fleet.Config) int {
	n := 0
	now := s.clock.Now()
	for _, id := range liveIDs(s) {
		if s.jobVMs[id] {
			continue
		}
		if rec, err := s.t.Get(s.ctx, id); err == nil && (rec.State == pickup.StateIdle || rec.State == pickup.StateClaimed) {
			continue
		}
		s.cloud.mu.Lock()
		age := now.Sub(s.cloud.vms[id].LaunchedAt)
		s.cloud.mu.Unlock()
		if age > cfg.BootTimeout+30*time.Second {
			n++
		}
	}
	return n
}

// poisson draws a Poisson variate of mean lambda (Knuth; lambda is small).
func poisson(r *rand.Rand, lambda float64) int {
	l, k, p := math.Exp(-lambda), 0, 1.0
	for {
		p *= r.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// BenchmarkFleetDay runs the day for each policy and reports its figures:
// the pickup hit ratio, the time from a job's arrival to its runner (p50,
// p95), idle runner-hours, the VMs over the ceiling (must be 0) and the VMs
// leaked (must be 0).
func BenchmarkFleetDay(b *testing.B) {
	for _, p := range dayPolicies() {
		b.Run(strings.Fields(p.name)[0], func(b *testing.B) {
			var res dayResult
			for b.Loop() {
				var err error
				if res, err = runDay(1, p, 24*time.Hour); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(100*res.hitRatio(), "hit%")
			b.ReportMetric(res.quantile(0.5).Seconds(), "p50-s")
			b.ReportMetric(res.quantile(0.95).Seconds(), "p95-s")
			b.ReportMetric(res.idleHours, "idle-h")
			b.ReportMetric(float64(res.overCeiling), "over-ceiling")
			b.ReportMetric(float64(res.leaked), "leaked")
			if res.overCeiling > 0 || res.leaked > 0 {
				b.Fatalf("%s: %d VMs over the ceiling, %d leaked; want 0 and 0", p.name, res.overCeiling, res.leaked)
			}
		})
	}
}

// TestFleetDay runs the day once per policy, holds the invariants, and
// prints the table of docs/fleet.md; with -update it rewrites the plot in
// docs/fleet-day.svg.
func TestFleetDay(t *testing.T) {
	if testing.Short() && !*updateDay {
		t.Skip("the day simulation takes a few seconds")
	}
	if raceEnabled {
		// Under the race detector: the busiest hours of the schedule
		// policy, for the invariants (the property tests cover the rest).
		res, err := runDay(1, dayPolicies()[2], 12*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if res.overCeiling > 0 || res.leaked > 0 {
			t.Errorf("%s: %d VMs over the ceiling, %d leaked; want 0 and 0", res.policy, res.overCeiling, res.leaked)
		}
		return
	}
	var results []dayResult
	for _, p := range dayPolicies() {
		res, err := runDay(1, p, 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if res.overCeiling > 0 || res.leaked > 0 {
			t.Errorf("%s: %d VMs over the ceiling, %d leaked; want 0 and 0", p.name, res.overCeiling, res.leaked)
		}
		results = append(results, res)
	}
	if results[2].hitRatio() <= results[0].hitRatio() || results[2].quantile(0.5) >= results[0].quantile(0.5) {
		t.Errorf("the schedule does not beat launching on demand: %+v vs %+v", results[2].hitRatio(), results[0].hitRatio())
	}
	var tb strings.Builder
	fmt.Fprintf(&tb, "| policy | jobs | pickup hit ratio | p50 time to a runner | p95 time to a runner | idle runner-hours | VMs launched (fleet + jobs) | VMs over the ceiling | runners leaked |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&tb, "| %s | %d | %.1f %% | %s | %s | %.1f | %d + %d | %d | %d |\n", r.policy, r.jobs, 100*r.hitRatio(),
			r.quantile(0.5).Round(time.Second), r.quantile(0.95).Round(time.Second), r.idleHours, r.launchedByFleet, r.launchedByJobs, r.overCeiling, r.leaked)
	}
	t.Logf("\n%s", tb.String())
	if *updateDay {
		if err := os.WriteFile("../../docs/fleet-day.svg", []byte(daySVG(results)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// daySVG plots idle, booting and busy runners over the day, one panel per
// policy (the VMs jobs launched themselves included).
func daySVG(results []dayResult) string {
	const w, ph, left, top, gap = 900, 170, 50, 30, 40
	peak := 1
	for _, r := range results {
		for _, s := range r.samples {
			peak = max(peak, s.idle, s.booting, s.claimed)
		}
	}
	peak = (peak + 4) / 5 * 5
	h := top + len(results)*(ph+gap) + 20
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="14">Runners over a simulated weekday (BenchmarkFleetDay, seed 1): idle, booting, busy</text>`+"\n", left)
	series := []struct {
		name, color string
		get         func(daySample) int
	}{{"idle", "#2e7d32", func(s daySample) int { return s.idle }}, {"booting", "#ef6c00", func(s daySample) int { return s.booting }}, {"busy", "#1565c0", func(s daySample) int { return s.claimed }}}
	pw := w - left - 20
	for i, r := range results {
		y0 := top + i*(ph+gap) + 20
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", left, y0-6, r.policy)
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", left, y0, pw, ph)
		for hr := 0; hr <= 24; hr += 3 {
			x := left + hr*pw/24
			fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#eee"/><text x="%d" y="%d" text-anchor="middle" fill="#555">%02d:00</text>`+"\n", x, y0, x, y0+ph, x, y0+ph+14, hr)
		}
		for v := 0; v <= peak; v += max(peak/5, 1) {
			y := y0 + ph - v*ph/peak
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end" fill="#555">%d</text>`+"\n", left-6, y+4, v)
		}
		for _, se := range series {
			var pts []string
			for _, s := range r.samples {
				x := float64(left) + float64(pw)*s.at.Hours()/24
				y := float64(y0+ph) - float64(se.get(s)*ph)/float64(peak)
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", se.color, strings.Join(pts, " "))
		}
	}
	for k, se := range series {
		x := left + 200 + k*110
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/><text x="%d" y="%d">%s</text>`+"\n", x, h-14, x+24, h-14, se.color, x+30, h-10, se.name)
	}
	b.WriteString("</svg>\n")
	return b.String()
}
