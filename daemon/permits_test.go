package daemon

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rpdhq/rpd/api"
)

// Every permit is released exactly once, whether by release, expiry or
// releaseAll, whatever the interleaving.
func TestPermitTableReleasesExactlyOnce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clock := newFakeClock()
		tab := newPermitTable(clock)
		var released []atomic.Int32
		released = make([]atomic.Int32, 20)
		var ids []string
		n := rapid.IntRange(1, 20).Draw(t, "permits")
		for i := range n {
			ttl := time.Duration(rapid.IntRange(1, 10).Draw(t, "ttl")) * time.Second
			l := tab.add(api.Lease{Budget: "b"}, ttl, func() { released[i].Add(1) })
			ids = append(ids, l.LeaseID)
		}
		for step := range rapid.IntRange(0, 40).Draw(t, "steps") {
			_ = step
			i := rapid.IntRange(0, n-1).Draw(t, "i")
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0:
				_ = tab.release(ids[i], "")
			case 1:
				_, _ = tab.heartbeat(ids[i])
			case 2:
				clock.Advance(time.Duration(rapid.IntRange(0, 4000).Draw(t, "ms")) * time.Millisecond)
			}
		}
		if held := tab.count()["b"]; held < 0 || held > n {
			t.Fatalf("count %d out of range", held)
		}
		tab.releaseAll()
		clock.Advance(time.Hour)
		for i := range n {
			if got := released[i].Load(); got != 1 {
				t.Fatalf("permit %d released %d times", i, got)
			}
		}
		if tab.count()["b"] != 0 {
			t.Fatal("permits left after releaseAll")
		}
	})
}

func TestPermitTableConcurrentRace(t *testing.T) {
	clock := newFakeClock()
	tab := newPermitTable(clock)
	var releases atomic.Int64
	var wg sync.WaitGroup
	const workers, per = 8, 200
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			for i := 0; i < per; i++ {
				l := tab.add(api.Lease{Budget: "b"}, time.Second, func() { releases.Add(1) })
				if i%3 == 0 {
					_, _ = tab.heartbeat(l.LeaseID)
				}
				if i%2 == 0 {
					_ = tab.release(l.LeaseID, "b")
				}
			}
		})
	}
	wg.Go(func() {
		for i := 0; i < 200; i++ {
			clock.Advance(10 * time.Millisecond)
		}
	})
	wg.Wait()
	clock.Advance(time.Hour)
	if got := releases.Load(); got != workers*per {
		t.Fatalf("%d releases for %d permits", got, workers*per)
	}
}
