package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Under -race: many callers, a commit that fails odd writes; each caller
// gets its own outcome, every write is committed once, in per-caller order.
func TestEachCallerGetsItsOwnOutcome(t *testing.T) {
	var mu sync.Mutex
	seen := map[int][]int{} // caller -> sequence numbers in commit order
	batches, largest := 0, 0
	q := New(8, func(batch []*Op[[2]int]) {
		mu.Lock()
		defer mu.Unlock()
		batches++
		largest = max(largest, len(batch))
		for _, op := range batch {
			seen[op.W[0]] = append(seen[op.W[0]], op.W[1])
			if op.W[1]%2 == 1 {
				op.Err = fmt.Errorf("odd %d", op.W[1])
			}
		}
	})
	const callers, each = 16, 200
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range each {
				err := q.Do(context.Background(), [2]int{c, i})
				if (i%2 == 1) != (err != nil) || (err != nil && err.Error() != fmt.Sprint("odd ", i)) {
					t.Errorf("caller %d write %d: %v", c, i, err)
				}
			}
		})
	}
	wg.Wait()
	q.Close()
	for c := range callers {
		if len(seen[c]) != each {
			t.Fatalf("caller %d: %d writes committed; want %d", c, len(seen[c]), each)
		}
		for i, n := range seen[c] {
			if n != i {
				t.Fatalf("caller %d: commit order %v; want its call order", c, seen[c][:i+1])
			}
		}
	}
	if largest > 8 {
		t.Errorf("a batch of %d; want at most maxBatch 8", largest)
	}
	t.Logf("%d writes in %d batches", callers*each, batches)
}

func TestCancelledBeforeTakenIsNeverCommitted(t *testing.T) {
	hold, started := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var committed []string
	q := New(16, func(batch []*Op[string]) {
		for _, op := range batch {
			if op.W == "first" {
				close(started)
				<-hold
			}
			mu.Lock()
			committed = append(committed, op.W)
			mu.Unlock()
		}
	})
	first := make(chan error, 1)
	go func() { first <- q.Do(context.Background(), "first") }()
	<-started // the writer holds "first": the next write waits in the queue
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Do(ctx, "cancelled") }()
	for i := 0; q.Queued() != 1; i++ {
		if i == 2000 {
			t.Fatal("never queued")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || err.Error() != "not written: context canceled" {
		t.Errorf("cancelled write: %v", err)
	}
	close(hold)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := q.Do(context.Background(), "after"); err != nil {
		t.Fatal(err)
	}
	q.Close()
	q.Close() // idempotent
	if err := q.Do(context.Background(), "closed"); !errors.Is(err, ErrClosed) {
		t.Errorf("Do after Close: %v; want ErrClosed", err)
	}
	if fmt.Sprint(committed) != "[first after]" {
		t.Errorf("committed %v; want [first after]", committed)
	}
}

func TestNewRefusesAnEmptyBatch(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New(0, …) did not panic")
		}
	}()
	New(0, func([]*Op[int]) {})
}
