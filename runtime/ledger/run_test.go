package ledger

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rpdhq/rpd/internal/waitfor"
)

// scriptedSource answers from a script and records each call.
type scriptedSource struct {
	mu    sync.Mutex
	calls int
	plan  func(call int) (Reading, error)
}

func (s *scriptedSource) Usage(ctx context.Context) (Reading, error) {
	s.mu.Lock()
	s.calls++
	n := s.calls
	s.mu.Unlock()
	return s.plan(n)
}

func (s *scriptedSource) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func TestRunPollsOnTheClock(t *testing.T) {
	l, clk := newTestLedger(t, Config{Max: 10})
	src := &scriptedSource{plan: func(call int) (Reading, error) {
		if call == 2 {
			return Reading{}, errors.New("provider API down")
		}
		return Reading{Active: call}, nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx, src) }()

	// settled: the loop has polled n times and armed its next tick.
	settled := func(n int) {
		t.Helper()
		waitfor.Until(t, "poll and re-arm", func() bool { return src.count() == n && clk.Pending() == 1 })
	}
	settled(1)
	if st := l.Status(); st.ProviderActive != 1 || st.Stale {
		t.Fatalf("after first poll: %+v", st)
	}
	clk.Advance(5 * time.Second)
	settled(2)
	st := l.Status()
	if st.LastError == "" || st.ProviderActive != 1 {
		t.Fatalf("after failed poll: %+v, want LastError and the old figure", st)
	}
	if got := l.Stats().SourceErrors; got != 1 {
		t.Fatalf("SourceErrors = %d", got)
	}
	clk.Advance(5 * time.Second)
	settled(3)
	if st := l.Status(); st.ProviderActive != 3 || st.LastError != "" {
		t.Fatalf("after retry: %+v, want figure 3 and no error", st)
	}
	if err := l.Reconfigure(Config{Max: 10, PollInterval: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(5 * time.Second) // the tick armed under the old interval
	settled(4)
	clk.Advance(5 * time.Second)
	if got := src.count(); got != 4 {
		t.Fatalf("polled %d times 5s into a 10s interval, want 4", got)
	}
	clk.Advance(5 * time.Second)
	settled(5)

	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop")
	}
	if got := l.Stats().SourceErrors; got != 1 {
		t.Fatalf("SourceErrors after shutdown = %d, want 1 (cancellation is not a fault)", got)
	}
}

func TestManualSource(t *testing.T) {
	l, clk := newTestLedger(t, Config{Max: 4, Grant: GrantImmediate})
	src := NewManualSource(clk)
	ctx := context.Background()
	l.Poll(ctx, src)
	if st := l.Status(); !st.Stale || st.LastError == "" {
		t.Fatalf("before any push: %+v, want stale with an error", st)
	}
	if _, err := src.Usage(ctx); !errors.Is(err, ErrNoUsage) {
		t.Fatalf("Usage = %v, want ErrNoUsage", err)
	}
	if err := src.SetUsage(-1); err == nil {
		t.Fatal("negative push accepted")
	}
	if err := src.SetUsage(3); err != nil {
		t.Fatal(err)
	}
	l.Poll(ctx, src)
	if st := l.Status(); st.ProviderActive != 3 || st.Available != 1 || st.Stale {
		t.Fatalf("after push: %+v", st)
	}
	// The same pushed figure, re-read on later polls, does not look new.
	for i := 0; i < 7; i++ {
		clk.Advance(5 * time.Second)
		l.Poll(ctx, src)
	}
	if st := l.Status(); !st.Stale {
		t.Fatalf("35s after the only push: %+v, want stale", st)
	}
	if err := src.SetUsage(2); err != nil {
		t.Fatal(err)
	}
	l.Poll(ctx, src)
	if st := l.Status(); st.Stale || st.Available != 2 {
		t.Fatalf("after new push: %+v", st)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := src.Usage(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Usage(cancelled) = %v", err)
	}
}
