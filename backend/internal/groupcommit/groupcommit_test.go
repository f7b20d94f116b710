package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
		checkCallOrder(t, c, seen[c], each)
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

// Under -race: callers mixing Do and DoAll; each write gets its own
// outcome, is committed once, and in its caller's order.
func TestDoAllEachWriteGetsItsOwnOutcome(t *testing.T) {
	q, seen := orderQueue(func(n int) error {
		if n%3 == 1 {
			return fmt.Errorf("bad %d", n)
		}
		return nil
	})
	const callers, rounds = 12, 60
	want := map[int]int{}
	var wg sync.WaitGroup
	for c := range callers {
		n := 0
		for r := range rounds {
			n += 1 + (c+r)%20
		}
		want[c] = n
		wg.Go(func() {
			next := 0
			for r := range rounds {
				k := 1 + (c+r)%20 // up to 20 writes: beyond maxBatch
				if k == 1 {
					err := q.Do(context.Background(), [2]int{c, next})
					if (next%3 == 1) != (err != nil) {
						t.Errorf("caller %d write %d: %v", c, next, err)
					}
					next++
					continue
				}
				ws := make([][2]int, k)
				for i := range ws {
					ws[i] = [2]int{c, next + i}
				}
				errs := q.DoAll(context.Background(), ws)
				if errs != nil && len(errs) != k {
					t.Errorf("caller %d: %d outcomes for %d writes", c, len(errs), k)
					return
				}
				for i := range ws {
					err := errAt(errs, i)
					n := next + i
					if (n%3 == 1) != (err != nil) || (err != nil && err.Error() != fmt.Sprint("bad ", n)) {
						t.Errorf("caller %d write %d: %v", c, n, err)
					}
				}
				next += k
			}
		})
	}
	wg.Wait()
	q.Close()
	for c := range callers {
		checkCallOrder(t, c, seen[c], want[c])
	}
}

// orderQueue is a queue of writes {caller, sequence number} whose commit
// records each caller's sequence numbers in commit order (seen, read once
// the callers are done) and fails those fail names.
func orderQueue(fail func(n int) error, opts ...Option) (*Queue[[2]int], map[int][]int) {
	var mu sync.Mutex
	seen := map[int][]int{}
	return New(8, func(batch []*Op[[2]int]) {
		mu.Lock()
		defer mu.Unlock()
		for _, op := range batch {
			seen[op.W[0]] = append(seen[op.W[0]], op.W[1])
			op.Err = fail(op.W[1])
		}
	}, opts...), seen
}

// checkCallOrder fails unless caller c's writes were all committed, want
// of them, in its call order (seen: their sequence numbers as committed).
func checkCallOrder(t *testing.T, c int, seen []int, want int) {
	t.Helper()
	if len(seen) != want {
		t.Fatalf("caller %d: %d writes committed; want %d", c, len(seen), want)
	}
	for i, n := range seen {
		if n != i {
			t.Fatalf("caller %d: commit order %v; want its call order", c, seen[:i+1])
		}
	}
}

// A DoAll whose ctx ends while the writer holds its first write: that one
// is under way (and commits), the others are never written.
func TestDoAllCancelledPartWay(t *testing.T) {
	hold, started := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var committed []string
	q := New(1, func(batch []*Op[string]) {
		for _, op := range batch {
			if op.W == "a" {
				close(started)
				<-hold
			}
			mu.Lock()
			committed = append(committed, op.W)
			mu.Unlock()
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan []error, 1)
	go func() { done <- q.DoAll(ctx, []string{"a", "b", "c"}) }()
	<-started // the writer took "a" alone (maxBatch 1): "b" and "c" wait
	if n := q.Queued(); n != 2 {
		t.Fatalf("%d writes queued; want 2", n)
	}
	cancel()
	errs := <-done
	if !errors.Is(errs[0], context.Canceled) || !strings.Contains(errs[0].Error(), "may still commit") {
		t.Errorf("the write under way: %v", errs[0])
	}
	for i, err := range errs[1:] {
		if !errors.Is(err, context.Canceled) || err.Error() != "not written: context canceled" {
			t.Errorf("queued write %d: %v", i+1, err)
		}
	}
	close(hold)
	if errs := q.DoAll(context.Background(), []string{"d", "e"}); errors.Join(errs...) != nil {
		t.Fatal(errs)
	}
	q.Close()
	if fmt.Sprint(committed) != "[a d e]" {
		t.Errorf("committed %v; want [a d e]", committed)
	}
}

func TestDoAllCancelledBeforeQueuedOrClosed(t *testing.T) {
	var mu sync.Mutex
	var committed []string
	q := New(4, func(batch []*Op[string]) {
		mu.Lock()
		defer mu.Unlock()
		for _, op := range batch {
			committed = append(committed, op.W)
		}
	})
	if errs := q.DoAll(context.Background(), nil); len(errs) != 0 {
		t.Errorf("DoAll of nothing: %v", errs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, err := range q.DoAll(ctx, []string{"x", "y"}) {
		if err == nil || err.Error() != "not written: context canceled" {
			t.Errorf("DoAll with an ended ctx: %v", err)
		}
	}
	q.Close()
	errs := q.DoAll(context.Background(), []string{"z", "w"})
	if len(errs) != 2 || !errors.Is(errs[0], ErrClosed) || !errors.Is(errs[1], ErrClosed) {
		t.Errorf("DoAll after Close: %v; want ErrClosed for each", errs)
	}
	if len(committed) != 0 {
		t.Errorf("committed %v; want nothing", committed)
	}
}

// Under -race: DoAll calls cancelled at random points; a write reported
// written was committed, one reported not written never was, and what was
// committed is in each caller's order.
func TestDoAllCancellationStress(t *testing.T) {
	var mu sync.Mutex
	committed := map[[2]int]int{} // write -> times committed
	order := map[int][]int{}
	q := New(5, func(batch []*Op[[2]int]) {
		mu.Lock()
		defer mu.Unlock()
		for _, op := range batch {
			committed[op.W]++
			order[op.W[0]] = append(order[op.W[0]], op.W[1])
		}
	})
	const callers, rounds, k = 8, 40, 12
	type outcome struct {
		w   [2]int
		err error
	}
	results := make([][]outcome, callers)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for r := range rounds {
				ws := make([][2]int, k)
				for i := range ws {
					ws[i] = [2]int{c, r*k + i}
				}
				ctx, cancel := context.WithCancel(context.Background())
				if r%2 == 1 {
					go cancel() // races the writer
				}
				errs := q.DoAll(ctx, ws)
				for i := range ws {
					results[c] = append(results[c], outcome{ws[i], errAt(errs, i)})
				}
				cancel()
			}
		})
	}
	wg.Wait()
	q.Close()
	cancelled := 0
	for c := range callers {
		for _, o := range results[c] {
			n := committed[o.w]
			switch {
			case n > 1:
				t.Fatalf("write %v committed %d times", o.w, n)
			case o.err == nil && n != 1:
				t.Fatalf("write %v reported written but not committed", o.w)
			case o.err != nil && strings.HasPrefix(o.err.Error(), "not written") && n != 0:
				t.Fatalf("write %v reported not written but committed", o.w)
			case o.err != nil:
				cancelled++
			}
		}
		for i := 1; i < len(order[c]); i++ {
			if order[c][i] <= order[c][i-1] {
				t.Fatalf("caller %d: commit order %v", c, order[c][:i+1])
			}
		}
	}
	t.Logf("%d of %d writes ended by their ctx", cancelled, callers*rounds*k)
}

// errAt is DoAll's outcome of write i: nil errs means all succeeded.
func errAt(errs []error, i int) error {
	if errs == nil {
		return nil
	}
	return errs[i]
}

// Under -race: callers mixing Go (odd writes) and Do (even ones). Every
// write is committed once, in its caller's order; each Go's then gets its
// own write and outcome; a Do after a Go finds the Go committed; a Go
// after Close is told ErrClosed and not committed.
func TestGoMixedWithDo(t *testing.T) {
	for _, d := range []time.Duration{0, time.Millisecond} {
		t.Run(fmt.Sprint("DeferGo=", d), func(t *testing.T) { testGoMixedWithDo(t, d) })
	}
}

func testGoMixedWithDo(t *testing.T, deferGo time.Duration) {
	q, seen := orderQueue(func(n int) error {
		if n%3 == 0 {
			return fmt.Errorf("third %d", n)
		}
		return nil
	}, DeferGo(deferGo))
	const callers, each = 16, 200
	var told sync.Map // [2]int -> error
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range each {
				w := [2]int{c, i}
				if i%2 == 1 {
					q.Go(w, func(got [2]int, err error) {
						if got != w {
							t.Errorf("then of %v got %v", w, got)
						}
						told.Store(got, err)
					})
					continue
				}
				if err := q.Do(context.Background(), w); (i%3 == 0) != (err != nil) {
					t.Errorf("caller %d write %d: %v", c, i, err)
				}
				if i > 0 {
					// The Go before this Do was committed before it.
					if _, ok := told.Load([2]int{c, i - 1}); !ok {
						t.Errorf("caller %d: Do %d returned before the Go %d before it was told", c, i, i-1)
					}
				}
			}
		})
	}
	wg.Wait()
	q.Close()
	for c := range callers {
		checkCallOrder(t, c, seen[c], each)
		for i := 1; i < each; i += 2 {
			v, ok := told.Load([2]int{c, i})
			if !ok {
				t.Fatalf("caller %d: the Go of write %d was never told its outcome", c, i)
			}
			if err, _ := v.(error); (i%3 == 0) != (err != nil) {
				t.Fatalf("caller %d write %d: told %v", c, i, err)
			}
		}
	}
	var after error
	q.Go([2]int{99, 0}, func(_ [2]int, err error) { after = err })
	q.Go([2]int{99, 1}, nil) // nobody told: still not committed, no panic
	if !errors.Is(after, ErrClosed) {
		t.Fatalf("Go after Close: told %v, want ErrClosed", after)
	}
	if len(seen[99]) != 0 {
		t.Fatalf("writes queued by Go after Close were committed: %v", seen[99])
	}
}

// A Go with no then does not leave an outcome behind in its pooled Op for
// a later Do to read.
func TestGoWithoutThenLeavesNothingForDo(t *testing.T) {
	q := New(4, func(batch []*Op[int]) {
		for _, op := range batch {
			if op.W < 0 {
				op.Err = errors.New("negative")
			}
		}
	})
	defer q.Close()
	for i := range 200 {
		q.Go(-1, nil)
		if err := q.Do(context.Background(), i); err != nil {
			t.Fatalf("Do %d after a failing Go without then: %v", i, err)
		}
	}
}

// batchLog is a commit function that records its batches' writes.
type batchLog struct {
	mu      sync.Mutex
	batches [][]string
}

func (l *batchLog) commit(batch []*Op[string]) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ws []string
	for _, op := range batch {
		ws = append(ws, op.W)
	}
	l.batches = append(l.batches, ws)
}

func (l *batchLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprint(l.batches)
}

// With DeferGo, writes of Go wait for one of Do and share its batch.
func TestDeferGoRidesWithDo(t *testing.T) {
	var l batchLog
	q := New(16, l.commit, DeferGo(time.Hour))
	defer q.Close()
	told := make(chan string, 2)
	then := func(w string, err error) {
		if err != nil {
			t.Errorf("Go %s: %v", w, err)
		}
		told <- w
	}
	q.Go("release-1", then)
	q.Go("release-2", then)
	if err := q.Do(context.Background(), "grant"); err != nil {
		t.Fatal(err)
	}
	if got := l.String(); got != "[[release-1 release-2 grant]]" {
		t.Fatalf("batches %s; want the Go writes in the Do's batch, before it", got)
	}
	for _, want := range []string{"release-1", "release-2"} {
		if got := <-told; got != want {
			t.Fatalf("then told %s; want %s", got, want)
		}
	}
}

// Alone, writes of Go are committed together once the oldest waited
// DeferGo's time, not before.
func TestDeferGoAloneWaitsItsTime(t *testing.T) {
	const d = 500 * time.Millisecond
	var l batchLog
	q := New(16, l.commit, DeferGo(d))
	defer q.Close()
	done := make(chan struct{})
	start := time.Now()
	for i := range 3 {
		var then func(string, error)
		if i == 2 {
			then = func(string, error) { close(done) }
		}
		q.Go(fmt.Sprint("release-", i), then)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("writes of Go not committed 10s after they were queued (DeferGo %v); batches %s", d, &l)
	}
	if waited := time.Since(start); waited < d {
		t.Fatalf("writes of Go committed after %v; want them kept for DeferGo's %v", waited, d)
	}
	if got := l.String(); got != "[[release-0 release-1 release-2]]" {
		t.Fatalf("batches %s; want one batch of the three", got)
	}
}

// Close commits writes of Go that wait for DeferGo's time at once.
func TestDeferGoClose(t *testing.T) {
	var l batchLog
	q := New(16, l.commit, DeferGo(time.Hour))
	var told error = errors.New("not told")
	q.Go("release", func(_ string, err error) { told = err })
	closed := make(chan struct{})
	go func() { q.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10s with a write of Go deferred for an hour")
	}
	if told != nil || l.String() != "[[release]]" {
		t.Fatalf("after Close: told %v, batches %s; want the deferred write committed", told, &l)
	}
}
