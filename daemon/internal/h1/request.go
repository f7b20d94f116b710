package h1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"strings"
)

// request is a parsed request head.
type request struct {
	method, target, proto string
	major, minor          int
	url                   *url.URL
	header                http.Header
	host                  string
	contentLength         int64 // -1: chunked
	close                 bool
	body                  *body // nil: none

	// reuse is what parse and httpRequest fill again for the next request
	// of the connection instead of allocating it: nothing keeps a request
	// past its handler.
	reuse struct {
		header http.Header
		values []string
		url    url.URL
		http   http.Request
	}
}

// reset empties q for the next request, keeping what it reuses.
func (q *request) reset() {
	reuse := q.reuse
	clear(reuse.header)
	clear(reuse.values)
	*q = request{}
	q.reuse = reuse
}

// parseError is a request that cannot be served: status 0 closes the
// connection without an answer (the client went away or was too slow).
type parseError struct {
	status int
	text   string
}

func (e *parseError) Error() string { return e.text }

var errClosed = &parseError{}

func bad(status int, format string, args ...any) *parseError {
	return &parseError{status: status, text: fmt.Sprintf(format, args...)}
}

// readRequest reads one request head into c.req (reused: nothing keeps it
// past its handler). Its strings share one allocation.
func (c *conn) readRequest() (*request, *parseError) {
	limit := c.s.MaxHeaderBytes
	if limit <= 0 {
		limit = DefaultMaxHeaderBytes
	}
	c.hdr = c.hdr[:0]
	lines := 0
	for {
		line, err := c.br.ReadSlice('\n')
		for errors.Is(err, bufio.ErrBufferFull) && len(c.hdr)+len(line) <= limit {
			c.hdr = append(c.hdr, line...)
			line, err = c.br.ReadSlice('\n')
		}
		if len(c.hdr)+len(line) > limit {
			return nil, bad(http.StatusRequestHeaderFieldsTooLarge, "request header fields too large")
		}
		if err != nil {
			return nil, errClosed
		}
		c.hdr = append(c.hdr, line...)
		lines++
		if n := len(line); n == 1 || (n == 2 && line[0] == '\r') {
			if lines == 1 {
				return nil, bad(http.StatusBadRequest, "malformed HTTP request: empty request line")
			}
			break
		}
	}
	c.req.reset()
	if perr := c.req.parse(string(c.hdr), lines-2); perr != nil {
		return nil, perr
	}
	return &c.req, nil
}

// parse parses a request head into q: the request line, n header lines
// and the empty line, each ended by "\n" or "\r\n".
func (q *request) parse(head string, n int) *parseError {
	line, rest := cutLine(head)
	var ok bool
	q.method, line, ok = strings.Cut(line, " ")
	if !ok {
		return bad(http.StatusBadRequest, "malformed HTTP request %q", line)
	}
	q.target, q.proto, ok = strings.Cut(line, " ")
	if !ok || !validMethod(q.method) || q.target == "" || strings.ContainsAny(q.target, " \t\x00") {
		return bad(http.StatusBadRequest, "malformed HTTP request %q", head[:min(len(head), 80)])
	}
	switch q.proto {
	case "HTTP/1.1":
		q.major, q.minor = 1, 1
	case "HTTP/1.0":
		q.major, q.minor = 1, 0
	default:
		major, minor, ok := http.ParseHTTPVersion(q.proto)
		if !ok {
			return bad(http.StatusBadRequest, "malformed HTTP version %q", q.proto)
		}
		if major != 1 {
			return bad(http.StatusHTTPVersionNotSupported, "unsupported HTTP version %q", q.proto)
		}
		q.major, q.minor = major, minor
	}
	if plainURL(&q.reuse.url, q.target) {
		q.url = &q.reuse.url
	} else {
		u, err := url.ParseRequestURI(q.target)
		if err != nil {
			return bad(http.StatusBadRequest, "malformed request URI: %v", err)
		}
		q.url = u
	}

	// One []string backing all values: most keys appear once.
	if cap(q.reuse.values) < n {
		q.reuse.values = make([]string, n)
	}
	vs := q.reuse.values[:n]
	h := q.reuse.header
	if h == nil {
		h = make(http.Header, n)
		q.reuse.header = h
	}
	for i := 0; i < n; i++ {
		line, rest = cutLine(rest)
		k, v, ok := strings.Cut(line, ":")
		if !ok || !validToken(k) {
			return bad(http.StatusBadRequest, "malformed MIME header line: %q", line[:min(len(line), 80)])
		}
		v = strings.Trim(v, " \t")
		if !validValue(v) {
			return bad(http.StatusBadRequest, "invalid header value for %q", k)
		}
		k = textproto.CanonicalMIMEHeaderKey(k)
		if old, seen := h[k]; seen {
			h[k] = append(old, v)
			continue
		}
		vs[i] = v
		h[k] = vs[i : i+1 : i+1]
	}
	q.header = h
	return q.check()
}

// plainURL sets *u to url.ParseRequestURI's result for the common target:
// a path of characters that need no escaping and an optional non-empty
// query of printable ASCII. false: parse it the long way.
func plainURL(u *url.URL, target string) bool {
	if target == "" || target[0] != '/' {
		return false
	}
	path, query, hasQuery := strings.Cut(target, "?")
	if hasQuery && query == "" {
		return false // url.URL.ForceQuery
	}
	for i := 0; i < len(path); i++ {
		if !isPathByte(path[i]) {
			return false
		}
	}
	for i := 0; i < len(query); i++ {
		if c := query[i]; c < 0x21 || c > 0x7e {
			return false
		}
	}
	*u = url.URL{Path: path, RawQuery: query}
	return true
}

// isPathByte: a byte url.URL keeps unescaped in a path.
func isPathByte(c byte) bool {
	if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
		return true
	}
	return strings.IndexByte("-._~/$&+,;=:@", c) >= 0
}

// cutLine returns s's first line without its "\r\n" or "\n", and the rest.
func cutLine(s string) (line, rest string) {
	line, rest, _ = strings.Cut(s, "\n")
	return strings.TrimSuffix(line, "\r"), rest
}

// check applies the rules about Host, framing and Connection.
func (q *request) check() *parseError {
	h := q.header
	hosts, haveHost := h["Host"]
	if len(hosts) > 1 {
		return bad(http.StatusBadRequest, "too many Host headers")
	}
	if haveHost {
		q.host = hosts[0]
		delete(h, "Host")
	}
	if q.url.Host != "" {
		q.host = q.url.Host // absolute-form: its authority wins (RFC 9112, 3.2.2)
	}
	if !haveHost && q.minor >= 1 && q.method != http.MethodConnect {
		return bad(http.StatusBadRequest, "missing required Host header")
	}
	if !validHost(q.host) {
		return bad(http.StatusBadRequest, "malformed Host header")
	}

	te, haveTE := h["Transfer-Encoding"]
	cls, haveCL := h["Content-Length"]
	switch {
	case haveTE && q.minor == 0:
		return bad(http.StatusBadRequest, "Transfer-Encoding in an HTTP/1.0 request")
	case haveTE && haveCL:
		return bad(http.StatusBadRequest, "both Transfer-Encoding and Content-Length")
	case haveTE:
		if len(te) != 1 || !strings.EqualFold(te[0], "chunked") {
			return bad(http.StatusNotImplemented, "unsupported transfer encoding: %q", strings.Join(te, ","))
		}
		q.contentLength = -1
		delete(h, "Transfer-Encoding") // as net/http: Request.TransferEncoding says it
	case haveCL:
		for _, v := range cls[1:] {
			if v != cls[0] {
				return bad(http.StatusBadRequest, "invalid Content-Length: several values")
			}
		}
		n, ok := parseLength(cls[0])
		if !ok {
			return bad(http.StatusBadRequest, "invalid Content-Length %q", cls[0])
		}
		q.contentLength = n
		h["Content-Length"] = cls[:1] // as net/http: repeats of one value are one
	}

	conn := h["Connection"]
	q.close = q.minor == 0 && !hasToken(conn, "keep-alive") || hasToken(conn, "close")
	if ex, ok := h["Expect"]; ok && q.minor >= 1 {
		if len(ex) != 1 || !strings.EqualFold(ex[0], "100-continue") {
			return bad(http.StatusExpectationFailed, "unsupported Expect header")
		}
	}
	return nil
}

func parseLength(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int64(s[i]-'0')
	}
	return n, true
}

// hasToken reports whether the comma-separated lists vs name token.
func hasToken(vs []string, token string) bool {
	for _, v := range vs {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.Trim(f, " \t"), token) {
				return true
			}
		}
	}
	return false
}

// httpRequest is q as the handler sees it; c's reader carries the body.
func (q *request) httpRequest(ctx context.Context, c *conn) *http.Request {
	r := http.Request{
		Method:     q.method,
		URL:        q.url,
		Proto:      q.proto,
		ProtoMajor: q.major,
		ProtoMinor: q.minor,
		Header:     q.header,
		Body:       http.NoBody,
		Host:       q.host,
		RemoteAddr: c.remote,
		RequestURI: q.target,
		Close:      q.close,
	}
	if q.contentLength != 0 {
		c.body = body{c: c, remaining: q.contentLength, expect: q.minor >= 1 && q.header["Expect"] != nil}
		q.body = &c.body
		if q.contentLength < 0 {
			q.body.chunked = httputil.NewChunkedReader(c.br)
			r.TransferEncoding = []string{"chunked"}
		}
		r.Body = q.body
	}
	r.ContentLength = q.contentLength
	// WithContext is inlined: its copy stays on the stack.
	q.reuse.http = *r.WithContext(ctx)
	return &q.reuse.http
}

// body reads a request's body from the connection's reader.
type body struct {
	c         *conn
	remaining int64     // Content-Length bytes not read yet
	chunked   io.Reader // non-nil: chunked framing
	expect    bool      // "100 Continue" is due before the first read
	done      bool
	err       error
}

func (b *body) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	if b.err != nil {
		return 0, b.err
	}
	if b.expect {
		b.expect = false
		bw := b.c.bw
		bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
		if err := bw.Flush(); err != nil {
			b.err = err
			return 0, err
		}
	}
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var err error
	if b.chunked != nil {
		n, err = b.chunked.Read(p)
		if errors.Is(err, io.EOF) {
			if terr := b.readTrailer(); terr != nil {
				err = terr
			} else {
				b.finish()
			}
		}
	} else {
		if int64(len(p)) > b.remaining {
			p = p[:b.remaining]
		}
		n, err = b.c.br.Read(p)
		b.remaining -= int64(n)
		if b.remaining == 0 {
			b.finish()
			err = io.EOF
		} else if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		b.err = err
	}
	return n, err
}

func (b *body) finish() {
	b.done = true
	b.c.bodyDone.Store(true)
}

// readTrailer reads the chunked body's trailer (ignored) up to its empty
// line.
func (b *body) readTrailer() error {
	total := 0
	for {
		line, err := b.c.br.ReadSlice('\n')
		if err != nil {
			return fmt.Errorf("reading the chunked body's trailer: %w", err)
		}
		total += len(line)
		if total > 64<<10 {
			return errors.New("the chunked body's trailer is over 64 KiB")
		}
		if len(line) == 1 || (len(line) == 2 && line[0] == '\r') {
			return nil
		}
	}
}

// Close leaves the rest to discardRest (net/http's Close does the same:
// the server reads or drops what is left after the handler).
func (b *body) Close() error { return nil }

// maxDiscard is how much of an unread body is read past to keep the
// connection; more closes it.
const maxDiscard = 256 << 10

// discardRest reads what the handler left of the body; false: the
// connection cannot carry another request.
func (b *body) discardRest() bool {
	if b.done {
		return true
	}
	if b.err != nil || b.expect {
		return false // the client waits for "100 Continue" it was not sent
	}
	n, err := io.Copy(io.Discard, io.LimitReader(b, maxDiscard+1))
	return err == nil && n <= maxDiscard && b.done
}

// validMethod: a token.
func validMethod(m string) bool { return m != "" && validToken(m) }

func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTokenByte(s[i]) {
			return false
		}
	}
	return true
}

func isTokenByte(c byte) bool {
	if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// validValue: no control bytes but horizontal tab.
func validValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// validHost: what may appear in a Host header (RFC 3986 reg-name, IP
// literals, port).
func validHost(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			continue
		}
		if strings.IndexByte("!$%&'()*+,-.:;=[]_~", c) < 0 {
			return false
		}
	}
	return true
}
