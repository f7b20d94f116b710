package ledger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// TestStressConcurrent runs requests (blocking and ticketed), confirms,
// cancels by reference and by ID, clock-driven expiries, figures and
// reconfigures all at once under -race, then checks that every claim ended
// exactly one way and nothing is left counting or queued.
func TestStressConcurrent(t *testing.T) {
	clk := newFakeClock()
	l, err := New(Config{Max: 4, Grant: GrantImmediate}, WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.ObserveUsage(0, clk.Now()); err != nil {
		t.Fatal(err)
	}
	const (
		workers = 8
		ops     = 300
	)
	var (
		wg      sync.WaitGroup
		idsMu   sync.Mutex
		ids     = map[ClaimID]string{}
		seen    int
		failure = make(chan string, workers+4)
	)
	record := func(c *Claim, who string) {
		idsMu.Lock()
		defer idsMu.Unlock()
		seen++
		if prev, dup := ids[c.ID()]; dup && prev != who {
			failure <- fmt.Sprintf("claim %s handed to %s and %s", c.ID(), prev, who)
		}
		ids[c.ID()] = who
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			name := fmt.Sprintf("w%d", w)
			for i := 0; i < ops; i++ {
				req := Request{WorkerID: name, Count: 1 + rng.IntN(2)}
				var c *Claim
				var err error
				if rng.IntN(2) == 0 {
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(500))*time.Microsecond)
					c, err = l.Request(ctx, req)
					cancel()
				} else {
					c, err = l.TryRequest(req)
				}
				if err != nil {
					if !errors.Is(err, ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrTooLarge) {
						failure <- fmt.Sprintf("%s: unexpected error %v", name, err)
						return
					}
					continue
				}
				record(c, name)
				switch rng.IntN(4) {
				case 0:
					_ = c.Confirm()
				case 1:
					c.Cancel()
				case 2:
					if got, ok := l.Lookup(c.ID()); ok {
						got.Cancel()
						got.Cancel()
					}
				default: // let it expire
				}
			}
		}(w)
	}
	// Background actors run until the workers are done (and at most a
	// bounded number of rounds).
	stop := make(chan struct{})
	running := func(i int) bool {
		select {
		case <-stop:
			return false
		default:
			return i < 200_000
		}
	}
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { // clock and figures: drive expiries, expiry timers, grants
		defer bg.Done()
		rng := rand.New(rand.NewPCG(100, 1))
		for i := 0; running(i); i++ {
			clk.Advance(time.Duration(rng.IntN(100)) * time.Millisecond)
			if rng.IntN(10) == 0 {
				l.recordSourceError(errors.New("simulated source failure"))
				continue
			}
			if err := l.ObserveUsage(rng.IntN(3), clk.Now()); err != nil {
				failure <- err.Error()
				return
			}
		}
	}()
	go func() { // reconfigures and status readers
		defer bg.Done()
		rng := rand.New(rand.NewPCG(102, 1))
		modes := []GrantMode{GrantImmediate, GrantNextUsage}
		for i := 0; running(i); i++ {
			if err := l.Reconfigure(Config{Max: 1 + rng.IntN(6), Grant: modes[rng.IntN(2)]}); err != nil {
				failure <- err.Error()
				return
			}
			st := l.Status()
			if st.Effective != st.ProviderActive+st.LocalClaims || st.LocalClaims < 0 || st.Available > st.Max {
				failure <- fmt.Sprintf("inconsistent status %+v", st)
				return
			}
		}
	}()
	finished := make(chan struct{})
	go func() { wg.Wait(); close(stop); bg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(60 * time.Second):
		t.Fatal("stress did not finish: deadlock?")
	}
	close(failure)
	for f := range failure {
		t.Error(f)
	}

	// Let every claim end: confirmed ones retire on a later figure,
	// unconfirmed ones expire, abandoned tickets are dropped.
	clk.Advance(10 * time.Minute)
	if err := l.ObserveUsage(0, clk.Now()); err != nil {
		t.Fatal(err)
	}
	st, stats := l.Status(), l.Stats()
	if st.LocalClaims != 0 || st.Queued != 0 {
		t.Fatalf("after draining: %+v, want nothing counting or queued", st)
	}
	l.mu.Lock()
	left, heap, conf := len(l.claims), len(l.expiry), len(l.confirmed)
	l.mu.Unlock()
	if left != 0 || heap != 0 || conf != 0 {
		t.Fatalf("internal leftovers: %d claims, %d in expiry heap, %d confirmed", left, heap, conf)
	}
	if ended := stats.Cancelled + stats.ExpiredUnconfirmed + stats.Retired; ended != stats.Granted {
		t.Fatalf("stats %+v: %d claims ended, %d granted; every claim must end exactly once", stats, ended, stats.Granted)
	}
	if stats.Granted < uint64(seen) || seen == 0 {
		t.Fatalf("granted %d < %d claims workers received", stats.Granted, seen)
	}
	t.Logf("stress: %d claims received by workers, stats %+v", seen, stats)
}
