package local

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/runtime/pools"
)

// BenchmarkApplyTick measures the applier's work for one tick of
// BenchmarkAcquireReleaseHTTP's load (daemon): 850 leases granted and
// released by 16 clients, so 1,700 records with 16 leases in flight at
// each end. Its time per op is how long the applier holds a core per
// tick; the records are written untimed.
func BenchmarkApplyTick(b *testing.B) {
	be, err := Open(context.Background(), filepath.Join(b.TempDir(), "t.db"), Options{Stack: "s"})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	ctx := context.Background()
	l, _, err := be.AcquireLeader(ctx, backend.LeaderClaim{Holder: "bench", Lease: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	be.j.paused.Store(true)
	ps := be.PoolStore().Fence(l.Epoch)
	const clients, perTick = 16, 850
	n := 0
	tick := func() {
		var wg sync.WaitGroup
		for c := range clients {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				for i := range perTick / clients {
					id := fmt.Sprint("l", n, "-", c, "-", i)
					rec := pools.LeaseRecord{LeaseID: id, Pool: "p", TaskID: "t", Slots: 1, GrantedAt: time.Unix(1, 0), ExpiresAt: time.Unix(2, 0), TTL: time.Minute}
					if err := ps.CreateLease(ctx, rec); err != nil {
						b.Error(err)
						return
					}
					if i == perTick/clients-1 {
						return // in flight at the tick
					}
					if err := ps.DeleteLease(ctx, id); err != nil {
						b.Error(err)
						return
					}
				}
			}(c)
		}
		wg.Wait()
		n++
	}
	applyAll := func() int {
		t := 0
		for ; t < 100 && be.journalPending(); t++ {
			if err := be.applyJournal(ctx); err != nil {
				b.Fatal(err)
			}
		}
		if be.journalPending() {
			b.Fatalf("records still pending after %d applies", t)
		}
		return t
	}
	tick()
	applyAll()
	b.ResetTimer()
	txs := 0
	for range b.N {
		b.StopTimer()
		tick()
		b.StartTimer()
		txs += applyAll()
	}
	b.ReportMetric(float64(txs)/float64(b.N), "txs/op")
}
