package daemon

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rpdhq/rpd/api"
)

func BenchmarkZZQuantiles(b *testing.B) {
	td := startDaemon(b, `pool "load" { slots = 64 }`)
	defer TuneGC()()
	ctx := context.Background()
	var mu sync.Mutex
	var pair []time.Duration
	b.SetParallelism(8)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var lp []time.Duration
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
			lp = append(lp, time.Since(t0))
		}
		mu.Lock()
		pair = append(pair, lp...)
		mu.Unlock()
	})
	el := time.Since(start)
	slices.Sort(pair)
	b.ReportMetric(float64(len(pair))/el.Seconds(), "pairs/s")
	for _, q := range []float64{0.5, 0.75, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999} {
		b.ReportMetric(float64(pair[int(float64(len(pair))*q)].Microseconds()), fmt.Sprintf("q%v", q))
	}
}
