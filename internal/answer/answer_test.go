package answer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

// fakeConn frames answers as "<status> <type> <body>|" and records what
// TryWrite wrote; limit > 0 makes each TryWrite take at most limit bytes.
type fakeConn struct {
	mu    sync.Mutex
	out   bytes.Buffer
	limit int
	fail  error
	calls int
}

func (c *fakeConn) Frame(dst []byte, status int, contentType string, body []byte) []byte {
	dst = strconv.AppendInt(dst, int64(status), 10)
	dst = append(dst, ' ')
	dst = append(dst, contentType...)
	dst = append(dst, ' ')
	dst = append(dst, body...)
	return append(dst, '|')
}

func (c *fakeConn) TryWrite(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.fail != nil {
		return 0, c.fail
	}
	if c.limit > 0 && len(b) > c.limit {
		b = b[:c.limit]
	}
	c.out.Write(b)
	return len(b), nil
}

func (c *fakeConn) written() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

func request(c *fakeConn, open bool) (*Offer, context.Context) {
	o := NewOffer(c)
	o.Reset(open)
	return o, NewContext(context.Background(), o)
}

func TestSentOnceTheWriteSucceeds(t *testing.T) {
	c := &fakeConn{}
	o, ctx := request(c, true)
	if !Offered(ctx) {
		t.Fatal("an open offer is not offered")
	}
	Arm(ctx, 200, "application/json", []byte(`{"a":1}`))
	if Offered(ctx) {
		t.Fatal("Offered after Arm: a second Arm would be dropped")
	}
	e := Take(ctx)
	if e == nil {
		t.Fatal("Take found no armed answer")
	}
	if Take(ctx) != nil {
		t.Fatal("a second write took the same answer")
	}
	if c.written() != "" {
		t.Fatal("written before Send")
	}
	e.Send()
	if got, want := c.written(), `200 application/json {"a":1}|`; got != want {
		t.Fatalf("written %q, want %q", got, want)
	}
	if e.Cancel() {
		t.Fatal("Cancel after Send reported the answer unsent")
	}
	sent, rest, err := o.Settle()
	if !sent || len(rest) != 0 || err != nil {
		t.Fatalf("Settle = %v, %q, %v; want sent with nothing left", sent, rest, err)
	}
	e.Send() // a second Send writes nothing
	if c.calls != 1 {
		t.Fatalf("%d writes, want 1", c.calls)
	}
}

func TestNothingWithoutAnOpenOffer(t *testing.T) {
	c := &fakeConn{}
	for name, ctx := range map[string]context.Context{
		"no offer":     context.Background(),
		"closed offer": func() context.Context { _, ctx := request(c, false); return ctx }(),
	} {
		t.Run(name, func(t *testing.T) {
			if Offered(ctx) {
				t.Fatal("offered")
			}
			Arm(ctx, 200, "text/plain", []byte("x"))
			if e := Take(ctx); e != nil {
				t.Fatal("took an answer that was not offered")
			}
		})
	}
	if c.calls != 0 {
		t.Fatal("written")
	}
	var e *Early
	e.Send() // a write that carries no answer
	if !e.Cancel() {
		t.Fatal("a nil Early's Cancel must report it unsent")
	}
}

func TestCancelledNeverSent(t *testing.T) {
	c := &fakeConn{}
	o, ctx := request(c, true)
	Arm(ctx, 200, "t", []byte("b"))
	e := Take(ctx)
	if !e.Cancel() {
		t.Fatal("Cancel of an armed answer failed")
	}
	e.Send()
	if sent, _, _ := o.Settle(); sent || c.calls != 0 {
		t.Fatalf("sent=%v, %d writes after Cancel", sent, c.calls)
	}
}

func TestSettleCancelsWhatWasNotSent(t *testing.T) {
	c := &fakeConn{}
	o, ctx := request(c, true)
	Arm(ctx, 200, "t", []byte("first"))
	stale := Take(ctx)
	if sent, _, _ := o.Settle(); sent {
		t.Fatal("settled as sent")
	}
	// The next request reuses the offer (and the bytes' buffer); a writer
	// that still holds the first answer sends nothing.
	o.Reset(true)
	Arm(ctx, 200, "t", []byte("second"))
	e := Take(ctx)
	stale.Send()
	if c.calls != 0 {
		t.Fatalf("a stale answer was written: %q", c.written())
	}
	e.Send()
	if got := c.written(); got != "200 t second|" {
		t.Fatalf("written %q", got)
	}
	if sent, _, _ := o.Settle(); !sent {
		t.Fatal("the second answer is not settled as sent")
	}
}

func TestRestAndErrorGoToTheServer(t *testing.T) {
	c := &fakeConn{limit: 4}
	o, ctx := request(c, true)
	Arm(ctx, 200, "t", []byte("a longer body"))
	Take(ctx).Send()
	sent, rest, err := o.Settle()
	if !sent || err != nil {
		t.Fatalf("Settle = %v, %v", sent, err)
	}
	if got := c.written() + string(rest); got != "200 t a longer body|" {
		t.Fatalf("written then rest = %q", got)
	}

	boom := errors.New("connection reset")
	c = &fakeConn{fail: boom}
	o, ctx = request(c, true)
	Arm(ctx, 200, "t", []byte("b"))
	Take(ctx).Send()
	if sent, _, err := o.Settle(); !sent || !errors.Is(err, boom) {
		t.Fatalf("Settle = %v, %v; want sent with the write's error", sent, err)
	}
}

// TestSendAgainstCancel races the writer's Send with the caller's Cancel
// (its context ended): exactly one wins, and the answer is written exactly
// when Cancel lost.
func TestSendAgainstCancel(t *testing.T) {
	for i := range 2000 {
		c := &fakeConn{}
		o, ctx := request(c, true)
		Arm(ctx, 200, "t", []byte(strconv.Itoa(i)))
		e := Take(ctx)
		var wg sync.WaitGroup
		var cancelled bool
		wg.Add(2)
		go func() { defer wg.Done(); e.Send() }()
		go func() { defer wg.Done(); cancelled = e.Cancel() }()
		wg.Wait()
		sent, _, _ := o.Settle()
		if cancelled == sent || (c.calls == 1) != sent {
			t.Fatalf("round %d: cancelled=%v, settled sent=%v, writes=%d", i, cancelled, sent, c.calls)
		}
	}
}

// TestOfferModel drives one connection's offer through random requests,
// each arming, taking, sending, cancelling and settling in random order,
// with writers that keep stale answers: what the connection receives is
// exactly the answers settled as sent, in order, each whole.
func TestOfferModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := &fakeConn{limit: rapid.IntRange(0, 12).Draw(t, "limit")}
		o := NewOffer(c)
		ctx := NewContext(context.Background(), o)
		var stale []*Early
		var want bytes.Buffer
		for req := range rapid.IntRange(1, 12).Draw(t, "requests") {
			o.Reset(rapid.Bool().Draw(t, "open"))
			body := fmt.Sprintf("answer %d", req)
			var e *Early
			for _, step := range rapid.SliceOfN(rapid.SampledFrom([]string{"arm", "take", "send", "cancel", "stale"}), 0, 6).Draw(t, "steps") {
				switch step {
				case "arm":
					Arm(ctx, 200, "t", []byte(body))
				case "take":
					if x := Take(ctx); x != nil {
						e = x
					}
				case "send":
					e.Send()
				case "cancel":
					e.Cancel()
				case "stale":
					for _, s := range stale {
						s.Send()
					}
				}
			}
			sent, rest, err := o.Settle()
			if err != nil {
				t.Fatal(err)
			}
			if sent {
				if e == nil {
					t.Fatal("settled as sent, but no write took the answer")
				}
				// The server writes the rest before anything else.
				c.mu.Lock()
				c.out.Write(rest)
				c.mu.Unlock()
				want.WriteString("200 t " + body + "|")
			}
			if e != nil {
				stale = append(stale, e)
			}
			if got := c.written(); got != want.String() {
				t.Fatalf("after request %d the connection has %q, want %q", req, got, want.String())
			}
		}
	})
}
