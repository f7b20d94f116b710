package reconcile

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/spec"
)

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
// with the total. The bubble's clock moves only while every goroutine
// waits, so the elapsed times are exact.
func TestApplyStillEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := newFakeBackend()
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
				Parallelism: 1, StillInterval: 10 * time.Second, LockTTL: time.Hour,
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
		<-slow.entered
		time.Sleep(25 * time.Second)
		close(slow.release)
		if err := <-done; err != nil {
			t.Fatal(err)
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
	})
}
