package h1

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rpdhq/rpd/internal/answer"
)

// A connection's phase, for the reaper and CloseQuiet.
const (
	phaseNew    int32 = iota // accepted, no byte of a request yet
	phaseIdle                // waiting for the next request's first byte
	phaseHeader              // reading a request's header
	phaseActive              // the handler runs
	phaseAnswer              // the handler returned: the answer is finished and written
)

// conn is one connection. Its goroutine reads a request, runs the handler
// and writes the answer, then the next; the reaper (another goroutine)
// reads the atomics and takes mu to start or trip things.
type conn struct {
	s      *Server
	nc     net.Conn
	remote string
	// ctx is the parent of the connection's requests' contexts: its own
	// cancelCtx, so that a request's WithCancel registers with it and not
	// with the server-wide BaseContext, whose one mutex and children map
	// every connection's requests would otherwise share.
	ctx       context.Context
	ctxCancel context.CancelFunc
	br        *bufio.Reader
	bw        *bufio.Writer
	w         response

	phase        atomic.Int32
	since        atomic.Int64 // when phase began, unix ns
	writeSince   atomic.Int64 // a write to nc is under way since; 0: none
	bodyDeadline atomic.Int64 // the handler's read deadline for the body, unix ns; 0: none
	bodyDone     atomic.Bool  // the request body was read to its end (or there is none)
	tripped      atomic.Bool  // the reaper cut a body read short: close after the answer

	// mu guards the disconnect watch: the reaper starts it, the
	// connection's goroutine stops it after the handler.
	mu       sync.Mutex
	cancel   context.CancelFunc // the request under way
	watching bool
	watched  chan struct{} // closed when the watch's read returned
	peeked   []byte        // a byte the watch read (the next request's)
	gone     bool          // the watch saw the client close or fail

	// raw writes answers sent early (TryWrite); nil when nc has no
	// file descriptor (then no answer is sent early).
	raw   syscall.RawConn
	offer *answer.Offer
	// try is TryWrite's state, used by one writer at a time (the
	// request's), with tryFD bound once: no allocation per answer.
	try struct {
		b   []byte
		n   int
		err error
	}
	tryFD func(fd uintptr) bool

	hdr     []byte   // the request head being read
	req     request  // the request under way
	body    body     // its body's reader
	scratch [20]byte // for numbers written into the head
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, nc: nc}
	c.remote = nc.RemoteAddr().String()
	base := s.BaseContext
	if base == nil {
		base = context.Background()
	}
	base = context.WithValue(base, http.LocalAddrContextKey, nc.LocalAddr())
	if sc, ok := nc.(syscall.Conn); ok && !s.NoEarlyAnswers {
		if raw, err := sc.SyscallConn(); err == nil {
			c.raw, c.offer = raw, answer.NewOffer(c)
			c.tryFD = c.tryWriteFD
			base = answer.NewContext(base, c.offer)
		}
	}
	c.ctx, c.ctxCancel = context.WithCancel(base)
	c.br = bufio.NewReaderSize(c, 4096)
	c.bw = bufio.NewWriterSize(writer{c}, 4096)
	c.w.c = c
	c.since.Store(s.now())
	return c
}

// Read is the buffered reader's source: a byte the watch read first, then
// the connection.
func (c *conn) Read(p []byte) (int, error) {
	if len(c.peeked) > 0 && len(p) > 0 {
		n := copy(p, c.peeked)
		c.peeked = c.peeked[n:]
		return n, nil
	}
	return c.nc.Read(p)
}

// writer marks writes for the reaper's write timeout.
type writer struct{ c *conn }

func (w writer) Write(p []byte) (int, error) {
	w.c.writeSince.Store(w.c.s.now())
	n, err := w.c.nc.Write(p)
	w.c.writeSince.Store(0)
	return n, err
}

// check is the reaper's look at c at now (unix ns), under s.mu.
func (c *conn) check(now int64) {
	s := c.s
	if ws := c.writeSince.Load(); ws != 0 && s.WriteTimeout > 0 && now-ws > int64(s.WriteTimeout) {
		c.nc.Close()
		return
	}
	since := c.since.Load()
	switch c.phase.Load() {
	case phaseIdle:
		if s.IdleTimeout > 0 && now-since > int64(s.IdleTimeout) {
			c.nc.Close()
		}
	case phaseNew, phaseHeader:
		if s.ReadHeaderTimeout > 0 && now-since > int64(s.ReadHeaderTimeout) {
			c.nc.Close()
		}
	case phaseActive:
		if d := c.bodyDeadline.Load(); d != 0 && now > d && !c.bodyDone.Load() {
			// The body is late: the handler's read returns a timeout, and
			// it may still answer. Under mu, so that it is not done to the
			// next request (stopWatch ends the phase under mu).
			c.mu.Lock()
			if c.phase.Load() == phaseActive {
				c.tripped.Store(true)
				_ = c.nc.SetReadDeadline(aLongTimeAgo)
			}
			c.mu.Unlock()
			return
		}
		// since is the reaper's clock when the phase began, up to
		// reapEvery before it: a request that began after the last tick
		// and runs at this one may be a few microseconds old. Two periods
		// mean it ran across a whole one: at least reapEvery. (With one,
		// every request that happened to be running at a tick, 0.2 % of
		// the HTTP benchmark's pairs, paid for a watch: a goroutine,
		// two deadline changes and a wait for that goroutine at the end.)
		if now-since >= int64(2*reapEvery) && c.bodyDone.Load() {
			c.startWatch()
		}
	}
}

var aLongTimeAgo = time.Unix(1, 0)

// startWatch reads from the connection while a long request's handler
// runs, so that the request's context ends when the client goes away (a
// long-poll stops waiting for nobody). Only after the body was read to its
// end: the reader is free then.
func (c *conn) startWatch() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watching || c.cancel == nil || c.br.Buffered() > 0 {
		return
	}
	c.watching = true
	c.watched = make(chan struct{})
	go func() {
		defer close(c.watched)
		var b [1]byte
		n, err := c.nc.Read(b[:])
		c.mu.Lock()
		defer c.mu.Unlock()
		if n > 0 {
			c.peeked = append(c.peeked[:0], b[0])
		}
		// A timeout is stopWatch's deadline: the client is still there.
		if err != nil && !isTimeout(err) {
			c.gone = true
			if c.cancel != nil {
				c.cancel()
			}
		}
	}()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// stopWatch ends the handler's phase and the watch, if one runs; it
// reports whether the client went away.
func (c *conn) stopWatch() (gone bool) {
	c.mu.Lock()
	// No body deadline, no watch from here: the answer is being written.
	c.setPhase(phaseAnswer)
	c.cancel = nil
	watching := c.watching
	c.watching = false
	c.mu.Unlock()
	if !watching {
		return false
	}
	_ = c.nc.SetReadDeadline(aLongTimeAgo)
	<-c.watched
	_ = c.nc.SetReadDeadline(time.Time{})
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gone
}

func (c *conn) setPhase(p int32) {
	c.since.Store(c.s.now())
	c.phase.Store(p)
}

func (c *conn) close() {
	c.ctxCancel()
	c.nc.Close()
	c.s.remove(c)
}

func (c *conn) serve() {
	defer c.close()
	for {
		// A new connection's first request gets ReadHeaderTimeout from
		// the accept (newConn set since); later ones IdleTimeout first.
		if _, err := c.br.Peek(1); err != nil {
			return
		}
		c.setPhase(phaseHeader)
		req, perr := c.readRequest()
		if perr != nil {
			if perr.status != 0 {
				c.writeError(perr)
			}
			return
		}
		if !c.serveRequest(req) {
			return
		}
		if c.s.inShutdown.Load() || c.s.noKeepAlive.Load() {
			return
		}
		c.setPhase(phaseIdle)
	}
}

// serveRequest runs the handler for req and writes its answer; false:
// close the connection.
func (c *conn) serveRequest(req *request) (keep bool) {
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	r := req.httpRequest(ctx, c)
	c.bodyDeadline.Store(0)
	c.tripped.Store(false)
	c.bodyDone.Store(req.body == nil)
	c.mu.Lock()
	c.cancel = cancel
	c.mu.Unlock()
	w := &c.w
	w.reset(r, req)
	if c.offer != nil {
		// An answer sent early comes before any later byte of the
		// connection's: the client waits for it before its next request,
		// and the server writes nothing until the handler returned.
		c.offer.Reset(req.minor >= 1 && !req.close)
	}
	c.setPhase(phaseActive)
	panicked := c.run(w, r)
	early, rest, earlyErr := false, []byte(nil), error(nil)
	if c.offer != nil {
		early, rest, earlyErr = c.offer.Settle()
	}
	gone := c.stopWatch()
	if panicked || gone {
		return false
	}
	keep = !req.close && !c.tripped.Load()
	if keep && req.body != nil && !c.bodyDone.Load() {
		keep = req.body.discardRest()
	}
	if c.s.inShutdown.Load() || c.s.noKeepAlive.Load() {
		keep = false
	}
	w.closeAfter = !keep
	if early {
		return c.finishEarly(w, rest, earlyErr) && keep
	}
	if err := w.finish(); err != nil {
		return false
	}
	return !w.closeAfter
}

// finishEarly completes an answer sent early (package answer): writes
// what the socket did not take then, and drops what the handler wrote,
// which is the same answer. false: close the connection.
func (c *conn) finishEarly(w *response, rest []byte, err error) bool {
	if err != nil {
		return false
	}
	if w.status != http.StatusOK || w.headSent {
		// The write that sent it succeeded, so the handler answers
		// 200: anything else is a bug, and the client already has an
		// answer to this request.
		c.s.logger().Error("a handler answered a request whose answer was sent early; closing the connection",
			"remote", c.remote, "method", w.r.Method, "path", w.r.URL.Path, "status", w.status)
		return false
	}
	if len(rest) > 0 {
		c.bw.Write(rest)
		if c.bw.Flush() != nil {
			return false
		}
	}
	c.s.earlyAnswers.Add(1)
	return true
}

// Frame writes an answer as finish would (answer.Conn): the status line,
// Content-Type, Content-Length and Date, and body.
func (c *conn) Frame(dst []byte, status int, contentType string, body []byte) []byte {
	dst = append(dst, "HTTP/1.1 "...)
	dst = append(dst, statusLine(status)...)
	dst = append(dst, "Content-Type: "...)
	dst = append(dst, contentType...)
	dst = append(dst, "\r\nContent-Length: "...)
	dst = strconv.AppendInt(dst, int64(len(body)), 10)
	dst = append(dst, "\r\n"...)
	dst = append(dst, c.s.dateLine()...)
	dst = append(dst, "\r\n"...)
	return append(dst, body...)
}

// TryWrite writes what the socket takes of b now (answer.Conn), from the
// goroutine that made the request's write durable.
func (c *conn) TryWrite(b []byte) (n int, err error) {
	t := &c.try
	t.b, t.n, t.err = b, 0, nil
	if rerr := c.raw.Write(c.tryFD); t.err == nil {
		t.err = rerr
	}
	n, err = t.n, t.err
	t.b, t.err = nil, nil
	return n, err
}

// tryWriteFD is TryWrite's write to the descriptor: what the socket takes.
func (c *conn) tryWriteFD(fd uintptr) bool {
	t := &c.try
	for t.n < len(t.b) {
		m, e := syscall.Write(int(fd), t.b[t.n:])
		if e == syscall.EINTR {
			continue
		}
		if e != nil {
			if e != syscall.EAGAIN {
				t.err = e
			}
			break
		}
		t.n += m
	}
	return true // never wait for the socket
}

// run calls the handler, recovering a panic as net/http does: logged
// (unless http.ErrAbortHandler), and the connection closed.
func (c *conn) run(w *response, r *http.Request) (panicked bool) {
	defer func() {
		if p := recover(); p != nil {
			panicked = true
			if p != http.ErrAbortHandler {
				c.s.logger().Error("panic serving a request", "remote", c.remote, "method", r.Method, "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
			}
		}
	}()
	c.s.Handler.ServeHTTP(w, r)
	return false
}

// writeError answers a request that could not be parsed and closes.
func (c *conn) writeError(e *parseError) {
	ct, body := "text/plain; charset=utf-8", []byte(e.text)
	if c.s.ErrorBody != nil {
		ct, body = c.s.ErrorBody(e.status, e.text)
	}
	w := c.bw
	w.WriteString("HTTP/1.1 ")
	w.WriteString(statusLine(e.status))
	w.WriteString("Content-Type: ")
	w.WriteString(ct)
	w.WriteString("\r\nContent-Length: ")
	w.Write(strconv.AppendInt(c.scratch[:0], int64(len(body)), 10))
	w.WriteString("\r\nConnection: close\r\n")
	w.Write(c.s.dateLine())
	w.WriteString("\r\n")
	w.Write(body)
	if w.Flush() == nil {
		// Half-close so that the client reads the answer, not a reset of
		// the bytes it sent after the bad head.
		if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
			_ = c.nc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			_, _ = io.Copy(io.Discard, io.LimitReader(c.nc, 256<<10))
		}
	}
}
