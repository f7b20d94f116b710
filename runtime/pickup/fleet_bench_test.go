package pickup_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/runtime/pickup"
)

// The mixed fleet of the issue "Pickup beyond the seed": one class, two
// usage classes × three instance types, 200 idle runners, and 8 request
// streams with a skewed mix (6 ask for on-demand, 2 for spot), 40 requests
// per stream, one each 10 ms; a served runner stays claimed, so the
// on-demand runners run out (240 requests for 100) and later "exhausted"
// answers to them are true. An "exhausted" answer given while more matching
// runners were idle than there are streams (each other stream could be
// claiming one) is false: its caller would launch a VM for nothing.
var (
	fleetTypes   = []string{"c6i.large", "m6i.large", "m7i.large"}
	fleetStreams = []pickup.Requirements{
		{UsageClass: pickup.UsageOnDemand, InstanceTypes: []string{"c6i.*"}},
		{UsageClass: pickup.UsageOnDemand, InstanceTypes: []string{"m6i.*"}},
		{UsageClass: pickup.UsageOnDemand, InstanceTypes: []string{"m7i.large"}},
		{UsageClass: pickup.UsageOnDemand},
		{UsageClass: pickup.UsageOnDemand, InstanceTypes: []string{"c6i.*", "m6i.*"}},
		{UsageClass: pickup.UsageOnDemand, MinCPU: 2},
		{UsageClass: pickup.UsageSpot, InstanceTypes: []string{"m?i.large"}},
		{UsageClass: pickup.UsageSpot},
	}
)

const (
	fleetRunners   = 200
	fleetPerStream = 40
	fleetGap       = 10 * time.Millisecond
)

// fleetResult is one algorithm's run.
type fleetResult struct {
	answers, served, exhausted, falseExhausted int
	decisions                                  uint64
	elapsed                                    time.Duration
}

func (r fleetResult) falseShare() float64 {
	if r.answers == 0 {
		return 0
	}
	return 100 * float64(r.falseExhausted) / float64(r.answers)
}

// runFleet offers the fleet on a fresh class queue of q/t and runs the
// streams against one manager configured by cfg.
func runFleet(b *testing.B, q pickup.Queue, t pickup.InstanceTable, cfg pickup.Config) fleetResult {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	m, err := pickup.NewManager(cfg, q, t, pickup.Options{Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	threshold := time.Now().Add(24 * time.Hour)
	for i := range fleetRunners {
		usage := pickup.UsageOnDemand
		if i%2 == 1 {
			usage = pickup.UsageSpot
		}
		in := pickup.Instance{ID: fmt.Sprintf("%s-r%03d", cfg.Class, i), UsageClass: usage, InstanceType: fleetTypes[(i/2)%3],
			CPU: 2, MemMiB: 4096, ResourceClass: "medium", Threshold: threshold}
		if err := m.Offer(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
	var res fleetResult
	var mu sync.Mutex
	var seq atomic.Int64
	start := time.Now()
	var streams sync.WaitGroup
	for s, req := range fleetStreams {
		streams.Go(func() {
			tick := time.NewTicker(fleetGap)
			defer tick.Stop()
			for range fleetPerStream {
				<-tick.C
				owner := fmt.Sprintf("s%d-%d", s, seq.Add(1))
				_, err := m.Pickup(ctx, req, owner)
				switch {
				case err == nil:
					mu.Lock()
					res.answers++
					res.served++
					mu.Unlock()
				case errors.Is(err, pickup.ErrExhausted):
					idle := matchingIdle(ctx, b, t, cfg.Class, req)
					mu.Lock()
					res.answers++
					res.exhausted++
					if idle > len(fleetStreams) {
						res.falseExhausted++
					}
					mu.Unlock()
				default:
					b.Error(err)
					return
				}
			}
		})
	}
	streams.Wait()
	res.elapsed = time.Since(start)
	res.decisions = m.Decisions()
	m.GiveBack(ctx)
	return res
}

// matchingIdle counts the idle runners of class that meet req.
func matchingIdle(ctx context.Context, b *testing.B, t pickup.InstanceTable, class string, req pickup.Requirements) int {
	idle, err := t.List(ctx, class, pickup.StateIdle)
	if err != nil {
		b.Error(err)
		return 0
	}
	n := 0
	for _, in := range idle {
		if req.Matches(pickup.EntryFor(in)) {
			n++
		}
	}
	return n
}

// benchFleet runs the seed's algorithm (the same manager with holding off)
// and rpd's on fresh queues made by fresh, b.N times each, and reports the
// share of false "exhausted" answers of both.
func benchFleet(b *testing.B, fresh func() (pickup.Queue, pickup.InstanceTable, string), confirm time.Duration) {
	var seed, rpd fleetResult
	add := func(sum *fleetResult, r fleetResult) {
		sum.answers += r.answers
		sum.served += r.served
		sum.exhausted += r.exhausted
		sum.falseExhausted += r.falseExhausted
		sum.decisions += r.decisions
		sum.elapsed += r.elapsed
	}
	for range b.N {
		for _, hold := range []int{pickup.NoHold, 0} {
			q, t, class := fresh()
			cfg := pickup.Config{
				Class: class, CPU: 2, Mem: 4 << 30, InstanceTypes: []string{"c6i.*", "m6i.*", "m7i.*"},
				RequeueDelay: 3 * time.Second, EmptyConfirmWait: confirm, HoldMisfits: hold,
			}
			r := runFleet(b, q, t, cfg)
			if hold == pickup.NoHold {
				add(&seed, r)
			} else {
				add(&rpd, r)
			}
		}
	}
	b.ReportMetric(seed.falseShare(), "seed-false-exhausted-%")
	b.ReportMetric(rpd.falseShare(), "false-exhausted-%")
	b.ReportMetric(float64(rpd.decisions)/rpd.elapsed.Seconds(), "decisions/s")
	b.Logf("seed: %+v", seed)
	b.Logf("rpd:  %+v", rpd)
}

// BenchmarkMixedFleetFalseExhaustion: run with -benchtime=1x (one op is
// a whole fleet run of each algorithm).
func BenchmarkMixedFleetFalseExhaustion(b *testing.B) {
	b.Run("local", func(b *testing.B) {
		benchFleet(b, func() (pickup.Queue, pickup.InstanceTable, string) {
			q, t := benchLocal(b)
			return q, t, "medium"
		}, pickup.ShortPollConfirm)
	})
	b.Run("emulator", func(b *testing.B) {
		_, be := openAWS(b, "bench", "fleet")
		ctx := context.Background()
		benchFleet(b, func() (pickup.Queue, pickup.InstanceTable, string) {
			class := nextClass()
			if err := be.CreateQueue(ctx, "rp-"+class, backend.QueueAttributes{VisibilityTimeout: 30 * time.Second}); err != nil {
				b.Fatal(err)
			}
			return be.Queue("rp-" + class), be.Instances(), class
		}, 0)
	})
}
