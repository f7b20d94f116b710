package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/rpdhq/rpd/internal/ascii"

	"github.com/rpdhq/rpd/api"
)

// wire is the client's HTTP/1.1 transport to one daemon (plain or TLS): the
// calling goroutine writes the request and reads the answer itself, over a
// pool of kept-alive connections. net/http's Transport hands each request
// to a writer goroutine and each answer back from a reader goroutine per
// connection; for the daemon's small request/answer pairs, doing without
// them took the client's CPU per acquire+release pair from 66 to 38 µs
// (BenchmarkAcquireReleaseHTTP's profile, package daemon) and the
// allocations from 247 to 161. It is used only where it is enough: http:// and
// https:// addresses reached without a proxy, with the client's own
// transport (not WithHTTPClient); over TLS it speaks HTTP/1.1 only. It speaks the subset the daemon needs: requests with a
// Content-Length body or none, answers with a Content-Length, chunked or
// close-delimited body.
type wire struct {
	addr   string // host:port to dial
	prefix string // the base URL's path, "" or "/..."
	head   []byte // Host, Accept and Authorization header lines
	dialer net.Dialer
	// tls, for an https:// address, is the TLS configuration with its
	// ServerName set; nil for http://.
	tls *tls.Config

	mu   sync.Mutex
	idle []*wireConn // most recently used last
}

// maxIdleWireConns bounds the connections kept per daemon address; a
// client with more concurrent calls than this dials for the rest.
const maxIdleWireConns = 256

type wireConn struct {
	nc net.Conn
	br *bufio.Reader
	bw *bufio.Writer
	// rc is nc's raw connection (plain TCP; nil over TLS), through which
	// exchange writes a request and then waits for its answer without a
	// read that finds nothing (see sendThenAwait).
	rc syscall.RawConn
	// await is sendThenAwait's step for rc.Read, made once per
	// connection (a closure per request would be allocated per request);
	// sent and werr are its state.
	await func(uintptr) bool
	sent  bool
	werr  error
}

// newWireConn wraps a dialed connection.
func newWireConn(nc net.Conn) *wireConn {
	cn := &wireConn{nc: nc, br: bufio.NewReaderSize(nc, 4096), bw: bufio.NewWriterSize(nc, 4096)}
	if sc, ok := nc.(syscall.Conn); ok {
		cn.rc, _ = sc.SyscallConn() // nil on error: exchange then writes and reads as usual
		cn.await = func(uintptr) bool {
			if cn.sent {
				return true // readable: the caller reads through cn.br
			}
			cn.sent = true
			cn.werr = cn.bw.Flush()
			return cn.werr != nil
		}
	}
	return cn
}

// sendThenAwait writes the buffered request and waits until the answer
// can be read, without reading. A plain write and read would find no
// answer yet (the daemon takes hundreds of microseconds), so each request
// would cost a read syscall that returns EAGAIN before the goroutine waits
// in the network poller. Go's poller is edge-triggered and forgets
// readiness when a read starts (RawConn.Read resets it before calling f),
// so the write is done inside f: anything the daemon sends after the
// write, the answer or a reset of a connection it had closed, arrives
// after the reset and wakes the wait. cn.br must be empty; the deadline
// (a cancelled ctx) ends the wait as it ends a read.
func (cn *wireConn) sendThenAwait() (werr, rerr error) {
	cn.sent, cn.werr = false, nil
	rerr = cn.rc.Read(cn.await)
	werr, cn.werr = cn.werr, nil
	if !cn.sent && rerr != nil {
		werr = rerr // the read could not start (a deadline passed, the connection closed): nothing was sent
	}
	return werr, rerr
}

// wires returns the wire for each of bases (see wireFor).
func wires(bases []string, proxy func(*http.Request) (*url.URL, error), token string, tlsConfig *tls.Config) []*wire {
	ws := make([]*wire, len(bases))
	for i, base := range bases {
		ws[i] = wireFor(base, proxy, token, tlsConfig)
	}
	return ws
}

// wireFor returns the wire to base, or nil when proxy (the transport's
// Proxy) sends it through a proxy. https:// addresses are reached with
// tlsConfig (nil: the system's roots).
func wireFor(base string, proxy func(*http.Request) (*url.URL, error), token string, tlsConfig *tls.Config) *wire {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil
	}
	if proxy != nil {
		if p, err := proxy(&http.Request{URL: u}); err != nil || p != nil {
			return nil
		}
	}
	w := newWire(u.Host, u.EscapedPath(), token, u.Scheme == "https")
	if w.tls != nil {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if tlsConfig != nil {
			cfg = tlsConfig.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = u.Hostname()
		}
		cfg.NextProtos = []string{"http/1.1"}
		w.tls = cfg
	}
	return w
}

// newWire makes the wire to host; with secure, w.tls is a placeholder the
// caller replaces with the TLS configuration.
func newWire(host, prefix, token string, secure bool) *wire {
	head := "Host: " + host + "\r\nAccept: application/json\r\n"
	if token != "" {
		head += "Authorization: Bearer " + token + "\r\n"
	}
	addr, port := host, "80"
	w := &wire{prefix: prefix, head: []byte(head), dialer: net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}}
	if secure {
		port, w.tls = "443", &tls.Config{}
	}
	if _, _, err := net.SplitHostPort(host); err != nil {
		addr = net.JoinHostPort(host, port)
	}
	w.addr = addr
	return w
}

// dial opens a connection to the daemon, with its TLS handshake done for
// an https:// address.
func (w *wire) dial(ctx context.Context) (net.Conn, error) {
	if w.tls == nil {
		return w.dialer.DialContext(ctx, "tcp", w.addr)
	}
	d := tls.Dialer{NetDialer: &w.dialer, Config: w.tls}
	return d.DialContext(ctx, "tcp", w.addr)
}

// errNoAnswer marks a round trip that failed before any byte of an
// answer was read: the daemon may or may not have acted on the request.
var errNoAnswer = errors.New("no answer")

// roundTrip sends one request and reads the answer's body into buf. A
// request on a kept-alive connection that the daemon had closed (its idle
// timeout) is sent again on a new connection, once; retried says so.
func (w *wire) roundTrip(ctx context.Context, method, path string, payload []byte, buf *bytes.Buffer) (status int, leader string, retried bool, err error) {
	for attempt := 0; ; attempt++ {
		cn, reused := w.get()
		if cn == nil {
			nc, err := w.dial(ctx)
			if err != nil {
				return 0, "", retried, fmt.Errorf("%w: %w", errNoAnswer, err)
			}
			cn = newWireConn(nc)
		}
		status, leader, keep, answered, err := w.exchange(ctx, cn, method, path, payload, buf)
		if err == nil && keep {
			w.put(cn)
		} else {
			cn.nc.Close()
		}
		if err != nil && !answered && reused && attempt == 0 && ctx.Err() == nil {
			retried = true
			continue
		}
		if err != nil && !answered {
			err = fmt.Errorf("%w: %w", errNoAnswer, err)
		}
		return status, leader, retried, err
	}
}

func (w *wire) get() (*wireConn, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(w.idle)
	if n == 0 {
		return nil, false
	}
	cn := w.idle[n-1]
	w.idle[n-1] = nil
	w.idle = w.idle[:n-1]
	return cn, true
}

func (w *wire) put(cn *wireConn) {
	w.mu.Lock()
	if len(w.idle) < maxIdleWireConns {
		w.idle = append(w.idle, cn)
		cn = nil
	}
	w.mu.Unlock()
	if cn != nil {
		cn.nc.Close()
	}
}

// closeIdle closes the kept-alive connections.
func (w *wire) closeIdle() {
	w.mu.Lock()
	idle := w.idle
	w.idle = nil
	w.mu.Unlock()
	for _, cn := range idle {
		cn.nc.Close()
	}
}

// aLongTimeAgo is a deadline in the past: it makes blocked I/O return.
var aLongTimeAgo = time.Unix(1, 0)

// exchange writes the request on cn and reads the answer. keep says cn
// may carry another request; answered, that the answer's status line was
// read (the daemon got the request).
func (w *wire) exchange(ctx context.Context, cn *wireConn, method, path string, payload []byte, buf *bytes.Buffer) (status int, leader string, keep, answered bool, err error) {
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() { cn.nc.SetDeadline(aLongTimeAgo) })
		defer func() {
			if !stop() {
				// ctx ended: the deadline poisoned cn, and ctx's error is
				// the one to report.
				keep = false
				if err != nil || !answered {
					err = ctx.Err()
				}
			}
		}()
	}
	// The head is laid out in the writer's free space: appended, path is
	// copied (bufio.Writer.WriteString may hand its argument to the
	// connection, which would move every caller's path to the heap).
	bw := cn.bw
	h := bw.AvailableBuffer()
	h = append(h, method...)
	h = append(h, ' ')
	h = append(h, w.prefix...)
	h = append(h, path...)
	h = append(h, " HTTP/1.1\r\n"...)
	h = append(h, w.head...)
	if payload != nil {
		h = append(h, "Content-Type: application/json\r\nContent-Length: "...)
		h = strconv.AppendInt(h, int64(len(payload)), 10)
		h = append(h, "\r\n"...)
	}
	h = append(h, "\r\n"...)
	bw.Write(h)
	bw.Write(payload)
	if cn.rc != nil && cn.br.Buffered() == 0 {
		werr, rerr := cn.sendThenAwait()
		if werr != nil {
			return 0, "", false, false, fmt.Errorf("write the request: %w", werr)
		}
		if rerr != nil {
			return 0, "", false, false, fmt.Errorf("read the answer: %w", rerr)
		}
	} else if err := bw.Flush(); err != nil {
		return 0, "", false, false, fmt.Errorf("write the request: %w", err)
	}
	for {
		status, err = readStatus(cn.br)
		if err != nil {
			return 0, "", false, false, err
		}
		h, err := readHeader(cn.br)
		if err != nil {
			return status, "", false, true, err
		}
		if status >= 100 && status < 200 {
			continue // 100 Continue and the like: the answer follows
		}
		keep, err = readBody(cn.br, status, h, buf)
		return status, h.leader, keep, true, err
	}
}

// readStatus reads "HTTP/1.x NNN reason".
func readStatus(br *bufio.Reader) (int, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, fmt.Errorf("read the answer: %w", err)
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, fmt.Errorf("read the answer: not an HTTP/1.x status line: %q", bytes.TrimSpace(line))
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil || status < 100 {
		return 0, fmt.Errorf("read the answer: bad status in %q", bytes.TrimSpace(line))
	}
	return status, nil
}

// header is what the client needs of an answer's header.
type header struct {
	length  int64 // -1: none given
	chunked bool
	close   bool
	leader  string // api.LeaderHeader: the leader a standby forwarded to
}

func readHeader(br *bufio.Reader) (header, error) {
	h := header{length: -1}
	for range 256 {
		line, err := br.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				err = errors.New("a header line is longer than 4096 bytes")
			}
			return h, fmt.Errorf("read the answer's header: %w", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			return h, nil
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return h, fmt.Errorf("read the answer's header: malformed line %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case ascii.EqualFold(name, "Content-Length"):
			n, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil || n < 0 {
				return h, fmt.Errorf("read the answer's header: bad Content-Length %q", value)
			}
			h.length = n
		case ascii.EqualFold(name, "Transfer-Encoding"):
			if !ascii.EqualFold(value, "chunked") {
				return h, fmt.Errorf("read the answer's header: unsupported Transfer-Encoding %q", value)
			}
			h.chunked = true
		case ascii.EqualFold(name, "Connection"):
			h.close = h.close || ascii.EqualFold(value, "close")
		case ascii.EqualFold(name, api.LeaderHeader):
			h.leader = string(value)
		}
	}
	return h, errors.New("read the answer's header: more than 256 lines")
}

// readBody reads the answer's body into buf, at most maxAnswerBytes; keep
// says the connection may carry another request.
func readBody(br *bufio.Reader, status int, h header, buf *bytes.Buffer) (keep bool, err error) {
	switch {
	case status == 204 || status == 304:
		return !h.close, nil
	case h.chunked:
		n, err := buf.ReadFrom(io.LimitReader(httputil.NewChunkedReader(br), maxAnswerBytes+1))
		if err != nil {
			return false, fmt.Errorf("read the answer's body: %w", err)
		}
		if n > maxAnswerBytes {
			return false, fmt.Errorf("the answer is longer than %d bytes", maxAnswerBytes)
		}
		// The chunked reader stops at the last chunk; its trailer (none,
		// or header lines) ends with an empty line.
		if _, err := readHeader(br); err != nil {
			return false, err
		}
		return !h.close, nil
	case h.length >= 0:
		if h.length > maxAnswerBytes {
			return false, fmt.Errorf("the answer is %d bytes long; at most %d are read", h.length, maxAnswerBytes)
		}
		buf.Grow(int(h.length))
		b := buf.AvailableBuffer()[:h.length]
		if _, err := io.ReadFull(br, b); err != nil {
			return false, fmt.Errorf("read the answer's body: %w", err)
		}
		buf.Write(b)
		return !h.close, nil
	default: // the body runs to the end of the connection
		n, err := buf.ReadFrom(io.LimitReader(br, maxAnswerBytes+1))
		if err != nil {
			return false, fmt.Errorf("read the answer's body: %w", err)
		}
		if n > maxAnswerBytes {
			return false, fmt.Errorf("the answer is longer than %d bytes", maxAnswerBytes)
		}
		return false, nil
	}
}
