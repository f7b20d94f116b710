package daemon

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/rpdhq/rpd/api"
)

// BenchmarkAcquireReleaseHTTP is the load test: concurrent clients over
// 127.0.0.1, each op one acquire (answer at once) plus one release of a
// slot of a 64-slot pool, through the Go client. It reports pairs/s and
// the p50/p99 latency of a pair. Run with -cpu to vary the client count
// (RunParallel uses GOMAXPROCS×parallelism goroutines).
func BenchmarkAcquireReleaseHTTP(b *testing.B) {
	td := startDaemon(b, `pool "load" { slots = 64 }`)
	ctx := context.Background()
	var mu sync.Mutex
	var lat []time.Duration
	b.SetParallelism(8)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		local := make([]time.Duration, 0, 1024)
		for pb.Next() {
			t0 := time.Now()
			l, err := td.c.Acquire(ctx, "load", api.AcquireRequest{TaskID: "bench", WaitSeconds: 5})
			if err != nil {
				b.Error(err)
				return
			}
			if err := td.c.Release(ctx, l.LeaseID); err != nil {
				b.Error(err)
				return
			}
			local = append(local, time.Since(t0))
		}
		mu.Lock()
		lat = append(lat, local...)
		mu.Unlock()
	})
	el := time.Since(start)
	b.StopTimer()
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(len(lat))/el.Seconds(), "pairs/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkStatusHTTP is the same-run baseline: one GET of a small
// document per op, the cheapest round trip the API has.
func BenchmarkStatusHTTP(b *testing.B) {
	td := startDaemon(b, `pool "load" { slots = 64 }`)
	ctx := context.Background()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := td.c.Health(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
