package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// ErrClosed: Do after Close. Nothing was written.
var ErrClosed = errors.New("closed")

// Op is one queued write. Commit reads W and sets Err; it must not keep
// the Op after returning.
type Op[W any] struct {
	W   W
	Err error

	state atomic.Int32 // queued, taken, abandoned
	done  chan error   // capacity 1
	// async: queued by Go, whose then (if any) gets the outcome instead
	// of done.
	async bool
	then  func(w W, err error)
	at    time.Time // when Go queued it, with DeferGo
}

const (
	queued int32 = iota
	taken
	abandoned
)

// Queue batches writes of type W for a commit function.
type Queue[W any] struct {
	commit   func(batch []*Op[W])
	maxBatch int

	// deferGo: DeferGo's bound, 0 without it.
	deferGo time.Duration

	mu      sync.Mutex
	queue   []*Op[W]
	waiting int      // the writes of Do and DoAll in queue
	spare   []*Op[W] // the previous batch's slice, reused
	closed  bool
	wake    chan struct{} // capacity 1: work queued, or Close
	done    chan struct{} // closed when the writer returned

	ops      sync.Pool // *Op[W] with their done channels
	opSlices sync.Pool // *[]*Op[W], DoAll's
}

// An Option configures a Queue.
type Option func(*options)

type options struct{ deferGo time.Duration }

// DeferGo lets the writes queued by Go wait, for at most d after the
// oldest of them was queued, for a batch that holds a write of Do or
// DoAll, instead of making a batch of their own as soon as the writer is
// free: while callers wait for their writes, Go's ride along in the same
// round trip, and alone they are committed d after the first of them, with
// whatever came meanwhile. Nobody waits for a write of Go, so what d costs
// is how long one stays unwritten: what a crash of the process loses.
func DeferGo(d time.Duration) Option { return func(o *options) { o.deferGo = d } }

// New starts a queue whose writer hands commit batches of at most maxBatch
// writes, in arrival order. commit runs on the writer goroutine, one batch
// at a time, and sets each Op's Err.
func New[W any](maxBatch int, commit func(batch []*Op[W]), opts ...Option) *Queue[W] {
	if maxBatch < 1 {
		panic("groupcommit: maxBatch must be at least 1")
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	q := &Queue[W]{commit: commit, maxBatch: maxBatch, deferGo: o.deferGo, wake: make(chan struct{}, 1), done: make(chan struct{})}
	q.ops.New = func() any { return &Op[W]{done: make(chan error, 1)} }
	q.opSlices.New = func() any { return new([]*Op[W]) }
	go q.run()
	return q
}

// Do queues w and returns its outcome once its batch was committed.
//
// When ctx ends before the writer took w, Do returns ctx's error, wrapped
// in "not written", and w is never written. When it ends after, the write
// is under way: Do returns ctx's error saying it may still commit. Either
// way a later Do of the same caller is written after it. After Close, Do
// returns ErrClosed.
func (q *Queue[W]) Do(ctx context.Context, w W) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("not written: %w", err)
	}
	op := q.ops.Get().(*Op[W])
	op.W = w
	op.state.Store(queued)
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		q.put(op)
		return ErrClosed
	}
	q.queue = append(q.queue, op)
	q.waiting++
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	select {
	case err := <-op.done:
		q.put(op)
		return err
	case <-ctx.Done():
	}
	// op is not reused from here: the writer may still hold it.
	if op.state.CompareAndSwap(queued, abandoned) {
		return fmt.Errorf("not written: %w", ctx.Err())
	}
	return fmt.Errorf("%w (the write was under way and may still commit)", ctx.Err())
}

// Go queues w and returns at once. Once w's batch was committed, the writer
// calls then (nil: nobody is told) with w and its outcome, on the writer
// goroutine: then must be quick and must not wait for the queue. A later
// Do, DoAll or Go of the same caller is written after w. After Close, Go
// calls then with ErrClosed before it returns. With DeferGo, w may wait
// for a write of Do or DoAll to share its batch.
func (q *Queue[W]) Go(w W, then func(w W, err error)) {
	op := q.ops.Get().(*Op[W])
	op.W, op.async, op.then = w, true, then
	if q.deferGo > 0 {
		op.at = time.Now()
	}
	op.state.Store(queued)
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		q.put(op)
		if then != nil {
			then(w, ErrClosed)
		}
		return
	}
	queued := len(q.queue)
	q.queue = append(q.queue, op)
	q.mu.Unlock()
	if q.deferGo > 0 && queued > 0 {
		// The writer does not sleep on wake while anything is queued:
		// it is writing, or waits for DeferGo's time, which w does not
		// change.
		return
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// DoAll queues ws, in order, under one lock and with one wake-up of the
// writer, and waits for their outcomes. It returns nil when every write
// succeeded; otherwise errs[i] (len(ws) entries) is what Do(ctx, ws[i])
// would have returned, with the same meaning when ctx ends (a write not
// taken yet is never written, one taken may still commit). The writer may
// split ws across batches (maxBatch), never reorders it, and a later call
// of the same caller is written after all of it. After Close every write
// gets ErrClosed. DoAll does not keep ws.
func (q *Queue[W]) DoAll(ctx context.Context, ws []W) (errs []error) {
	if len(ws) == 0 {
		return nil
	}
	fail := func(i int, err error) {
		if errs == nil {
			errs = make([]error, len(ws))
		}
		errs[i] = err
	}
	if err := ctx.Err(); err != nil {
		err = fmt.Errorf("not written: %w", err)
		for i := range ws {
			fail(i, err)
		}
		return errs
	}
	opsp := q.opSlices.Get().(*[]*Op[W])
	ops := (*opsp)[:0]
	for _, w := range ws {
		op := q.ops.Get().(*Op[W])
		op.W = w
		op.state.Store(queued)
		ops = append(ops, op)
	}
	defer func() {
		clear(ops)
		*opsp = ops[:0]
		q.opSlices.Put(opsp)
	}()
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		for i, op := range ops {
			q.put(op)
			fail(i, ErrClosed)
		}
		return errs
	}
	q.queue = append(q.queue, ops...)
	q.waiting += len(ops)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	for i, op := range ops {
		select {
		case err := <-op.done:
			q.put(op)
			if err != nil {
				fail(i, err)
			}
			continue
		case <-ctx.Done():
		}
		// ctx ended: settle this write and every later one as Do would.
		for j := i; j < len(ops); j++ {
			if err := q.settle(ops[j], ctx.Err()); err != nil {
				fail(j, err)
			}
		}
		break
	}
	return errs
}

// settle returns the outcome of op, whose caller's ctx ended with cause:
// its result when the writer already gave it, else whether it was taken.
func (q *Queue[W]) settle(op *Op[W], cause error) error {
	select {
	case err := <-op.done:
		q.put(op)
		return err
	default:
	}
	// op is not reused from here: the writer may still hold it.
	if op.state.CompareAndSwap(queued, abandoned) {
		return fmt.Errorf("not written: %w", cause)
	}
	return fmt.Errorf("%w (the write was under way and may still commit)", cause)
}

func (q *Queue[W]) put(op *Op[W]) {
	var zero W
	op.W, op.Err, op.async, op.then, op.at = zero, nil, false, nil, time.Time{}
	q.ops.Put(op)
}

// Queued returns how many writes wait for the writer (for tests).
func (q *Queue[W]) Queued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}

// Close writes what is queued, then stops the writer; later Do calls
// return ErrClosed. It is idempotent.
func (q *Queue[W]) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	<-q.done
}

func (q *Queue[W]) run() {
	defer close(q.done)
	var deferred *time.Timer // DeferGo's wait
	for {
		// Yield once before taking the batch: callers about to write
		// (runnable, not yet queued) queue first. Under the daemon's HTTP
		// benchmark this took the mean batch from 1.6 to 4 writes and the
		// CPU per acquire+release down by a fifth, for one pass of the
		// scheduler.
		runtime.Gosched()
		q.mu.Lock()
		if wait := q.deferral(); wait > 0 {
			q.mu.Unlock()
			if deferred == nil {
				deferred = time.NewTimer(wait)
			} else {
				deferred.Reset(wait)
			}
			select {
			case <-q.wake: // a write of Do or DoAll, or Close
				deferred.Stop()
			case <-deferred.C:
			}
			continue
		}
		n := min(len(q.queue), q.maxBatch)
		batch := append(q.spare[:0], q.queue[:n]...)
		rest := copy(q.queue, q.queue[n:])
		clear(q.queue[rest:])
		q.queue = q.queue[:rest]
		for _, op := range batch {
			if !op.async {
				q.waiting--
			}
		}
		closed := q.closed
		q.mu.Unlock()
		if len(batch) == 0 {
			if closed {
				return
			}
			<-q.wake
			continue
		}
		q.commitTaken(batch)
		clear(batch)
		q.spare = batch
	}
}

// deferral is how long the writer waits before it takes a batch: with
// DeferGo, while only writes of Go are queued, until the oldest waited
// DeferGo's time. q.mu is held.
func (q *Queue[W]) deferral() time.Duration {
	if q.deferGo == 0 || q.closed || q.waiting > 0 || len(q.queue) == 0 {
		return 0
	}
	return q.deferGo - time.Since(q.queue[0].at)
}

// commitTaken commits the writes of batch whose callers still wait and
// hands each its outcome.
func (q *Queue[W]) commitTaken(batch []*Op[W]) {
	live := batch[:0]
	for _, op := range batch {
		if op.state.CompareAndSwap(queued, taken) {
			op.Err = nil
			live = append(live, op)
		}
	}
	if len(live) == 0 {
		return
	}
	q.commit(live)
	for _, op := range live {
		if op.async {
			if op.then != nil {
				op.then(op.W, op.Err)
			}
			q.put(op)
			continue
		}
		op.done <- op.Err // op may be reused once received
	}
}
