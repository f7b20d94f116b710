package ledger

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// The simulation: workers ask for VMs, boot them, confirm once the provider
// shows them, run them and finish. The provider's usage figure shows a VM only
// after a random lag of 0 … 2 × poll interval after it really started (and
// keeps showing it for a while after it stopped). Real running VMs must never
// exceed Max with the ledger; the seed's naive bookkeeping (the provider's
// figure plus grants since that figure) does exceed it.

const (
	simTick         = time.Second
	simPoll         = 5 * time.Second
	simTicks        = 20000 // 5.5 simulated hours
	simMax          = 20
	simWorkers      = 60
	simPollFailRate = 0.05
)

// simArm is one bookkeeping strategy under test.
type simArm interface {
	ask(worker string, now time.Time) (simGrant, bool)
	confirm(g simGrant)
	cancel(g simGrant)
	observe(n int, at time.Time)
	pollFailed()
}

type simGrant any

// ledgerArm drives a real Ledger the way a seed worker would: TryRequest each
// time it asks, Confirm once its VM is visible, Cancel if it never starts one.
type ledgerArm struct{ l *Ledger }

func (a ledgerArm) ask(worker string, _ time.Time) (simGrant, bool) {
	c, err := a.l.TryRequest(Request{WorkerID: worker, Count: 1})
	if err != nil {
		if !errors.Is(err, ErrUnavailable) {
			panic(err)
		}
		return nil, false
	}
	return c, true
}
func (a ledgerArm) confirm(g simGrant) { _ = g.(*Claim).Confirm() } // an expired claim's VM is covered by the figure
func (a ledgerArm) cancel(g simGrant)  { g.(*Claim).Cancel() }
func (a ledgerArm) observe(n int, at time.Time) {
	if err := a.l.ObserveUsage(n, at); err != nil {
		panic(err)
	}
}
func (a ledgerArm) pollFailed() { a.l.recordSourceError(errors.New("simulated poll failure")) }

// naiveArm is the seed's problem statement: a local count reset to the
// provider's figure on every ping and incremented per grant.
type naiveArm struct {
	max, count int
	have       bool
}

func (a *naiveArm) ask(string, time.Time) (simGrant, bool) {
	if !a.have || a.count+1 > a.max {
		return nil, false
	}
	a.count++
	return struct{}{}, true
}
func (a *naiveArm) confirm(simGrant)           {}
func (a *naiveArm) cancel(simGrant)            { a.count-- }
func (a *naiveArm) observe(n int, _ time.Time) { a.count, a.have = n, true }
func (a *naiveArm) pollFailed()                {}

type simVM struct {
	visibleFrom, visibleUntil time.Time // as the provider reports it
	running                   bool
}

type simWorker struct {
	name      string
	nextAsk   time.Time
	grant     simGrant
	vm        *simVM
	confirmAt time.Time // zero: this worker never confirms
	endAt     time.Time
}

type simResult struct {
	grants          int
	overbookedTicks int // ticks on which real running VMs exceeded max
	worstExcess     int
	peakRunning     int
	runningTicks    int // sum over ticks of running VMs, for utilisation
}

func runSimulation(seed uint64, arm simArm, clk *fakeClock) simResult {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	dur := func(lo, hi time.Duration) time.Duration { // uniform in [lo, hi], whole ticks
		return lo + time.Duration(rng.Int64N(int64((hi-lo)/simTick)+1))*simTick
	}
	var vms []*simVM
	workers := make([]*simWorker, simWorkers)
	for i := range workers {
		workers[i] = &simWorker{name: fmt.Sprintf("w%02d", i), nextAsk: clk.Now().Add(dur(0, 30*time.Second))}
	}
	type simFigure struct {
		n          int
		at, arrive time.Time
	}
	var inFlight []simFigure // in taking order; latency < poll interval keeps arrival order too
	var res simResult
	outageUntil := time.Time{}
	for tick := 0; tick < simTicks; tick++ {
		clk.Advance(simTick)
		now := clk.Now()

		running := 0
		for _, w := range workers {
			if w.vm == nil {
				continue
			}
			if !w.confirmAt.IsZero() && !now.Before(w.confirmAt) {
				arm.confirm(w.grant)
				w.confirmAt = time.Time{}
			}
			if !now.Before(w.endAt) {
				w.vm.running = false
				w.vm.visibleUntil = now.Add(dur(0, 2*simPoll)) // the figure lags stops too
				w.vm, w.grant = nil, nil
				w.nextAsk = now.Add(dur(0, 60*time.Second))
			}
		}

		// Figures arrive some time after they were taken (the poll's own
		// latency); a figure is as of when it was taken.
		for len(inFlight) > 0 && !now.Before(inFlight[0].arrive) {
			arm.observe(inFlight[0].n, inFlight[0].at)
			inFlight = inFlight[1:]
		}

		if tick%int(simPoll/simTick) == 0 {
			if rng.Float64() < 0.002 { // a 40-second outage: longer than stale_after
				outageUntil = now.Add(40 * time.Second)
			}
			if now.Before(outageUntil) || rng.Float64() < simPollFailRate {
				arm.pollFailed()
			} else {
				n := 0
				kept := vms[:0]
				for _, vm := range vms {
					if !vm.running && !now.Before(vm.visibleUntil) {
						continue // gone at the provider for good
					}
					kept = append(kept, vm)
					if !now.Before(vm.visibleFrom) && (vm.running || now.Before(vm.visibleUntil)) {
						n++
					}
				}
				vms = kept
				inFlight = append(inFlight, simFigure{n: n, at: now, arrive: now.Add(dur(0, 3*time.Second))})
			}
		}

		for _, w := range workers {
			if w.vm != nil || now.Before(w.nextAsk) {
				continue
			}
			g, ok := arm.ask(w.name, now)
			if !ok {
				w.nextAsk = now.Add(dur(simTick, 3*simTick)) // ask again later
				continue
			}
			res.grants++
			if rng.Float64() < 0.03 { // decided not to start the VM
				arm.cancel(g)
				w.nextAsk = now.Add(dur(0, 30*time.Second))
				continue
			}
			lag := dur(0, 2*simPoll)
			vm := &simVM{visibleFrom: now.Add(lag), running: true}
			vms = append(vms, vm)
			w.vm, w.grant = vm, g
			w.confirmAt = time.Time{}
			if rng.Float64() >= 0.05 { // 5% of workers crash before confirming
				w.confirmAt = vm.visibleFrom.Add(dur(0, 3*time.Second))
			}
			w.endAt = now.Add(dur(30*time.Second, 5*time.Minute))
		}

		for _, w := range workers {
			if w.vm != nil {
				running++
			}
		}
		res.runningTicks += running
		if running > res.peakRunning {
			res.peakRunning = running
		}
		if running > simMax {
			res.overbookedTicks++
			if running-simMax > res.worstExcess {
				res.worstExcess = running - simMax
			}
		}
	}
	return res
}

func TestSimulationNeverOverbooks(t *testing.T) {
	seeds := []uint64{1, 2, 3}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			utilisation := func(r simResult) float64 { return float64(r.runningTicks) / float64(simTicks*simMax) }

			clk := newFakeClock()
			naive := runSimulation(seed, &naiveArm{max: simMax}, clk)
			t.Logf("naive:                 %5d grants, over-booked on %5d of %d ticks, worst +%d VMs, peak %d of max %d, utilisation %.0f%%",
				naive.grants, naive.overbookedTicks, simTicks, naive.worstExcess, naive.peakRunning, simMax, 100*utilisation(naive))
			if naive.overbookedTicks == 0 {
				t.Errorf("naive bookkeeping never over-booked: the simulation does not reproduce the seed's race")
			}

			for _, mode := range []GrantMode{GrantNextUsage, GrantImmediate} {
				clk := newFakeClock()
				l, err := New(Config{Max: simMax, PollInterval: simPoll, Grant: mode}, WithClock(clk))
				if err != nil {
					t.Fatal(err)
				}
				r := runSimulation(seed, ledgerArm{l}, clk)
				st := l.Stats()
				t.Logf("ledger %-10s: %5d grants, over-booked on %5d of %d ticks, worst +%d VMs, peak %d of max %d, utilisation %.0f%%; expired-unconfirmed %d, denied-stale %d, source errors %d",
					mode, r.grants, r.overbookedTicks, simTicks, r.worstExcess, r.peakRunning, simMax, 100*utilisation(r),
					st.ExpiredUnconfirmed, st.DeniedStale, st.SourceErrors)
				if r.overbookedTicks != 0 || r.peakRunning > simMax {
					t.Errorf("ledger (%s) over-booked on %d ticks, peak %d > max %d", mode, r.overbookedTicks, r.peakRunning, simMax)
				}
				// Safe by granting nothing would be no fix: demand exceeds max,
				// so the ledger must keep the ceiling well used.
				if u := utilisation(r); u < 0.6 {
					t.Errorf("ledger (%s) utilisation %.0f%%, want >= 60%%", mode, 100*u)
				}
				if st.ExpiredUnconfirmed == 0 || st.DeniedStale == 0 || st.SourceErrors == 0 {
					t.Errorf("ledger (%s) stats %+v: the run should exercise expiry, staleness and source errors", mode, st)
				}
			}
		})
	}
}
