package reconcile

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/spec"
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

// slowCreate holds every CreateQueue until release is closed.
type slowCreate struct {
	backend.QueueAdmin
	entered chan string
	release chan struct{}
}

func (s slowCreate) CreateQueue(ctx context.Context, name string, attrs backend.QueueAttributes) error {
	s.entered <- name
	<-s.release
	return s.QueueAdmin.CreateQueue(ctx, name, attrs)
}

// TestApplyStillEvents: a change that runs on reports EventStill every
// StillInterval with the time elapsed since it started, then EventDone
// with the total.
func TestApplyStillEvents(t *testing.T) {
	ctx := context.Background()
	f := newFakeBackend()
	clock := newFakeClock()
	f.now = clock.Now
	cfg := &spec.Config{Stack: "ci", RunnerClasses: []spec.RunnerClass{testClass("medium", 2)}}
	p := mustPlan(t, cfg, f.live(), PlanOptions{})
	live := f.live()
	slow := slowCreate{QueueAdmin: f, entered: make(chan string, 1), release: make(chan struct{})}
	live.Queues = slow

	var mu sync.Mutex
	var events []Event
	done := make(chan error, 1)
	go func() {
		_, err := Apply(ctx, p, live, ApplyOptions{
			Parallelism: 1, StillInterval: 10 * time.Second, LockTTL: time.Hour, Clock: clock,
			Progress: func(e Event) {
				if e.Address.Type == TypeQueue {
					mu.Lock()
					events = append(events, e)
					mu.Unlock()
				}
			},
		})
		done <- err
	}()
	select {
	case <-slow.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("CreateQueue never called")
	}
	// Two timers wait: the lock's renewal and the change's next report.
	clock.stepWhen(t, 2, 10*time.Second)
	clock.stepWhen(t, 2, 10*time.Second)
	clock.stepWhen(t, 2, 5*time.Second) // not yet a report
	close(slow.release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("apply did not finish")
	}
	mu.Lock()
	defer mu.Unlock()
	var got []string
	for _, e := range events {
		got = append(got, fmt.Sprintf("%d %s", e.Kind, e.Elapsed))
	}
	want := []string{
		fmt.Sprintf("%d 0s", EventStart),
		fmt.Sprintf("%d 10s", EventStill),
		fmt.Sprintf("%d 20s", EventStill),
		fmt.Sprintf("%d 25s", EventDone),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}
