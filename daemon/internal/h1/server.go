package h1

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Server serves an http.Handler over plain HTTP/1.1 and HTTP/1.0
// connections. Its zero timeouts mean none; MaxHeaderBytes zero means
// DefaultMaxHeaderBytes.
type Server struct {
	Handler http.Handler
	// ReadHeaderTimeout bounds the time from a request's first byte (or a
	// new connection's accept) to the end of its header.
	ReadHeaderTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a kept-alive
	// connection.
	IdleTimeout time.Duration
	// WriteTimeout bounds each write of an answer to the connection.
	WriteTimeout time.Duration
	// MaxHeaderBytes bounds the request line and header; over it the
	// request is answered 431.
	MaxHeaderBytes int
	// BaseContext is the parent of every connection's context, itself
	// the parent of its requests' (so canceling it ends every request
	// under way); nil means context.Background().
	BaseContext context.Context
	// ErrorBody returns the Content-Type and body of the answer to a
	// request that cannot be parsed (status 400, 417, 431, 501 or 505;
	// text says what is wrong). nil: text/plain with the text.
	ErrorBody func(status int, text string) (contentType string, body []byte)
	// Logger receives handler panics and accept errors; nil discards.
	Logger *slog.Logger
	// NoEarlyAnswers turns off answers sent early (package answer): by
	// default a request on a connection with a file descriptor (TCP,
	// Unix) offers its answer to the store that makes its write durable.
	NoEarlyAnswers bool

	mu       sync.Mutex
	lns      map[net.Listener]struct{}
	conns    map[*conn]struct{}
	reaping  bool
	stopReap chan struct{}

	earlyAnswers atomic.Uint64
	inShutdown   atomic.Bool
	noKeepAlive  atomic.Bool
	date         atomic.Pointer[dateLine]
	// clock is the reaper's time (unix ns), to reapEvery: what a phase's
	// start needs, without a clock read per request.
	clock atomic.Int64
}

// DefaultMaxHeaderBytes is the header bound when MaxHeaderBytes is zero.
const DefaultMaxHeaderBytes = 1 << 20

// ErrServerClosed is what Serve returns after Shutdown or Close
// (http.ErrServerClosed, so that callers of either server test one error).
var ErrServerClosed = http.ErrServerClosed

// Serve accepts connections on ln and serves each on its own goroutine
// until Shutdown or Close, then returns ErrServerClosed; any other accept
// error is returned as it is (ln is closed either way).
func (s *Server) Serve(ln net.Listener) error {
	if !s.track(ln) {
		ln.Close()
		return ErrServerClosed
	}
	defer s.untrack(ln)
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.inShutdown.Load() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// Out of descriptors and the like: wait, as net/http does.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.logger().Warn("accepting a connection failed; retrying", "err", err, "in", backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		c := newConn(s, nc)
		if !s.add(c) {
			nc.Close()
			return ErrServerClosed
		}
		go c.serve()
	}
}

// SetKeepAlivesEnabled(false) closes each connection after its answer in
// flight (and every later one).
func (s *Server) SetKeepAlivesEnabled(on bool) { s.noKeepAlive.Store(!on) }

// CloseQuiet closes the connections that carry no request: idle kept-alive
// ones and new ones that have not sent a byte of one.
func (s *Server) CloseQuiet() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if p := c.phase.Load(); p == phaseNew || p == phaseIdle {
			c.nc.Close()
		}
	}
}

// Shutdown stops accepting connections, closes the quiet ones, and waits
// until every request under way was answered (each connection closes after
// its answer) or ctx ends, which it returns.
func (s *Server) Shutdown(ctx context.Context) error {
	s.inShutdown.Store(true)
	s.closeListeners()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		s.CloseQuiet()
		if s.open() == 0 {
			s.stopReaper()
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Close closes the listeners and every connection at once.
func (s *Server) Close() error {
	s.inShutdown.Store(true)
	s.closeListeners()
	s.mu.Lock()
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.stopReaper()
	return nil
}

func (s *Server) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

func (s *Server) track(ln net.Listener) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inShutdown.Load() {
		return false
	}
	if s.lns == nil {
		s.lns = map[net.Listener]struct{}{}
	}
	s.lns[ln] = struct{}{}
	if !s.reaping {
		s.tick(time.Now())
		s.reaping = true
		s.stopReap = make(chan struct{})
		go s.reap(s.stopReap)
	}
	return true
}

func (s *Server) untrack(ln net.Listener) {
	s.mu.Lock()
	delete(s.lns, ln)
	s.mu.Unlock()
}

func (s *Server) closeListeners() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ln := range s.lns {
		ln.Close()
		delete(s.lns, ln)
	}
}

func (s *Server) add(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inShutdown.Load() {
		return false
	}
	if s.conns == nil {
		s.conns = map[*conn]struct{}{}
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) remove(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

func (s *Server) open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *Server) stopReaper() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reaping {
		close(s.stopReap)
		s.reaping = false
	}
}

// reapEvery is the reaper's period: the precision of every timeout, and
// how long a request runs before its client's going away is watched for.
const reapEvery = 50 * time.Millisecond

// reap enforces the timeouts and starts the disconnect watch of long
// requests. Doing it from one goroutine that looks at each connection
// every reapEvery, instead of arming a deadline per read and write, is
// what keeps a request's cost down (net/http sets and clears about five
// deadlines per request and starts a goroutine for each).
func (s *Server) reap(stop <-chan struct{}) {
	t := time.NewTicker(reapEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			s.tick(now)
			s.mu.Lock()
			for c := range s.conns {
				c.check(now.UnixNano())
			}
			s.mu.Unlock()
		}
	}
}

func (s *Server) tick(now time.Time) {
	s.clock.Store(now.UnixNano())
	s.refreshDate(now)
}

// now is the reaper's clock.
func (s *Server) now() int64 { return s.clock.Load() }

// EarlyAnswers returns how many answers were sent early (package answer)
// and completed.
func (s *Server) EarlyAnswers() uint64 { return s.earlyAnswers.Load() }

// dateLine is the Date header line of one second, "Date: ...\r\n".
type dateLine struct {
	unix int64
	line []byte
}

func (s *Server) refreshDate(now time.Time) {
	if d := s.date.Load(); d != nil && d.unix == now.Unix() {
		return
	}
	line := append([]byte("Date: "), now.UTC().AppendFormat(nil, http.TimeFormat)...)
	s.date.Store(&dateLine{unix: now.Unix(), line: append(line, "\r\n"...)})
}

// dateLine is the current Date header line (the reaper keeps it).
func (s *Server) dateLine() []byte {
	if d := s.date.Load(); d != nil {
		return d.line
	}
	s.refreshDate(time.Now())
	return s.date.Load().line
}
