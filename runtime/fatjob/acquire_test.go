package fatjob

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rpdhq/rpd/internal/waitfor"
)

// result of an Acquire run in the background.
type result struct {
	perm *Permit
	err  error
}

// acquireAsync starts Acquire in a goroutine and waits until it has either
// returned or joined the queue (Stats().Queued reaches wantQueued).
func acquireAsync(t *testing.T, ctx context.Context, p *Pool, r Request, wantQueued int) <-chan result {
	t.Helper()
	ch := make(chan result, 1)
	go func() {
		perm, err := p.Acquire(ctx, r)
		ch <- result{perm, err}
	}()
	waitfor.Until(t, "Acquire to queue", func() bool { return len(ch) == 1 || p.Stats().Queued == wantQueued })
	return ch
}

func receive(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire did not return within 5s")
		return result{}
	}
}

func wantPending(t *testing.T, ch <-chan result) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("Acquire returned %v, %v; want it still waiting", r.perm, r.err)
	default:
	}
}

func TestAcquireGrantsAtOnceWhenFree(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 100, DeltaCacheBytes: 100, SpillSlots: LimitedSpill(1)})
	perm, err := p.Acquire(context.Background(), Request{ScanRingBytes: 100, DeltaCacheBytes: 1, NeedsSpillSlot: true})
	if err != nil {
		t.Fatal(err)
	}
	wantAvailable(t, p, 0, 99, 0)
	perm.Release()
	if s := p.Stats(); s.Granted != 1 || s.Waited != 0 {
		t.Errorf("Stats: Granted=%d Waited=%d, want 1 and 0", s.Granted, s.Waited)
	}
}

func TestAcquireExceedsCapacity(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 100, DeltaCacheBytes: 50, SpillSlots: LimitedSpill(1)})
	hold := mustAcquire(t, p, Request{ScanRingBytes: 1})
	// Queue someone, so the oversized requests are refused while others wait.
	waiting := acquireAsync(t, context.Background(), p, Request{ScanRingBytes: 100}, 1)
	for _, r := range []Request{{ScanRingBytes: 101}, {DeltaCacheBytes: 51}, {ScanRingBytes: 1 << 63, DeltaCacheBytes: 1}} {
		perm, err := p.Acquire(context.Background(), r)
		if !errors.Is(err, ErrExceedsCapacity) || perm != nil {
			t.Errorf("Acquire(%+v) = %v, %v; want ErrExceedsCapacity", r, perm, err)
		}
	}
	hold.Release()
	receive(t, waiting).perm.Release()
	if s := p.Stats(); s.Denied != 3 {
		t.Errorf("Stats().Denied = %d, want 3", s.Denied)
	}
	wantAvailable(t, p, 100, 50, 1)
}

// The seed's limitation 1: a large request at the head is not overtaken by
// small ones, neither by Acquire nor by TryAcquire.
func TestAcquireLargeRequestNotStarvedBySmallOnes(t *testing.T) {
	clock := &fakeClock{}
	p := newPool(t, Config{ScanRingBytes: 200, DeltaCacheBytes: 10, SpillSlots: LimitedSpill(4)}, WithClock(clock.now))
	a := mustAcquire(t, p, Request{ScanRingBytes: 80})
	b := mustAcquire(t, p, Request{ScanRingBytes: 80})

	large := acquireAsync(t, context.Background(), p, Request{ScanRingBytes: 120}, 1)
	clock.advance(time.Second)
	small := acquireAsync(t, context.Background(), p, Request{ScanRingBytes: 40}, 2)
	wantPending(t, large)
	wantPending(t, small)
	if _, ok := p.TryAcquire(Request{ScanRingBytes: 40}); ok {
		t.Fatal("TryAcquire jumped a non-empty queue")
	}
	// The empty request takes nothing and is granted even now.
	mustAcquire(t, p, Request{}).Release()

	clock.advance(2 * time.Second)
	a.Release() // 120 free: the large one goes first, the small one still waits
	l := receive(t, large)
	if l.err != nil || l.perm.ScanRingBytes() != 120 {
		t.Fatalf("large Acquire = %v, %v", l.perm, l.err)
	}
	wantPending(t, small)
	wantAvailable(t, p, 0, 10, 4)

	clock.advance(4 * time.Second)
	b.Release()
	s := receive(t, small)
	if s.err != nil {
		t.Fatal(s.err)
	}
	l.perm.Release()
	s.perm.Release()
	wantAvailable(t, p, 200, 10, 4)

	st := p.Stats()
	// large waited 3s, small 6s.
	if st.Waited != 2 || st.WaitTime != 9*time.Second || st.Granted != 5 || st.Denied != 1 || st.Queued != 0 {
		t.Errorf("Stats = %+v; want Waited=2 WaitTime=9s Granted=5 Denied=1 Queued=0", st)
	}
}

func TestAcquireCancelRemovesWaiter(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 100, DeltaCacheBytes: 100, SpillSlots: LimitedSpill(1)})
	hold := mustAcquire(t, p, Request{ScanRingBytes: 100})
	ctx, cancel := context.WithCancel(context.Background())
	ch := acquireAsync(t, ctx, p, Request{ScanRingBytes: 10, NeedsSpillSlot: true}, 1)
	cancel()
	r := receive(t, ch)
	if !errors.Is(r.err, context.Canceled) || r.perm != nil {
		t.Fatalf("cancelled Acquire = %v, %v; want context.Canceled", r.perm, r.err)
	}
	if s := p.Stats(); s.Queued != 0 || s.Cancelled != 1 {
		t.Errorf("Stats: Queued=%d Cancelled=%d, want 0 and 1", s.Queued, s.Cancelled)
	}
	wantAvailable(t, p, 0, 100, 1)
	hold.Release()
	// The queue is empty again: the lock-free path is open.
	mustAcquire(t, p, Request{ScanRingBytes: 100}).Release()
	wantAvailable(t, p, 100, 100, 1)
}

func TestAcquireDeadlineExceeded(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 10, DeltaCacheBytes: 10})
	hold := mustAcquire(t, p, Request{ScanRingBytes: 10})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	perm, err := p.Acquire(ctx, Request{ScanRingBytes: 1})
	if !errors.Is(err, context.DeadlineExceeded) || perm != nil {
		t.Fatalf("Acquire = %v, %v; want DeadlineExceeded", perm, err)
	}
	hold.Release()
	wantAvailable(t, p, 10, 10, -1)
}

func TestAcquireCancelledHeadWakesNext(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 100, DeltaCacheBytes: 100})
	hold := mustAcquire(t, p, Request{ScanRingBytes: 50})
	ctx, cancel := context.WithCancel(context.Background())
	head := acquireAsync(t, ctx, p, Request{ScanRingBytes: 60}, 1)
	next := acquireAsync(t, context.Background(), p, Request{ScanRingBytes: 30}, 2)
	wantPending(t, next)
	cancel()
	if r := receive(t, head); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("head = %v, %v; want context.Canceled", r.perm, r.err)
	}
	r := receive(t, next)
	if r.err != nil {
		t.Fatalf("next after the cancelled head: %v", r.err)
	}
	r.perm.Release()
	hold.Release()
	wantAvailable(t, p, 100, 100, -1)
}

func TestAcquireCancelledMiddleWaiter(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 100, DeltaCacheBytes: 100})
	hold := mustAcquire(t, p, Request{ScanRingBytes: 100})
	first := acquireAsync(t, context.Background(), p, Request{ScanRingBytes: 60}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	middle := acquireAsync(t, ctx, p, Request{ScanRingBytes: 10}, 2)
	last := acquireAsync(t, context.Background(), p, Request{ScanRingBytes: 40}, 3)
	cancel()
	if r := receive(t, middle); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("middle = %v", r.err)
	}
	wantPending(t, first)
	wantPending(t, last)
	hold.Release()
	f, l := receive(t, first), receive(t, last)
	if f.err != nil || l.err != nil {
		t.Fatal(f.err, l.err)
	}
	wantAvailable(t, p, 0, 100, -1)
	f.perm.Release()
	l.perm.Release()
	wantAvailable(t, p, 100, 100, -1)
}

func TestAcquireWithDoneContextFailsEvenIfFree(t *testing.T) {
	p := newPool(t, DefaultConfig())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, r := range []Request{{}, {ScanRingBytes: 1}, {ScanRingBytes: 1 << 62}} {
		if perm, err := p.Acquire(ctx, r); !errors.Is(err, context.Canceled) || perm != nil {
			t.Errorf("Acquire(done ctx, %+v) = %v, %v; want context.Canceled", r, perm, err)
		}
	}
	if s := p.Stats(); s.Cancelled != 3 || s.Granted != 0 {
		t.Errorf("Stats: Cancelled=%d Granted=%d, want 3 and 0", s.Cancelled, s.Granted)
	}
	wantAvailable(t, p, DefaultScanRingBytes, DefaultDeltaCacheBytes, DefaultSpillSlots)
}

// A grant that races a cancellation is given back: whatever the interleaving,
// either the caller gets the permit or the pool gets everything back and the
// next waiter is served.
func TestAcquireGrantRacingCancelIsGivenBack(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 10, DeltaCacheBytes: 10, SpillSlots: LimitedSpill(1)})
	req := Request{ScanRingBytes: 10, DeltaCacheBytes: 10, NeedsSpillSlot: true}
	var grants, cancels int
	for i := range 300 {
		hold := mustAcquire(t, p, req)
		ctx, cancel := context.WithCancel(context.Background())
		racer := acquireAsync(t, ctx, p, req, 1)
		behind := acquireAsync(t, context.Background(), p, req, 2)
		var wg sync.WaitGroup
		wg.Go(hold.Release)
		wg.Go(cancel)
		wg.Wait()
		r := receive(t, racer)
		switch {
		case r.err == nil:
			grants++
			r.perm.Release()
		case errors.Is(r.err, context.Canceled):
			cancels++
		default:
			t.Fatalf("round %d: %v", i, r.err)
		}
		b := receive(t, behind)
		if b.err != nil {
			t.Fatalf("round %d: the waiter behind got %v", i, b.err)
		}
		b.perm.Release()
		wantAvailable(t, p, 10, 10, 1)
	}
	s := p.Stats()
	if s.Cancelled != uint64(cancels) || s.Granted != uint64(300+grants+300) || s.Queued != 0 {
		t.Errorf("Stats = %+v; want Cancelled=%d Granted=%d", s, cancels, 600+grants)
	}
	t.Logf("racer granted %d times, cancelled %d times", grants, cancels)
}

func TestTryAcquireDuringQueueThenAfter(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 10, DeltaCacheBytes: 10, SpillSlots: LimitedSpill(2)})
	hold := mustAcquire(t, p, Request{ScanRingBytes: 6})
	w := acquireAsync(t, context.Background(), p, Request{ScanRingBytes: 8}, 1)
	// 4 bytes are free, but the queue is not empty.
	if _, ok := p.TryAcquire(Request{DeltaCacheBytes: 1}); ok {
		t.Fatal("TryAcquire granted while a request is queued")
	}
	hold.Release()
	r := receive(t, w)
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustAcquire(t, p, Request{ScanRingBytes: 2}).Release()
	r.perm.Release()
	wantAvailable(t, p, 10, 10, 2)
}

// A permit granted to a waiter can be released from another goroutine, as
// the daemon does when a lease expires.
func TestReleaseWaitersPermitFromAnotherGoroutine(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 10, DeltaCacheBytes: 10})
	hold := mustAcquire(t, p, Request{ScanRingBytes: 10})
	w := acquireAsync(t, context.Background(), p, Request{ScanRingBytes: 10}, 1)
	go hold.Release()
	r := receive(t, w)
	if r.err != nil {
		t.Fatal(r.err)
	}
	done := make(chan struct{})
	go func() { r.perm.Release(); close(done) }()
	<-done
	r.perm.Release()
	wantAvailable(t, p, 10, 10, -1)
}
