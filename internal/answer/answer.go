// Package answer lets the goroutine that makes a request's record durable
// send the request's answer itself, the moment the record is durable,
// instead of waking the request's goroutine to send it.
//
// Under load the wake-up is most of what a grant waits for after its
// sync: the woken goroutine queues for a CPU behind every other runnable
// one (a median of 22-27 µs and a p99 of 150-170 µs under the daemon's
// HTTP benchmark), while the group commit's writer is already running and
// can write the answer to the socket at once.
//
// Three parties take part:
//
//   - the server offers it for a request (an Offer in the request's
//     context, reset for each request) when it can send a whole answer
//     without waiting and keep the connection's answers in order;
//   - the code that knows what the answer will be, once the write
//     succeeds, arms it with Arm before the write;
//   - the store takes the armed answer with Take and, once the write is
//     durable and counted, calls Send from its writer; when the write's
//     caller gives up instead (its context ended), it calls Cancel, and
//     only when Cancel reports that the answer went out anyway is the
//     write reported as a success, so that no client holds an answer the
//     daemon rolled back.
//
// After the handler, the server calls Settle: an answer not sent by then
// is never sent, and the server answers as usual.
package answer

import (
	"context"
	"runtime"
	"sync/atomic"
)

// Conn is the server's side of an offer.
type Conn interface {
	// Frame appends to dst the whole answer with status, Content-Type
	// contentType and body: status line, header and body, as the server
	// would write it.
	Frame(dst []byte, status int, contentType string, body []byte) []byte
	// TryWrite writes what it can of b to the connection without
	// waiting, from any goroutine: a full socket buffer is not an error
	// (it returns what was written, possibly 0). The server's own writes
	// do not run meanwhile: the request's goroutine waits for its write.
	TryWrite(b []byte) (int, error)
}

// An Offer is a server's offer, for the request under way, to let its
// answer be sent early. One is reused for each request of a connection;
// it is used by the request's goroutines, never by two requests at once.
type Offer struct {
	conn  Conn
	open  bool   // offered for the request under way
	early *Early // armed for it; nil: none
	taken bool   // early is carried by a write
	buf   []byte // the previous answer's bytes, reused once settled
}

// NewOffer returns an offer on conn, closed until Reset opens it.
func NewOffer(conn Conn) *Offer { return &Offer{conn: conn} }

// Reset starts the offer for a new request: open or not. The previous
// request must have been settled.
func (o *Offer) Reset(open bool) {
	o.open, o.early, o.taken = open, nil, false
}

// An Early is one armed answer. Its bytes are fixed when armed; its state
// moves once, from armed to sent or cancelled.
type Early struct {
	conn  Conn
	b     []byte
	state atomic.Int32
	// n and err are what TryWrite did, set before state becomes sent.
	n   int
	err error
}

// An Early's states.
const (
	armed     int32 = iota
	sending         // Send claimed it and is writing it
	sent            // Send wrote it (n, err)
	cancelled       // never sent
)

type offerKey struct{}

// NewContext returns ctx carrying o for the requests derived from it.
func NewContext(ctx context.Context, o *Offer) context.Context {
	return context.WithValue(ctx, offerKey{}, o)
}

func offerOf(ctx context.Context) *Offer {
	o, _ := ctx.Value(offerKey{}).(*Offer)
	return o
}

// Offered reports whether ctx's request may have its answer sent early:
// whether Arm would arm it.
func Offered(ctx context.Context) bool {
	o := offerOf(ctx)
	return o != nil && o.open && o.early == nil
}

// Arm prepares the answer of ctx's request, sent if a store takes it and
// the write succeeds: status, a Content-Type and the body (copied). It
// does nothing when the request's server made no offer, or an answer was
// armed already.
func Arm(ctx context.Context, status int, contentType string, body []byte) {
	o := offerOf(ctx)
	if o == nil || !o.open || o.early != nil {
		return
	}
	// A fresh Early for each answer: a writer that still holds an older
	// one (of a write whose caller gave up) can only find it cancelled.
	o.early = &Early{conn: o.conn, b: o.conn.Frame(o.buf[:0], status, contentType, body)}
}

// Take returns the answer armed for ctx's request for the write about to
// carry it, or nil: none is armed, or a write already carries it.
func Take(ctx context.Context) *Early {
	o := offerOf(ctx)
	if o == nil || o.early == nil || o.taken {
		return nil
	}
	o.taken = true
	return o.early
}

// Send writes the answer, unless Cancel came first: the store calls it
// once the write that carries e is durable and counted. It does not wait
// for the socket: what does not fit now is left to the server (Settle).
func (e *Early) Send() {
	if e == nil || e.state.Load() != armed {
		return
	}
	// Claimed first, so that Cancel cannot win once a byte may be out.
	if !e.state.CompareAndSwap(armed, sending) {
		return
	}
	e.n, e.err = e.conn.TryWrite(e.b)
	e.state.Store(sent)
}

// Cancel makes sure e is never sent, for a write whose caller stops
// waiting: false when it was sent (or is being sent) already, and then
// the write succeeded, since Send runs only after it did.
func (e *Early) Cancel() bool {
	if e == nil {
		return true
	}
	return e.state.CompareAndSwap(armed, cancelled) || e.state.Load() == cancelled
}

// Sent reports whether the request's answer went out early (or is going
// out): what its handler writes is then the same answer, and the server
// drops it.
func (o *Offer) Sent() bool {
	if o == nil || o.early == nil {
		return false
	}
	s := o.early.state.Load()
	return s == sending || s == sent
}

// Settle ends the request's offer, after its handler returned. sent: its
// answer went out early, and rest is the part TryWrite could not write
// (the server writes it before anything else) and err its failure; not
// sent, it never will be, and the server answers as usual.
func (o *Offer) Settle() (sent bool, rest []byte, err error) {
	e := o.early
	o.early, o.open = nil, false
	if e == nil {
		return false, nil, nil
	}
	// Once settled, no writer reads e.b (a late Send finds e's state
	// final): the next answer reuses the bytes, after the server wrote
	// rest.
	o.buf = e.b[:0]
	if e.Cancel() {
		return false, nil, nil
	}
	// Send claimed it. It normally finished before the write's caller
	// was woken; only a caller that stopped waiting (its context ended)
	// while Send ran gets here first, and TryWrite does not wait.
	for e.state.Load() == sending {
		runtime.Gosched()
	}
	return true, e.b[e.n:], e.err
}
