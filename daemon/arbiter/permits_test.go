package arbiter

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/internal/clocktest"
	"github.com/rpdhq/rpd/runtime/pools"
	"pgregory.net/rapid"
)

// Every permit is released exactly once, whether by release or expiry,
// whatever the interleaving.
func TestPermitTableReleasesExactlyOnce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clock := newFakeClock()
		tab := newPermitTable(clock, nil)
		var released []atomic.Int32
		released = make([]atomic.Int32, 20)
		var ids []string
		n := rapid.IntRange(1, 20).Draw(t, "permits")
		for i := range n {
			ttl := time.Duration(rapid.IntRange(1, 10).Draw(t, "ttl")) * time.Second
			l, err := tab.add(context.Background(), api.Lease{Budget: "b"}, ttl, func() { released[i].Add(1) })
			if err != nil {
				t.Fatal(err)
			}
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
		for _, id := range ids {
			_ = tab.release(id, "")
		}
		clock.Advance(time.Hour)
		for i := range n {
			if got := released[i].Load(); got != 1 {
				t.Fatalf("permit %d released %d times", i, got)
			}
		}
		if tab.count()["b"] != 0 {
			t.Fatal("permits left after releasing all")
		}
	})
}

func TestPermitTableConcurrentRace(t *testing.T) {
	clock := newFakeClock()
	tab := newPermitTable(clock, nil)
	var releases atomic.Int64
	var wg sync.WaitGroup
	const workers, per = 8, 200
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			for i := 0; i < per; i++ {
				l, err := tab.add(context.Background(), api.Lease{Budget: "b"}, time.Second, func() { releases.Add(1) })
				if err != nil {
					t.Error(err)
					return
				}
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

// fakeClock is a clocktest.Fake seen as a pools.Clock.
type fakeClock struct{ *clocktest.Fake }

func (c *fakeClock) AfterFunc(d time.Duration, f func()) pools.Timer { return c.Fake.AfterFunc(d, f) }

func newFakeClock() *fakeClock { return &fakeClock{clocktest.NewFake(time.Unix(1_700_000_000, 0))} }
