package pickup_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/runtime/pickup"
)

// slowQueue and slowTable add a fixed latency to every backend call, the
// order of a real SQS/DynamoDB round trip.
type slowQueue struct {
	pickup.Queue
	d time.Duration
}

func (q slowQueue) Send(ctx context.Context, body string, delay time.Duration) error {
	time.Sleep(q.d)
	return q.Queue.Send(ctx, body, delay)
}
func (q slowQueue) Receive(ctx context.Context, max int, vis, wait time.Duration) ([]pickup.Message, error) {
	time.Sleep(q.d)
	return q.Queue.Receive(ctx, max, vis, wait)
}
func (q slowQueue) Delete(ctx context.Context, h string) error {
	time.Sleep(q.d)
	return q.Queue.Delete(ctx, h)
}
func (q slowQueue) ChangeVisibility(ctx context.Context, h string, d time.Duration) error {
	time.Sleep(q.d)
	return q.Queue.ChangeVisibility(ctx, h, d)
}
func (q slowQueue) DeleteBatch(ctx context.Context, hs []string) error {
	time.Sleep(q.d)
	return q.Queue.DeleteBatch(ctx, hs)
}
func (q slowQueue) ChangeVisibilityBatch(ctx context.Context, hs []string, d time.Duration) error {
	time.Sleep(q.d)
	return q.Queue.ChangeVisibilityBatch(ctx, hs, d)
}

type slowTable struct {
	pickup.InstanceTable
	d time.Duration
}

func (t slowTable) Put(ctx context.Context, in pickup.Instance) error {
	time.Sleep(t.d)
	return t.InstanceTable.Put(ctx, in)
}
func (t slowTable) Get(ctx context.Context, id string) (pickup.Instance, error) {
	time.Sleep(t.d)
	return t.InstanceTable.Get(ctx, id)
}
func (t slowTable) Transition(ctx context.Context, tr pickup.Transition) (pickup.Instance, error) {
	time.Sleep(t.d)
	return t.InstanceTable.Transition(ctx, tr)
}

const malformedBody = `{"instanceId":"junk","usageClass":"spot"}`

// benchMixed runs concurrent pickups on a queue mixing matches (on-demand),
// misfits (spot) and malformed messages until b.N decisions were made, and
// reports decisions/s and the pickup latency.
func benchMixed(b *testing.B, rawQ pickup.Queue, rawT pickup.InstanceTable, class string, workers int, rtt time.Duration, mode pickup.Mode) {
	ctx := context.Background()
	cfg := pickup.Config{
		Class: class, CPU: 2, Mem: 4 << 30, InstanceTypes: []string{"c6i.*"},
		RequeueDelay: time.Second, EmptyConfirmWait: pickup.ShortPollConfirm, Mode: mode,
	}
	if rtt == 0 {
		cfg.RequeueDelay = time.Millisecond // the local backend counts in ms: misfits return at once
	}
	// Fill the pool through the unwrapped backend, outside the timing.
	setup, err := pickup.NewManager(cfg, rawQ, rawT, pickup.Options{Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	var q pickup.Queue = rawQ
	var t pickup.InstanceTable = rawT
	if rtt > 0 {
		q, t = slowQueue{rawQ, rtt}, slowTable{rawT, rtt}
	}
	m, err := pickup.NewManager(cfg, q, t, pickup.Options{Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	// The pool, interleaved: 4 matches (on-demand), 2 misfits (spot) and 1
	// malformed message, repeated until there are more messages than
	// decisions to make, so that nothing needs to be re-offered or re-sent
	// inside the timing.
	threshold := time.Now().Add(24 * time.Hour)
	offer := func(usage string, i int) {
		in := pickup.Instance{ID: fmt.Sprintf("%s-%s-%d", class, usage, i), UsageClass: usage, InstanceType: "c6i.large",
			CPU: 2, MemMiB: 4096, ResourceClass: "medium", Threshold: threshold}
		if err := setup.Offer(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
	for i := range b.N + 60 {
		offer(pickup.UsageOnDemand, i)
		if i%2 == 1 { // a misfit for every 2 matches
			offer(pickup.UsageSpot, i)
		}
		if i%4 == 3 { // and a malformed message for every 4 matches
			if err := rawQ.Send(ctx, malformedBody, 0); err != nil {
				b.Fatal(err)
			}
		}
	}
	var stop atomic.Bool
	var claimed atomic.Int64
	var wg sync.WaitGroup
	n := uint64(b.N)
	b.ResetTimer()
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				_, err := m.Pickup(ctx, pickup.Requirements{UsageClass: pickup.UsageOnDemand}, fmt.Sprintf("w%d-%d", w, i))
				switch {
				case err == nil:
					claimed.Add(1)
				case !errors.Is(err, pickup.ErrExhausted):
					b.Error(err)
					return
				}
				if m.Decisions() >= n {
					stop.Store(true)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	s := m.Stats(ctx)
	b.ReportMetric(float64(s.Decisions())/elapsed.Seconds(), "decisions/s")
	b.ReportMetric(float64(s.Latency.P50.Microseconds())/1000, "p50-pickup-ms")
	if rtt > 0 {
		// Under load a request also waits for the batches ahead of it; a
		// lone request shows what a pickup itself costs.
		b.ReportMetric(float64(s.Latency.P50)/float64(rtt), "p50-round-trips-loaded")
		lone, err := pickup.NewManager(cfg, q, t, pickup.Options{Logger: discardLogger()})
		if err != nil {
			b.Fatal(err)
		}
		for i := range 41 {
			if _, err := lone.Pickup(ctx, pickup.Requirements{UsageClass: pickup.UsageOnDemand}, fmt.Sprint("lone-", i)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(lone.Stats(ctx).Latency.P50)/float64(rtt), "p50-round-trips")
	}
	b.Logf("N=%d decisions=%d passed=%d requeued=%d discarded=%v exhausted g/l=%d/%d lost-race=%d latency=%+v",
		b.N, s.Decisions(), s.Passed, s.Requeued, s.Discarded, s.ExhaustedGlobal, s.ExhaustedLocal, s.ClaimLostRace, s.Latency)
}

func benchLocal(b *testing.B) (pickup.Queue, pickup.InstanceTable) {
	e, _ := openLocal(b, filepath.Join(b.TempDir(), "state.db"), time.Now)
	return e.q, e.t
}

// BenchmarkPickupLocal: one op is one decision (pass-on, re-queue or
// discard) on the SQLite backend.
func BenchmarkPickupLocal(b *testing.B) {
	q, t := benchLocal(b)
	benchMixed(b, q, t, "medium", 16, 0, pickup.ModeLease)
}

// BenchmarkPickupLocalDeleteMode is the same-run baseline: the seed's
// literal loop (delete on receive, re-send misfits).
func BenchmarkPickupLocalDeleteMode(b *testing.B) {
	q, t := benchLocal(b)
	benchMixed(b, q, t, "medium", 16, 0, pickup.ModeDelete)
}

// BenchmarkPickupLatency10ms: the same with 10 ms added to every backend
// call, one manager.
func BenchmarkPickupLatency10ms(b *testing.B) {
	const rtt = 10 * time.Millisecond
	q, t := benchLocal(b)
	benchMixed(b, q, t, "medium", 16, rtt, pickup.ModeLease)
}

// BenchmarkPickupLatency10msDeleteMode: the seed's literal loop with the
// same added latency, as a baseline.
func BenchmarkPickupLatency10msDeleteMode(b *testing.B) {
	q, t := benchLocal(b)
	benchMixed(b, q, t, "medium", 16, 10*time.Millisecond, pickup.ModeDelete)
}

// BenchmarkPickupEmulator: the same on the SQS and DynamoDB emulators.
func BenchmarkPickupEmulator(b *testing.B) {
	_, be := openAWS(b, "bench", "pb")
	ctx := context.Background()
	class := nextClass()
	if err := be.CreateQueue(ctx, "rp-"+class, backend.QueueAttributes{VisibilityTimeout: 30 * time.Second}); err != nil {
		b.Fatal(err)
	}
	benchMixed(b, be.Queue("rp-"+class), be.Instances(), class, 16, 0, pickup.ModeLease)
}
