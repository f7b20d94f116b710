package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rpdhq/rpd/internal/waitfor"
)

func newTestLedger(t *testing.T, cfg Config) (*Ledger, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	l, err := New(cfg, WithClock(clk))
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return l, clk
}

// waitQueued waits (bounded) until n requests are queued.
func waitQueued(t *testing.T, l *Ledger, n int) {
	t.Helper()
	waitfor.Until(t, fmt.Sprintf("%d queued", n), func() bool { return l.Status().Queued == n })
}

func mustObserve(t *testing.T, l *Ledger, clk *fakeClock, n int) {
	t.Helper()
	if err := l.ObserveUsage(n, clk.Now()); err != nil {
		t.Fatalf("ObserveUsage(%d): %v", n, err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // substring of the error; "" = valid
	}{
		{"defaults", Config{Max: 1}, ""},
		{"immediate", Config{Max: 5, Grant: GrantImmediate}, ""},
		{"zero max", Config{}, "max is 0"},
		{"negative max", Config{Max: -1}, "max is -1"},
		{"negative ttl", Config{Max: 1, ClaimTTL: -time.Second}, "negative"},
		{"stale shorter than poll", Config{Max: 1, PollInterval: 10 * time.Second, StaleAfter: 5 * time.Second}, "shorter than poll_interval"},
		{"ttl not above stale", Config{Max: 1, ClaimTTL: 30 * time.Second}, "claim_ttl 30s must exceed stale_after 30s"},
		{"bad mode", Config{Max: 1, Grant: "eventually"}, `grant mode "eventually"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v, want nil", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want ErrInvalidConfig containing %q", err, tt.want)
			}
			if _, err := New(tt.cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("New = %v, want ErrInvalidConfig", err)
			}
		})
	}
	got := Config{Max: 3}.WithDefaults()
	want := Config{Max: 3, ClaimTTL: 2 * time.Minute, PollInterval: 5 * time.Second, StaleAfter: 30 * time.Second, Grant: GrantNextUsage}
	if got != want {
		t.Fatalf("WithDefaults = %+v, want %+v", got, want)
	}
}

func TestNewLedgerIsStaleAndGrantsNothing(t *testing.T) {
	l, _ := newTestLedger(t, Config{Max: 10, Grant: GrantImmediate})
	_, err := l.TryRequest(Request{WorkerID: "w1", Count: 1})
	if !errors.Is(err, ErrStale) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("TryRequest before any figure = %v, want ErrStale (wrapping ErrUnavailable)", err)
	}
	st := l.Status()
	if !st.Stale || st.Available != 0 || st.Queued != 1 {
		t.Fatalf("status = %+v, want stale, 0 available, 1 queued ticket", st)
	}
	if got := l.Stats().DeniedStale; got != 1 {
		t.Fatalf("DeniedStale = %d, want 1", got)
	}
}

// TestSeedScenario replays the seed's race: two workers ask, the provider
// keeps reporting 99 of 100 because the first VM has not booted; only one
// worker may get a VM.
func TestSeedScenario(t *testing.T) {
	l, clk := newTestLedger(t, Config{Max: 100})
	for _, w := range []string{"client1", "client2"} {
		if _, err := l.TryRequest(Request{WorkerID: w, Count: 1}); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("%s first ask = %v, want ErrUnavailable (waits for the next figure)", w, err)
		}
	}
	clk.Advance(5 * time.Second)
	mustObserve(t, l, clk, 99)
	c1, err := l.TryRequest(Request{WorkerID: "client1", Count: 1})
	if err != nil {
		t.Fatalf("client1 after figure: %v, want its claim", err)
	}
	if _, err := l.TryRequest(Request{WorkerID: "client2", Count: 1}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("client2 after figure = %v, want ErrUnavailable", err)
	}
	clk.Advance(5 * time.Second)
	mustObserve(t, l, clk, 99) // client1's VM still booting
	if _, err := l.TryRequest(Request{WorkerID: "client2", Count: 1}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("client2 after lagging figure = %v, want ErrUnavailable (client1's claim counts)", err)
	}
	st := l.Status()
	if st.Effective != 100 || st.LocalClaims != 1 || st.Available != 0 {
		t.Fatalf("status = %+v, want effective 100 = 99 + 1 local claim", st)
	}
	if err := c1.Confirm(); err != nil {
		t.Fatalf("Confirm: %v", err)
	}
	clk.Advance(5 * time.Second)
	mustObserve(t, l, clk, 100) // client1's VM now visible; its claim retires
	if st := l.Status(); st.LocalClaims != 0 || st.Effective != 100 {
		t.Fatalf("status after confirming figure = %+v, want 0 local claims, effective 100", st)
	}
	clk.Advance(5 * time.Second)
	mustObserve(t, l, clk, 99) // some VM finished
	if _, err := l.TryRequest(Request{WorkerID: "client2", Count: 1}); err != nil {
		t.Fatalf("client2 after room appeared: %v, want its claim", err)
	}
}

func TestNextUsageGrantsOnlyOnFigureFIFOHeadOfLine(t *testing.T) {
	l, clk := newTestLedger(t, Config{Max: 3})
	mustObserve(t, l, clk, 0)
	for _, r := range []Request{{"a", 2}, {"b", 2}, {"c", 1}} {
		if _, err := l.TryRequest(r); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("TryRequest(%+v) between figures = %v, want ErrUnavailable", r, err)
		}
	}
	if st := l.Status(); st.Queued != 3 || st.LocalClaims != 0 {
		t.Fatalf("status = %+v, want 3 queued, nothing granted before the next figure", st)
	}
	clk.Advance(time.Second)
	mustObserve(t, l, clk, 0)
	// a (2) fits; b (2) does not; c (1) would fit but must not pass b.
	if st := l.Status(); st.LocalClaims != 2 || st.Queued != 2 {
		t.Fatalf("status = %+v, want a granted (2 local), b and c still queued", st)
	}
	a, err := l.TryRequest(Request{WorkerID: "a", Count: 2})
	if err != nil || a.Count() != 2 || a.WorkerID() != "a" {
		t.Fatalf("a collects = %v, %v", a, err)
	}
	if _, err := l.TryRequest(Request{WorkerID: "c", Count: 1}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("c = %v, want ErrUnavailable behind b", err)
	}
	a.Cancel()
	if _, err := l.TryRequest(Request{WorkerID: "b", Count: 2}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("b right after cancel = %v, want ErrUnavailable until the next figure", err)
	}
	clk.Advance(time.Second)
	mustObserve(t, l, clk, 0)
	b, errB := l.TryRequest(Request{WorkerID: "b", Count: 2})
	c, errC := l.TryRequest(Request{WorkerID: "c", Count: 1})
	if errB != nil || errC != nil {
		t.Fatalf("b, c after figure: %v, %v; want both granted at once", errB, errC)
	}
	if b.ID() == c.ID() {
		t.Fatalf("b and c share claim ID %s", b.ID())
	}
	if st := l.Status(); st.LocalClaims != 3 || st.Available != 0 || st.Queued != 0 {
		t.Fatalf("status = %+v, want 3 local, 0 available, 0 queued", st)
	}
}

func TestRequestWaitsForNextFigure(t *testing.T) {
	l, clk := newTestLedger(t, Config{Max: 2})
	mustObserve(t, l, clk, 0)
	type result struct {
		c   *Claim
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := l.Request(context.Background(), Request{WorkerID: "w", Count: 2})
		done <- result{c, err}
	}()
	waitQueued(t, l, 1)
	clk.Advance(time.Second)
	mustObserve(t, l, clk, 1) // no room for 2
	if st := l.Status(); st.Queued != 1 {
		t.Fatalf("queued = %d after a figure without room, want 1", st.Queued)
	}
	clk.Advance(time.Second)
	mustObserve(t, l, clk, 0)
	select {
	case r := <-done:
		if r.err != nil || r.c.Count() != 2 {
			t.Fatalf("Request = %v, %v", r.c, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Request not granted after a figure with room")
	}
	if got := l.Stats(); got.Granted != 1 || got.Queued != 1 {
		t.Fatalf("stats = %+v, want 1 granted, 1 queued", got)
	}
}

func TestRequestContextCancelLeavesNoTrace(t *testing.T) {
	l, clk := newTestLedger(t, Config{Max: 1})
	mustObserve(t, l, clk, 0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := l.Request(ctx, Request{WorkerID: "w", Count: 1})
		done <- err
	}()
	waitQueued(t, l, 1)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Request = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Request did not return after cancel")
	}
	if st := l.Status(); st.Queued != 0 || st.LocalClaims != 0 {
		t.Fatalf("status = %+v, want nothing queued or claimed", st)
	}
	// An already-ended context never joins the queue.
	if _, err := l.Request(ctx, Request{WorkerID: "w", Count: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Request(done ctx) = %v, want context.Canceled", err)
	}
	if st := l.Status(); st.Queued != 0 {
		t.Fatalf("queued = %d, want 0", st.Queued)
	}
}

func TestImmediateModeGrantsAtOnceAndOnRelease(t *testing.T) {
	l, clk := newTestLedger(t, Config{Max: 2, Grant: GrantImmediate})
	mustObserve(t, l, clk, 0)
	ctx := context.Background()
	c1, err := l.Request(ctx, Request{WorkerID: "a", Count: 1})
	if err != nil {
		t.Fatalf("first Request: %v", err)
	}
	c2, err := l.TryRequest(Request{WorkerID: "b", Count: 1})
	if err != nil {
		t.Fatalf("TryRequest with room: %v", err)
	}
	if _, err := l.TryRequest(Request{WorkerID: "c", Count: 1}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("TryRequest when full = %v, want ErrUnavailable", err)
	}
	done := make(chan *Claim, 1)
	go func() {
		c, _ := l.Request(ctx, Request{WorkerID: "d", Count: 1})
		done <- c
	}()
	waitQueued(t, l, 2)
	c1.Cancel()
	c1.Cancel() // idempotent
	// c's ticket is ahead of d and takes the freed VM.
	if c, err := l.TryRequest(Request{WorkerID: "c", Count: 1}); err != nil || c == nil {
		t.Fatalf("c after cancel = %v, %v; want its ticket granted", c, err)
	}
	// c2 expires after ClaimTTL: the timer grants d without a new figure,
	// but only while the figure is fresh, so keep it fresh.
	for i := 0; i < 24; i++ {
		clk.Advance(5 * time.Second)
		mustObserve(t, l, clk, 0)
	}
	select {
	case c := <-done:
		if c == nil || c.WorkerID() != "d" {
			t.Fatalf("d got %v", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("d not granted after c2 expired")
	}
	if err := c2.Confirm(); !errors.Is(err, ErrClaimEnded) {
		t.Fatalf("Confirm after expiry = %v, want ErrClaimEnded", err)
	}
	if got := l.Stats(); got.ExpiredUnconfirmed < 1 || got.Cancelled != 1 {
		t.Fatalf("stats = %+v, want >= 1 expired-unconfirmed, 1 cancelled", got)
	}
}

func TestImmediateExpiryTimerGrantsWaiter(t *testing.T) {
	cfg := Config{Max: 1, Grant: GrantImmediate, ClaimTTL: 40 * time.Second, StaleAfter: 30 * time.Second, PollInterval: time.Second}
	l, clk := newTestLedger(t, cfg)
	mustObserve(t, l, clk, 0)
	c1, err := l.TryRequest(Request{WorkerID: "a", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(20 * time.Second)
	mustObserve(t, l, clk, 0)
	done := make(chan *Claim, 1)
	go func() {
		c, _ := l.Request(context.Background(), Request{WorkerID: "b", Count: 1})
		done <- c
	}()
	waitQueued(t, l, 1)
	if clk.Pending() != 1 {
		t.Fatalf("pending timers = %d, want 1 (the expiry wake-up)", clk.Pending())
	}
	clk.Advance(20 * time.Second) // c1 expires at +40s; the figure is 20s old: fresh
	select {
	case c := <-done:
		if c == nil {
			t.Fatal("nil claim")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not granted by the expiry timer")
	}
	if err := c1.Confirm(); !errors.Is(err, ErrClaimEnded) {
		t.Fatalf("Confirm expired = %v", err)
	}
}

func TestConfirmCountsUntilLaterFigure(t *testing.T) {
	l, clk := newTestLedger(t, Config{Max: 1, Grant: GrantImmediate})
	mustObserve(t, l, clk, 0)
	clk.Advance(time.Second)
	c, err := l.TryRequest(Request{WorkerID: "w", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if err := c.Confirm(); err != nil {
		t.Fatal(err)
	}
	if err := c.Confirm(); err != nil {
		t.Fatalf("second Confirm: %v, want nil", err)
	}
	c.Cancel() // no-op on a confirmed claim
	confirmedAt := clk.Now()
	// A figure taken at the confirmation instant, or before it, cannot be
	// trusted to include the VM.
	mustObserve(t, l, clk, 0)
	if st := l.Status(); st.LocalClaims != 1 {
		t.Fatalf("after figure taken at confirm time: local = %d, want 1", st.LocalClaims)
	}
	clk.Advance(time.Second)
	if err := l.ObserveUsage(0, confirmedAt.Add(-time.Millisecond)); err != nil { // out-of-order
		t.Fatal(err)
	}
	if st := l.Status(); st.LocalClaims != 1 || st.LastUsageAt != confirmedAt {
		t.Fatalf("after older figure: %+v, want it ignored", st)
	}
	// A confirmed claim does not expire, however long the figure takes.
	clk.Advance(10 * time.Minute)
	if st := l.Status(); st.LocalClaims != 1 || !st.Stale {
		t.Fatalf("after 10m: %+v, want claim still counting, stale", st)
	}
	if _, ok := l.Lookup(c.ID()); !ok {
		t.Fatal("confirmed claim not found by ID")
	}
	mustObserve(t, l, clk, 1)
	if st := l.Status(); st.LocalClaims != 0 || st.Effective != 1 {
		t.Fatalf("after later figure: %+v, want the claim retired, effective 1", st)
	}
	if _, ok := l.Lookup(c.ID()); ok {
		t.Fatal("retired claim still found")
	}
	if err := c.Confirm(); err != nil {
		t.Fatalf("Confirm after retire = %v, want nil", err)
	}
	if got := l.Stats(); got.Confirmed != 1 || got.Retired != 1 || got.ExpiredUnconfirmed != 0 {
		t.Fatalf("stats = %+v", got)
	}
}

func TestStaleGrantsNothing(t *testing.T) {
	l, clk := newTestLedger(t, Config{Max: 5, Grant: GrantImmediate})
	mustObserve(t, l, clk, 0)
	clk.Advance(30 * time.Second)
	if _, err := l.TryRequest(Request{WorkerID: "a", Count: 1}); err != nil {
		t.Fatalf("at exactly stale_after: %v, want granted", err)
	}
	clk.Advance(time.Nanosecond)
	_, err := l.TryRequest(Request{WorkerID: "b", Count: 1})
	if !errors.Is(err, ErrStale) {
		t.Fatalf("past stale_after = %v, want ErrStale", err)
	}
	st := l.Status()
	if !st.Stale || st.Available != 0 {
		t.Fatalf("status = %+v, want stale with 0 available", st)
	}
	mustObserve(t, l, clk, 0) // fresh again: b's ticket is granted
	if c, err := l.TryRequest(Request{WorkerID: "b", Count: 1}); err != nil || c == nil {
		t.Fatalf("b after fresh figure = %v, %v", c, err)
	}
	if got := l.Stats().DeniedStale; got != 1 {
		t.Fatalf("DeniedStale = %d, want 1", got)
	}
}

func TestBadRequests(t *testing.T) {
	l, clk := newTestLedger(t, Config{Max: 2, Grant: GrantImmediate})
	mustObserve(t, l, clk, 0)
	ctx := context.Background()
	if _, err := l.Request(ctx, Request{WorkerID: "w", Count: 0}); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("count 0 = %v", err)
	}
	if _, err := l.TryRequest(Request{WorkerID: "", Count: 1}); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("no worker = %v", err)
	}
	if _, err := l.TryRequest(Request{WorkerID: "w", Count: -3}); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("negative count = %v", err)
	}
	if _, err := l.Request(ctx, Request{WorkerID: "w", Count: 3}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("count > max = %v", err)
	}
	if _, err := l.TryRequest(Request{WorkerID: "w", Count: 3}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("try count > max = %v", err)
	}
	if err := l.ObserveUsage(-1, clk.Now()); err == nil {
		t.Fatal("negative figure accepted")
	}
	if st := l.Status(); st.Queued != 0 || st.LocalClaims != 0 || st.ProviderActive != 0 {
		t.Fatalf("status after bad input = %+v, want unchanged", st)
	}
}

func TestReconfigure(t *testing.T) {
	l, clk := newTestLedger(t, Config{Max: 4, Grant: GrantImmediate})
	mustObserve(t, l, clk, 0)
	var held []*Claim
	for i := 0; i < 3; i++ {
		c, err := l.TryRequest(Request{WorkerID: string(rune('a' + i)), Count: 1})
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	big := make(chan error, 1)
	go func() {
		_, err := l.Request(context.Background(), Request{WorkerID: "big", Count: 3})
		big <- err
	}()
	waitQueued(t, l, 1)
	if err := l.Reconfigure(Config{Max: 0}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("invalid Reconfigure = %v", err)
	}
	if got := l.Config().Max; got != 4 {
		t.Fatalf("max after failed Reconfigure = %d, want 4", got)
	}
	if err := l.Reconfigure(Config{Max: 2, Grant: GrantImmediate}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-big:
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("queued request above new max = %v, want ErrTooLarge", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("oversized waiter not failed by Reconfigure")
	}
	st := l.Status()
	if st.LocalClaims != 3 || st.Effective != 3 || st.Available != 0 {
		t.Fatalf("after lowering max: %+v, want 3 claims kept (nothing revoked)", st)
	}
	if _, err := l.TryRequest(Request{WorkerID: "x", Count: 1}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("request above lowered max = %v", err)
	}
	held[0].Cancel() // 2 held: still no room under max 2
	if st := l.Status(); st.LocalClaims != 2 || st.Queued != 1 {
		t.Fatalf("after one cancel: %+v, want 2 held, x queued", st)
	}
	held[1].Cancel() // 1 held: x's ticket fits and is granted at once
	if c, err := l.TryRequest(Request{WorkerID: "x", Count: 1}); err != nil || c == nil {
		t.Fatalf("x after usage fell below lowered max = %v, %v", c, err)
	}
	if err := l.Reconfigure(Config{Max: 2, Grant: GrantImmediate}); err != nil {
		t.Fatalf("unchanged Reconfigure: %v", err)
	}
}

func TestReconfigureRaisesMaxGrantsWaiters(t *testing.T) {
	l, clk := newTestLedger(t, Config{Max: 1, Grant: GrantImmediate})
	mustObserve(t, l, clk, 1)
	if _, err := l.TryRequest(Request{WorkerID: "a", Count: 1}); !errors.Is(err, ErrUnavailable) {
		t.Fatal(err)
	}
	if err := l.Reconfigure(Config{Max: 2, Grant: GrantImmediate}); err != nil {
		t.Fatal(err)
	}
	if c, err := l.TryRequest(Request{WorkerID: "a", Count: 1}); err != nil || c == nil {
		t.Fatalf("after raising max: %v, %v", c, err)
	}
}

func TestAbandonedTicketIsDropped(t *testing.T) {
	l, clk := newTestLedger(t, Config{Max: 1})
	mustObserve(t, l, clk, 1)
	if _, err := l.TryRequest(Request{WorkerID: "gone", Count: 1}); !errors.Is(err, ErrUnavailable) {
		t.Fatal(err)
	}
	if _, err := l.TryRequest(Request{WorkerID: "stays", Count: 1}); !errors.Is(err, ErrUnavailable) {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ { // 150s: longer than ClaimTTL
		clk.Advance(5 * time.Second)
		mustObserve(t, l, clk, 1)
		if _, err := l.TryRequest(Request{WorkerID: "stays", Count: 1}); !errors.Is(err, ErrUnavailable) {
			t.Fatal(err)
		}
	}
	clk.Advance(5 * time.Second)
	mustObserve(t, l, clk, 0)
	if c, err := l.TryRequest(Request{WorkerID: "stays", Count: 1}); err != nil || c == nil {
		t.Fatalf("stays = %v, %v; want granted past the abandoned ticket", c, err)
	}
	if st := l.Status(); st.Queued != 0 {
		t.Fatalf("queued = %d, want 0", st.Queued)
	}
}

func TestUncollectedGrantExpires(t *testing.T) {
	l, clk := newTestLedger(t, Config{Max: 1})
	mustObserve(t, l, clk, 0)
	if _, err := l.TryRequest(Request{WorkerID: "w", Count: 1}); !errors.Is(err, ErrUnavailable) {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	mustObserve(t, l, clk, 0) // granted, not collected
	if st := l.Status(); st.LocalClaims != 1 {
		t.Fatalf("local = %d, want 1 (an uncollected grant counts)", st.LocalClaims)
	}
	clk.Advance(2*time.Minute + time.Second)
	if st := l.Status(); st.LocalClaims != 0 {
		t.Fatalf("local = %d, want 0 after ClaimTTL", st.LocalClaims)
	}
	if _, err := l.TryRequest(Request{WorkerID: "w", Count: 1}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("collecting a lapsed grant = %v, want ErrUnavailable (queued afresh)", err)
	}
	if got := l.Stats().ExpiredUnconfirmed; got != 1 {
		t.Fatalf("ExpiredUnconfirmed = %d, want 1", got)
	}
}

func TestLookupAndClaimID(t *testing.T) {
	l, clk := newTestLedger(t, Config{Max: 1, Grant: GrantImmediate})
	mustObserve(t, l, clk, 0)
	c, err := l.TryRequest(Request{WorkerID: "w", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	id, err := ParseClaimID(c.ID().String())
	if err != nil || id != c.ID() {
		t.Fatalf("ParseClaimID(%q) = %v, %v", c.ID().String(), id, err)
	}
	got, ok := l.Lookup(id)
	if !ok || got != c {
		t.Fatalf("Lookup = %v, %v", got, ok)
	}
	if !c.ExpiresAt().Equal(clk.Now().Add(2 * time.Minute)) {
		t.Fatalf("ExpiresAt = %v", c.ExpiresAt())
	}
	got.Cancel()
	if _, ok := l.Lookup(id); ok {
		t.Fatal("cancelled claim still found")
	}
	for _, bad := range []string{"", "xyz", "1", "00000000000000001"} {
		if _, err := ParseClaimID(bad); err == nil {
			t.Errorf("ParseClaimID(%q) accepted", bad)
		}
	}
}
