package reconcile

import (
	"sync"
	"testing"
	"time"
)

// fakeClock is a Clock whose time moves only by step.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []clockWaiter
}

type clockWaiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.waiters = append(c.waiters, clockWaiter{c.now.Add(d), ch})
	return ch
}

// step waits (bounded) until someone waits on the clock, then moves time
// by d and fires the timers that are due.
func (c *fakeClock) step(t *testing.T, d time.Duration) {
	t.Helper()
	c.stepWhen(t, 1, d)
}

// stepWhen is step once at least n timers are waiting.
func (c *fakeClock) stepWhen(t *testing.T, n int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		waiting := len(c.waiters)
		c.mu.Unlock()
		if waiting >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("fakeClock: nobody waited on the clock within 5s")
		}
		time.Sleep(time.Millisecond)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
}
