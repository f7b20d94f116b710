package daemon

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rpdhq/rpd/api"
)

// Every permit is released exactly once, whether by release, expiry or
// releaseAll, whatever the interleaving.
func TestPermitTableReleasesExactlyOnce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clock := newFakeClock()
		tab := newPermitTable(clock)
		var released []atomic.Int32
		released = make([]atomic.Int32, 20)
		var ids []string
		n := rapid.IntRange(1, 20).Draw(t, "permits")
		for i := range n {
			ttl := time.Duration(rapid.IntRange(1, 10).Draw(t, "ttl")) * time.Second
			l := tab.add(api.Lease{Budget: "b"}, ttl, func() { released[i].Add(1) })
			ids = append(ids, l.LeaseID)
		}
		for step := range rapid.IntRange(0, 40).Draw(t, "steps") {
			_ = step
			i := rapid.IntRange(0, n-1).Draw(t, "i")
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0:
				_ = tab.release(ids[i], "")
			case 1:
				_, _ = tab.heartbeat(ids[i])
			case 2:
				clock.Advance(time.Duration(rapid.IntRange(0, 4000).Draw(t, "ms")) * time.Millisecond)
			}
		}
		if held := tab.count()["b"]; held < 0 || held > n {
			t.Fatalf("count %d out of range", held)
		}
		tab.releaseAll()
		clock.Advance(time.Hour)
		for i := range n {
			if got := released[i].Load(); got != 1 {
				t.Fatalf("permit %d released %d times", i, got)
			}
		}
		if tab.count()["b"] != 0 {
			t.Fatal("permits left after releaseAll")
		}
	})
}

func TestPermitTableConcurrentRace(t *testing.T) {
	clock := newFakeClock()
	tab := newPermitTable(clock)
	var releases atomic.Int64
	var wg sync.WaitGroup
	const workers, per = 8, 200
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			for i := 0; i < per; i++ {
				l := tab.add(api.Lease{Budget: "b"}, time.Second, func() { releases.Add(1) })
				if i%3 == 0 {
					_, _ = tab.heartbeat(l.LeaseID)
				}
				if i%2 == 0 {
					_ = tab.release(l.LeaseID, "b")
				}
			}
		})
	}
	wg.Go(func() {
		for i := 0; i < 200; i++ {
			clock.Advance(10 * time.Millisecond)
		}
	})
	wg.Wait()
	clock.Advance(time.Hour)
	if got := releases.Load(); got != workers*per {
		t.Fatalf("%d releases for %d permits", got, workers*per)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A shutdown says how many in-memory grants (budget permits, ceiling
// claims) it drops; with none held it says nothing.
func TestShutdownWarnsOfDroppedPermitsAndClaims(t *testing.T) {
	const body = "budget \"b\" {}\nvm_ceiling \"v\" {\n  max   = 3\n  grant = \"immediate\"\n}\n"
	var logs syncBuffer
	withLog := func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) }

	idle := startDaemon(t, body, withLog)
	if err := idle.stop(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "shutdown drops") {
		t.Fatalf("a shutdown with nothing held warned of dropped grants:\n%s", logs.String())
	}

	td := startDaemon(t, body, withLog)
	ctx := ctxT(t)
	if _, err := td.c.AcquirePermit(ctx, "b", api.PermitRequest{ScanRingBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if _, err := td.c.PushUsage(ctx, "v", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := td.c.RequestClaim(ctx, "v", api.ClaimRequest{WorkerID: "w", Count: 2}); err != nil {
		t.Fatal(err)
	}
	if err := td.stop(); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if !strings.Contains(out, "shutdown drops") || !strings.Contains(out, "budget_permits=1") || !strings.Contains(out, "ceiling_claims=2") {
		t.Fatalf("shutdown log does not report 1 permit and 2 claims dropped:\n%s", out)
	}
}
