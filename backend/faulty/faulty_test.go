package faulty_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/backendtest"
	"github.com/rpdhq/rpd/backend/faulty"
	"github.com/rpdhq/rpd/backend/local"
	"github.com/rpdhq/rpd/runtime/pickup"
)

func open(t *testing.T) (*local.Backend, *backendtest.FakeClock) {
	t.Helper()
	clock := backendtest.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b, err := local.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"), local.Options{Stack: "s", Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := b.CreateQueue(context.Background(), "q", backend.QueueAttributes{VisibilityTimeout: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	return b, clock
}

func TestFaultSelectsTheNthCall(t *testing.T) {
	b, _ := open(t)
	in := faulty.New(faulty.Fault{Op: faulty.Send, Call: 2, Fail: true})
	q := in.Queue(b.Queue("q"))
	ctx := context.Background()
	for i, wantFail := range []bool{false, true, false} {
		err := q.Send(ctx, fmt.Sprint(i), 0)
		if got := errors.Is(err, faulty.ErrInjected); got != wantFail {
			t.Errorf("Send call %d: %v; want injected failure %v", i+1, err, wantFail)
		}
		if errors.Is(err, pickup.ErrStaleHandle) || errors.Is(err, pickup.ErrConditionFailed) {
			t.Errorf("injected error %v wraps a non-transient sentinel", err)
		}
	}
	if got := in.Calls(faulty.Send); got != 3 {
		t.Errorf("Calls(Send) = %d; want 3", got)
	}
	msgs, err := b.Queue("q").Receive(ctx, 10, 0, 0)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("received %d, %v; want the 2 sends that were not failed before their effect", len(msgs), err)
	}
}

func TestFailAfterEffectKeepsTheEffect(t *testing.T) {
	b, _ := open(t)
	in := faulty.New(faulty.Fault{Op: faulty.Send, Call: 1, Fail: true, AfterEffect: true})
	if err := in.Queue(b.Queue("q")).Send(context.Background(), "x", 0); !errors.Is(err, faulty.ErrInjected) {
		t.Fatalf("Send: %v; want injected", err)
	}
	msgs, _ := b.Queue("q").Receive(context.Background(), 10, 0, 0)
	if len(msgs) != 1 {
		t.Fatalf("received %d messages; want the 1 whose response was lost", len(msgs))
	}
}

func TestDelayHonoursContext(t *testing.T) {
	b, _ := open(t)
	in := faulty.New(faulty.Fault{Op: faulty.Get, Delay: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := in.Instances(b.Instances()).Get(ctx, "i")
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Errorf("delayed Get: %v after %v; want the context's deadline, promptly", err, time.Since(start))
	}

	in = faulty.New(faulty.Fault{Op: faulty.List, Call: 1, Delay: 30 * time.Millisecond})
	start = time.Now()
	if _, err := in.Instances(b.Instances()).List(context.Background(), "c", ""); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 30*time.Millisecond {
		t.Errorf("List took %v; want the injected 30ms delay", took)
	}
}

// retry calls fn until it returns something other than ErrInjected, at most
// 10 times.
func retry(t *testing.T, what string, fn func() error) error {
	t.Helper()
	for attempt := 0; attempt < 10; attempt++ {
		if err := fn(); !errors.Is(err, faulty.ErrInjected) {
			return err
		}
	}
	t.Fatalf("%s: still failing after 10 attempts", what)
	return nil
}

// TestQueueRetriesLoseNothing is the at-least-once contract end to end:
// with sends, receives and deletes failing (before and after their
// effect) and a duplicate delivery, a producer and consumer that retry
// transient errors, treat ErrStaleHandle on delete as done and process
// idempotently (by body) handle every message, and the queue ends empty.
func TestQueueRetriesLoseNothing(t *testing.T) {
	b, clock := open(t)
	in := faulty.New(
		faulty.Fault{Op: faulty.Send, Call: 3, Fail: true},
		faulty.Fault{Op: faulty.Send, Call: 7, Fail: true, AfterEffect: true}, // the retry sends a second copy
		faulty.Fault{Op: faulty.Receive, Call: 2, Fail: true},
		faulty.Fault{Op: faulty.Receive, Call: 3, Duplicate: true},
		faulty.Fault{Op: faulty.Receive, Call: 5, Fail: true, AfterEffect: true}, // messages hidden, response lost
		faulty.Fault{Op: faulty.Delete, Call: 1, Fail: true, AfterEffect: true},
		faulty.Fault{Op: faulty.Delete, Call: 4, Fail: true},
		faulty.Fault{Op: faulty.DeleteBatch, Call: 1, Fail: true},
	)
	q := in.Queue(b.Queue("q"))
	ctx := context.Background()
	const n = 20
	for i := 0; i < n; i++ {
		body := fmt.Sprintf("task-%02d", i)
		if err := retry(t, "send", func() error { return q.Send(ctx, body, 0) }); err != nil {
			t.Fatalf("send %s: %v", body, err)
		}
	}

	processed := map[string]int{}
	for round := 0; round < 100 && len(processed) < n; round++ {
		msgs, err := q.Receive(ctx, 3, 10*time.Second, 0)
		if errors.Is(err, faulty.ErrInjected) {
			continue
		}
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		if len(msgs) == 0 {
			// Whatever a lost response hid comes back after its visibility.
			clock.Advance(11 * time.Second)
			continue
		}
		var handles []string
		for _, m := range msgs {
			processed[m.Body]++
			handles = append(handles, m.ReceiptHandle)
		}
		// Alternate single and batch deletes.
		if round%2 == 0 {
			for _, h := range handles {
				err := retry(t, "delete", func() error { return q.Delete(ctx, h) })
				if err != nil && !errors.Is(err, pickup.ErrStaleHandle) {
					t.Fatalf("delete: %v", err)
				}
			}
			continue
		}
		err = retry(t, "delete batch", func() error { return q.DeleteBatch(ctx, handles) })
		var be *pickup.BatchError
		if errors.As(err, &be) {
			for h, cause := range be.Failed {
				if !errors.Is(cause, pickup.ErrStaleHandle) {
					t.Fatalf("delete batch entry %s: %v", h, cause)
				}
			}
		} else if err != nil {
			t.Fatalf("delete batch: %v", err)
		}
	}
	var missing []string
	for i := 0; i < n; i++ {
		if body := fmt.Sprintf("task-%02d", i); processed[body] == 0 {
			missing = append(missing, body)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("lost messages %v (processed %v)", missing, processed)
	}
	dups := 0
	for _, c := range processed {
		dups += c - 1
	}
	if dups == 0 {
		t.Errorf("no message was processed twice; the duplicate-delivery and lost-send-response faults should have caused at least one")
	}
	// Drain: anything left (the extra copy of a retried send) is a duplicate.
	for round := 0; round < 20; round++ {
		clock.Advance(11 * time.Second)
		msgs, err := b.Queue("q").Receive(ctx, 10, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			if processed[m.Body] == 0 {
				t.Errorf("left-over message %q was never processed", m.Body)
			}
			_ = b.Queue("q").Delete(ctx, m.ReceiptHandle)
		}
	}
	info, err := b.DescribeQueue(ctx, "q")
	if err != nil || info.Visible+info.InFlight+info.Delayed != 0 {
		t.Errorf("queue at the end: %+v, %v; want empty", info, err)
	}
}

// claim is the caller pattern for a transition whose response may be lost:
// retry transient errors; on ErrConditionFailed after a transient error,
// read the record, because the lost attempt may have been the winner.
func claim(ctx context.Context, t pickup.InstanceTable, id, owner string) (bool, error) {
	tr := pickup.Transition{ID: id, From: pickup.StateIdle, To: pickup.StateClaimed, Owner: owner}
	retried := false
	for attempt := 0; attempt < 10; attempt++ {
		_, err := t.Transition(ctx, tr)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, pickup.ErrConditionFailed):
			if !retried {
				return false, nil
			}
			for read := 0; read < 10; read++ {
				rec, err := t.Get(ctx, id)
				if errors.Is(err, faulty.ErrInjected) {
					continue
				}
				if err != nil {
					return false, err
				}
				return rec.State == pickup.StateClaimed && rec.Owner == owner, nil
			}
			return false, errors.New("get kept failing")
		default:
			retried = true
		}
	}
	return false, errors.New("transition kept failing")
}

func TestTransitionRetriesLoseNothing(t *testing.T) {
	b, _ := open(t)
	ctx := context.Background()
	for _, id := range []string{"i-1", "i-2", "i-3"} {
		if err := b.Instances().Put(ctx, pickup.Instance{ID: id, Class: "c", State: pickup.StateIdle}); err != nil {
			t.Fatal(err)
		}
	}
	in := faulty.New(
		faulty.Fault{Op: faulty.Transition, Call: 1, Fail: true},                    // i-1: fails before the effect
		faulty.Fault{Op: faulty.Transition, Call: 3, Fail: true, AfterEffect: true}, // i-2: succeeds, response lost
		faulty.Fault{Op: faulty.Get, Call: 1, Fail: true},
	)
	tbl := in.Instances(b.Instances())
	for _, tc := range []struct {
		id, owner string
		want      bool
	}{
		{"i-1", "task-a", true},
		{"i-2", "task-b", true},
		{"i-2", "task-c", false}, // i-2 is task-b's
		{"i-3", "task-d", true},
	} {
		won, err := claim(ctx, tbl, tc.id, tc.owner)
		if err != nil || won != tc.want {
			t.Errorf("claim(%s, %s) = %v, %v; want %v", tc.id, tc.owner, won, err, tc.want)
		}
	}
	list, err := b.Instances().List(ctx, "c", pickup.StateClaimed)
	if err != nil {
		t.Fatal(err)
	}
	var owners []string
	for _, r := range list {
		owners = append(owners, r.ID+"="+r.Owner)
	}
	sort.Strings(owners)
	if want := []string{"i-1=task-a", "i-2=task-b", "i-3=task-d"}; fmt.Sprint(owners) != fmt.Sprint(want) {
		t.Errorf("claimed %v; want %v", owners, want)
	}
}
