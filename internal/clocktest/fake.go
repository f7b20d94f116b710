package clocktest

import (
	"sort"
	"sync"
	"time"
)

// Fake is a manual clock: time moves only by Advance, which runs due
// callbacks synchronously in the caller's goroutine, in deadline order
// (timers due at the same instant in the order they were created; Reset
// keeps a timer's place), without holding its lock, so a callback may use
// the clock and take its component's locks.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*Timer
	created int
}

// Timer is a pending call of a Fake; it has the methods of *time.Timer
// that the clocks' Timer interfaces use.
type Timer struct {
	c      *Fake
	n      int // creation order
	when   time.Time
	f      func()
	live   bool
	queued bool // present in c.timers
}

// NewFake returns a Fake reading start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc schedules f for d from now.
func (c *Fake) AfterFunc(d time.Duration, f func()) *Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.created++
	t := &Timer{c: c, n: c.created, when: c.now.Add(d), f: f, live: true, queued: true}
	c.timers = append(c.timers, t)
	return t
}

// Stop prevents the call if it has not run; it reports whether it did.
func (t *Timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.live
	t.live = false
	return was
}

// Reset re-arms the call for d from now; it reports whether it was pending.
func (t *Timer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.live
	t.live = true
	t.when = t.c.now.Add(d)
	if !t.queued {
		t.queued = true
		t.c.timers = append(t.c.timers, t)
	}
	return was
}

// Advance moves time forward by d, firing every timer that falls due on the
// way; while a callback runs, Now reads its deadline. Timers that callbacks
// arm within the window fire too.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		live := c.timers[:0]
		for _, t := range c.timers {
			if t.live {
				live = append(live, t)
			} else {
				t.queued = false
			}
		}
		clear(c.timers[len(live):])
		c.timers = live
		sort.Slice(c.timers, func(i, j int) bool {
			a, b := c.timers[i], c.timers[j]
			return a.when.Before(b.when) || a.when.Equal(b.when) && a.n < b.n
		})
		if len(c.timers) == 0 || c.timers[0].when.After(end) {
			c.now = end
			c.mu.Unlock()
			return
		}
		t := c.timers[0]
		t.live = false
		t.queued = false
		c.timers = c.timers[1:]
		if t.when.After(c.now) {
			c.now = t.when
		}
		c.mu.Unlock()
		t.f()
	}
}

// Pending reports how many timers are armed.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if t.live {
			n++
		}
	}
	return n
}
