package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/rpdhq/rpd/runtime/ledger"
)

// stepClock is a clock that moves only when told, so the example's output
// does not depend on timing. Real callers leave the clock out (wall clock).
type stepClock struct{ now time.Time }

func (c *stepClock) Now() time.Time { return c.now }

// AfterFunc schedules nothing: these examples never leave a request waiting,
// which is the only time the ledger sets a timer.
func (c *stepClock) AfterFunc(time.Duration, func()) ledger.Timer { return noTimer{} }

type noTimer struct{}

func (noTimer) Stop() bool { return false }

// The seed's race, handled: the provider reports 99 of 100 for a while after
// the first VM was granted, but the ledger's local claim keeps the second
// worker waiting until the first VM is accounted for.
func Example() {
	clk := &stepClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l, err := ledger.New(ledger.Config{Max: 100}, ledger.WithClock(clk))
	if err != nil {
		panic(err)
	}
	ask := func(worker string) *ledger.Claim {
		c, err := l.TryRequest(ledger.Request{WorkerID: worker, Count: 1})
		switch {
		case errors.Is(err, ledger.ErrUnavailable):
			fmt.Printf("%s: nothing available, ask later\n", worker)
		case err != nil:
			panic(err)
		default:
			fmt.Printf("%s: granted claim %s\n", worker, c.ID())
		}
		return c
	}
	figure := func(active int) {
		clk.now = clk.now.Add(5 * time.Second)
		if err := l.ObserveUsage(active, clk.now); err != nil {
			panic(err)
		}
		st := l.Status()
		fmt.Printf("figure %d: effective %d = %d + %d local, available %d\n",
			active, st.Effective, st.ProviderActive, st.LocalClaims, st.Available)
	}

	ask("client1") // requests wait for the next figure (grant = "next_usage")
	ask("client2")
	figure(99)
	c1 := ask("client1")
	ask("client2")
	figure(99) // client1's VM is still booting: its claim still counts
	ask("client2")
	clk.now = clk.now.Add(time.Second)
	if err := c1.Confirm(); err != nil { // client1's VM is up at the provider
		panic(err)
	}
	figure(100) // taken after the confirmation: the claim retires
	figure(99)  // a VM finished; client2's place in the queue is served
	ask("client2")
	// Output:
	// client1: nothing available, ask later
	// client2: nothing available, ask later
	// figure 99: effective 100 = 99 + 1 local, available 0
	// client1: granted claim 0000000000000001
	// client2: nothing available, ask later
	// figure 99: effective 100 = 99 + 1 local, available 0
	// client2: nothing available, ask later
	// figure 100: effective 100 = 100 + 0 local, available 0
	// figure 99: effective 100 = 99 + 1 local, available 0
	// client2: granted claim 0000000000000002
}

// An HTTPSource reads the provider's count from a JSON field; anything else
// (a non-2xx status, bad JSON, a missing, negative or fractional count) is an
// error, never a zero.
func ExampleHTTPSource() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/broken" {
			fmt.Fprint(w, `{"usage": {"active": 3.5}}`)
			return
		}
		fmt.Fprint(w, `{"usage": {"active": 12}}`)
	}))
	defer srv.Close()

	src := &ledger.HTTPSource{URL: srv.URL, Field: "usage.active", Timeout: 2 * time.Second}
	r, err := src.Usage(context.Background())
	fmt.Println(r.Active, err)

	broken := &ledger.HTTPSource{URL: srv.URL + "/broken", Field: "usage.active"}
	_, err = broken.Usage(context.Background())
	fmt.Println(err != nil)
	// Output:
	// 12 <nil>
	// true
}

// Lowering max revokes nothing: held claims keep counting and new grants
// wait until usage falls below the new max.
func ExampleLedger_Reconfigure() {
	clk := &stepClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l, _ := ledger.New(ledger.Config{Max: 3, Grant: ledger.GrantImmediate}, ledger.WithClock(clk))
	_ = l.ObserveUsage(0, clk.now)
	a, _ := l.TryRequest(ledger.Request{WorkerID: "a", Count: 2})
	if err := l.Reconfigure(ledger.Config{Max: 1, Grant: ledger.GrantImmediate}); err != nil {
		panic(err)
	}
	st := l.Status()
	fmt.Println("max", st.Max, "local", st.LocalClaims, "available", st.Available)
	a.Cancel()
	st = l.Status()
	fmt.Println("max", st.Max, "local", st.LocalClaims, "available", st.Available)
	// Output:
	// max 1 local 2 available 0
	// max 1 local 0 available 1
}
