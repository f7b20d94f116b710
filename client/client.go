package client

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpdhq/rpd/api"
)

// Client talks to the daemons of one stack: any replica answers every
// request (standbys forward to the leader). It is safe for concurrent use.
//
// A call that fails to connect, or is answered 503 (the leader is
// changing: not_leader, or a daemon shutting down), is retried with
// exponential backoff at the next address, for up to the retry budget
// (WithRetry, default DefaultRetry). Acquire, AcquirePermit and
// RequestClaim send a request_id (generated when the request has none), so
// that a retry after a lost answer returns the grant already made instead
// of a second one.
type Client struct {
	bases []string // "http://host:port", no trailing slash
	first atomic.Uint32
	retry time.Duration
	token string
	// leader is the route to the leader a standby named (api.LeaderHeader),
	// tried first for arbitrated requests; noFollow turns that off
	// (WithFollowLeader(false)). proxy is the transport's, for its wire.
	leader   atomic.Pointer[route]
	shunned  atomic.Pointer[shunned]
	noFollow bool
	proxy    func(*http.Request) (*url.URL, error)
	// tlsConfig (WithTLSConfig, WithCAFile) and an option's error.
	tlsConfig *tls.Config
	optErr    error
	hc        *http.Client
	// rt is the transport New built, called directly: the daemon never
	// redirects, so http.Client's redirect bookkeeping (a copy of every
	// request's headers) is skipped. nil with WithHTTPClient.
	rt http.RoundTripper
	// wires[i] carries the requests to bases[i] when it is a plain-http
	// address reached without a proxy (wire.go); nil elsewhere, and with
	// WithHTTPClient.
	wires []*wire
	// The headers of requests without and with a JSON body, built once
	// and shared (a transport only reads them).
	hdr, jsonHdr http.Header
	bufs         sync.Pool // *bytes.Buffer: answers' bodies
	// payloads are requests' JSON bodies (*[]byte), reused only after a
	// call whose every attempt went over a wire: net/http's transport may
	// still read a body after RoundTrip returned.
	payloads sync.Pool
}

// DefaultRetry is how long a call keeps retrying by default: long enough
// to ride out a leader's failover (its lease, 5 s by default, plus a
// takeover).
const DefaultRetry = 30 * time.Second

// Option configures a Client.
type Option func(*Client)

// WithToken sends token as the bearer token of every request.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithTLSConfig sets the TLS configuration of https:// addresses: the CAs
// the daemon's certificate is verified with (RootCAs), and a client
// certificate for mutual TLS. Without it the system's roots verify the
// daemon. It is ignored with WithHTTPClient.
func WithTLSConfig(cfg *tls.Config) Option { return func(c *Client) { c.tlsConfig = cfg } }

// WithCAFile verifies the daemon's certificate against the PEM CA bundle
// in path instead of the system's roots: the usual option of a client of a
// daemon whose certificate a private CA signed. New fails if the file
// cannot be read.
func WithCAFile(path string) Option {
	return func(c *Client) {
		b, err := os.ReadFile(path)
		if err != nil {
			c.optErr = fmt.Errorf("client: CA file: %w", err)
			return
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			c.optErr = fmt.Errorf("client: CA file %s holds no PEM certificate", path)
			return
		}
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.tlsConfig != nil {
			cfg = c.tlsConfig.Clone()
		}
		cfg.RootCAs = pool
		c.tlsConfig = cfg
	}
}

// WithFollowLeader(false) keeps every request on the configured
// addresses. By default, when a standby answers a pools, leases, budgets
// or ceilings request it forwarded to the leader, the client sends the
// next such requests to that leader directly (saving the standby's hop),
// and comes back to the configured addresses as soon as the leader does
// not answer or answers 503. Turn it off when the leaders' advertise
// addresses are not reachable from the client (a load balancer in front
// of replicas on a private network).
func WithFollowLeader(follow bool) Option { return func(c *Client) { c.noFollow = !follow } }

// WithRetry sets how long one call keeps retrying connection failures
// and 503 answers, moving to the next address each time; 0 turns retries
// off (every call makes one attempt, at the address that answered last).
func WithRetry(d time.Duration) Option { return func(c *Client) { c.retry = max(d, 0) } }

// WithHTTPClient replaces the HTTP client. It must not set a Timeout
// shorter than the longest wait_seconds the caller uses.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// New returns a client of the daemons at addrs: one address, or several
// separated by commas (the replicas of a stack), each "HOST:PORT" or an
// "http://" / "https://" URL.
func New(addrs string, opts ...Option) (*Client, error) {
	c := &Client{retry: DefaultRetry}
	for _, addr := range strings.Split(addrs, ",") {
		addr = strings.TrimSpace(addr)
		if addr == "" {
			continue
		}
		if !strings.Contains(addr, "://") {
			addr = "http://" + addr
		}
		u, err := url.Parse(addr)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("client: daemon address %q: want HOST:PORT or an http(s) URL", addr)
		}
		c.bases = append(c.bases, strings.TrimSuffix(u.String(), "/"))
	}
	if len(c.bases) == 0 {
		return nil, errors.New("client: empty daemon address; pass HOST:PORT such as 127.0.0.1:7070, or several separated by commas")
	}
	for _, o := range opts {
		o(c)
	}
	if c.optErr != nil {
		return nil, c.optErr
	}
	if c.hc == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		if c.tlsConfig != nil {
			// For proxied https:// addresses; the others go over the
			// wire, HTTP/1.1 on a pool of TLS connections (with many
			// concurrent calls it beats HTTP/2's one connection:
			// BenchmarkAcquireReleaseHTTPTLS in ./daemon).
			t.TLSClientConfig = c.tlsConfig.Clone()
		}
		t.MaxIdleConns = 256
		t.MaxIdleConnsPerHost = 256
		t.DisableCompression = true // the daemon's answers are small JSON
		t.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		c.hc = &http.Client{Transport: t}
		c.rt = t
		c.wires = wires(c.bases, t.Proxy, c.token, c.tlsConfig)
		c.proxy = t.Proxy
	}
	if c.wires == nil {
		c.wires = make([]*wire, len(c.bases))
	}
	c.hdr = http.Header{"Accept": {"application/json"}}
	if c.token != "" {
		c.hdr.Set("Authorization", "Bearer "+c.token)
	}
	c.jsonHdr = c.hdr.Clone()
	c.jsonHdr.Set("Content-Type", "application/json")
	c.bufs.New = func() any { return new(bytes.Buffer) }
	c.payloads.New = func() any { b := make([]byte, 0, 256); return &b }
	return c, nil
}

// IsCode reports whether err is an API error with this code (api.Code*).
func IsCode(err error, code string) bool {
	var ae *api.Error
	return errors.As(err, &ae) && ae.Code == code
}

// maxAnswerBytes bounds the body of an answer the client reads.
const maxAnswerBytes = 16 << 20

// jsonAppender is a body with a hand-kept encoder that writes what
// json.Marshal would (api.AcquireRequest, on the hot path).
type jsonAppender interface {
	AppendJSON(b []byte) ([]byte, error)
}

// reader is handed the status and body of an answer; the body is valid
// only during the call (its buffer is reused), and retried says whether
// an earlier attempt may have reached a daemon.
type reader func(status int, body []byte, retried bool) error

// jsonDecoder is an answer with a hand-kept decoder that decodes as
// json.Unmarshal would (api.Lease: a permit's answer).
type jsonDecoder interface {
	DecodeJSON(b []byte) error
}

// send sends a request, retrying as the Client documents, and hands the
// answer to read. in, when not nil, is the JSON body.
func (c *Client) send(ctx context.Context, method, path string, in any, read reader) error {
	if in == nil {
		return c.sendBody(ctx, method, path, nil, read)
	}
	p := c.payloads.Get().(*[]byte)
	var payload []byte
	var err error
	if a, ok := in.(jsonAppender); ok {
		payload, err = a.AppendJSON((*p)[:0])
	} else {
		payload, err = json.Marshal(in)
	}
	if err != nil {
		c.payloads.Put(p)
		return fmt.Errorf("client: encode %s: %w", where(method, path), err)
	}
	return c.sendPayload(ctx, method, path, p, payload, read)
}

// sendPayload is sendBody of payload, a JSON body appended to *p (from
// c.payloads), which it keeps for reuse when no transport can still read
// it.
func (c *Client) sendPayload(ctx context.Context, method, path string, p *[]byte, payload []byte, read reader) error {
	b := &body{payload: payload}
	err := c.sendBody(ctx, method, path, b, read)
	if !b.shared && cap(payload) <= 64<<10 {
		*p = payload[:0]
		c.payloads.Put(p)
	}
	return err
}

// body is a request's JSON body; shared says a transport that may still
// read it after the call (net/http's) was handed it.
type body struct {
	payload []byte
	shared  bool
}

// where is "METHOD path", for errors (a copy: path itself may stay on
// the caller's stack).
func where(method, path string) string { return method + " " + path }

// sendBody sends a request with b (nil: none), retrying as the Client
// documents, and hands the answer to read.
func (c *Client) sendBody(ctx context.Context, method, path string, b *body, read reader) error {
	hdr := c.hdr
	if b != nil {
		hdr = c.jsonHdr
	}
	start := time.Now()
	backoff := 50 * time.Millisecond
	first := int(c.first.Load())
	// A leader a standby named gets the request first; when it does not
	// answer (or answers 503), the configured addresses take over at once.
	lead := c.leaderFor(path)
	for attempt := 0; ; attempt++ {
		i := (first + attempt) % len(c.bases)
		to := route{base: c.bases[i], wire: c.wires[i]}
		if lead != nil {
			to = *lead
		}
		unavailable := false
		answered, leader, err := c.sendOnce(ctx, to, method, path, b, hdr, func(status int, body []byte, retried bool) error {
			if status == http.StatusServiceUnavailable {
				unavailable = true
				return apiError(status, body)
			}
			return read(status, body, retried || attempt > 0)
		})
		if lead != nil {
			if answered && !unavailable {
				return err
			}
			// Not reachable from here, or no longer the leader: back to
			// the configured addresses, and not again for a while.
			c.shunned.Store(&shunned{base: lead.base, until: time.Now().Add(shunFor)})
			c.leader.CompareAndSwap(lead, nil)
			lead = nil
			continue
		}
		if answered && !unavailable {
			c.first.Store(uint32(i)) // stay with an address that answers
			c.learnLeader(to.base, leader)
			return err
		}
		if ctx.Err() != nil || c.retry == 0 || time.Since(start)+backoff > c.retry {
			return err
		}
		// Full jitter: the clients of a failed leader do not retry in step.
		t := time.NewTimer(backoff/2 + rand.N(backoff/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// shunFor is how long a leader route that failed is not followed again.
const shunFor = 30 * time.Second

// shunned is a leader route that failed, and until when it is not
// followed again.
type shunned struct {
	base  string
	until time.Time
}

// route is one address requests go to: a base URL and, where it serves,
// its wire.
type route struct {
	base string
	wire *wire
}

// leaderFor returns the route to the leader a standby named, for a path
// the leader arbitrates; nil when there is none (or the client does not
// follow the leader: WithFollowLeader(false)).
func (c *Client) leaderFor(path string) *route {
	if c.noFollow || !arbitrated(path) {
		return nil
	}
	return c.leader.Load()
}

// learnLeader keeps the leader named in an answer from base (a standby
// forwarded the request there), so that the next arbitrated requests skip
// the extra hop. The name must be a URL of base's scheme (an https client
// never moves to plain http).
func (c *Client) learnLeader(base, leader string) {
	if c.noFollow || leader == "" || leader == base {
		return
	}
	if cur := c.leader.Load(); cur != nil && cur.base == leader {
		return
	}
	if sh := c.shunned.Load(); sh != nil && sh.base == leader && time.Now().Before(sh.until) {
		return
	}
	u, err := url.Parse(leader)
	bu, berr := url.Parse(base)
	if err != nil || berr != nil || u.Host == "" || u.Scheme != bu.Scheme {
		return
	}
	var w *wire
	if c.rt != nil {
		w = wireFor(leader, c.proxy, c.token, c.tlsConfig)
		if w != nil {
			// An address the client was not given may not be reachable
			// from it: find out quickly, the configured ones are there.
			w.dialer.Timeout = time.Second
		}
	}
	c.leader.Store(&route{base: strings.TrimSuffix(leader, "/"), wire: w})
}

// arbitrated reports whether the leader answers path (the daemon forwards
// it there from a standby): pools, leases, budgets and VM ceilings.
func arbitrated(path string) bool {
	for _, p := range []string{"/v1/pools", "/v1/leases", "/v1/budgets", "/v1/ceilings"} {
		if path == p || strings.HasPrefix(path, p+"/") || strings.HasPrefix(path, p+"?") {
			return true
		}
	}
	return false
}

// sendOnce sends one request to one address; answered is false when no
// answer was read (the daemon could not be reached, or the connection
// broke), leader is the answer's api.LeaderHeader. read's retried says the
// request was sent twice (a kept-alive connection had been closed).
func (c *Client) sendOnce(ctx context.Context, to route, method, path string, b *body, hdr http.Header, read reader) (answered bool, leader string, err error) {
	var payload []byte
	if b != nil {
		payload = b.payload
	}
	if w := to.wire; w != nil { // see wire
		buf := c.bufs.Get().(*bytes.Buffer)
		defer c.putBuf(buf)
		buf.Reset()
		status, leader, retried, err := w.roundTrip(ctx, method, path, payload, buf)
		if err != nil {
			return !errors.Is(err, errNoAnswer), "", fmt.Errorf("client: %s: %w", where(method, path), err)
		}
		return true, leader, read(status, buf.Bytes(), retried)
	}
	var rb io.Reader
	if b != nil {
		b.shared = true
		rb = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, to.base+path, rb)
	if err != nil {
		return false, "", fmt.Errorf("client: %s: %w", where(method, path), err)
	}
	req.Header = hdr
	var resp *http.Response
	if c.rt != nil {
		resp, err = c.rt.RoundTrip(req)
	} else {
		resp, err = c.hc.Do(req)
	}
	if err != nil {
		return false, "", fmt.Errorf("client: %s: %w", where(method, path), err)
	}
	defer resp.Body.Close()
	leader = resp.Header.Get(api.LeaderHeader)
	if resp.ContentLength > maxAnswerBytes {
		return true, leader, fmt.Errorf("client: %s: the answer is %d bytes long; at most %d are read", where(method, path), resp.ContentLength, maxAnswerBytes)
	}
	buf := c.bufs.Get().(*bytes.Buffer)
	defer c.putBuf(buf)
	buf.Reset()
	if resp.ContentLength > 0 {
		buf.Grow(int(resp.ContentLength))
	}
	if _, err := buf.ReadFrom(&io.LimitedReader{R: resp.Body, N: maxAnswerBytes}); err != nil {
		return false, "", fmt.Errorf("client: %s: read the response: %w", where(method, path), err)
	}
	return true, leader, read(resp.StatusCode, buf.Bytes(), false)
}

// putBuf keeps buf for reuse unless a large answer grew it.
func (c *Client) putBuf(buf *bytes.Buffer) {
	if buf.Cap() <= 64<<10 {
		c.bufs.Put(buf)
	}
}

// do sends one request; out, when not nil, receives the JSON response. A
// non-2xx answer is an *api.Error.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	return c.send(ctx, method, path, in, func(status int, b []byte, retried bool) error {
		if status == http.StatusNotFound && retried && method == http.MethodDelete {
			return nil // an earlier attempt released it, and its answer was lost
		}
		if status < 200 || status > 299 {
			return apiError(status, b)
		}
		if out == nil || len(b) == 0 {
			return nil
		}
		var err error
		if d, ok := out.(jsonDecoder); ok {
			err = d.DecodeJSON(b)
		} else {
			err = json.Unmarshal(b, out)
		}
		if err != nil {
			return fmt.Errorf("client: %s: decode the response: %w", where(method, path), err)
		}
		return nil
	})
}

// lease is do for the calls answered with an api.Lease (the hot path:
// its decoder is hand-kept, and l stays on the stack). p and payload are
// sendPayload's; p nil sends no body.
func (c *Client) lease(ctx context.Context, method, path string, p *[]byte, payload []byte) (api.Lease, error) {
	var l api.Lease
	read := func(status int, b []byte, _ bool) error {
		if status < 200 || status > 299 {
			return apiError(status, b)
		}
		if len(b) == 0 {
			return nil
		}
		if err := l.DecodeJSON(b); err != nil {
			return fmt.Errorf("client: %s: decode the response: %w", where(method, path), err)
		}
		return nil
	}
	var err error
	if p == nil {
		err = c.sendBody(ctx, method, path, nil, read)
	} else {
		err = c.sendPayload(ctx, method, path, p, payload, read)
	}
	return l, err
}

func apiError(status int, body []byte) *api.Error {
	var eb api.ErrorBody
	if eb.DecodeJSON(body) != nil || eb.Error.Code == "" {
		eb.Error = api.Error{Code: http.StatusText(status), Message: strings.TrimSpace(string(body))}
	}
	eb.Error.Status = status
	return &eb.Error
}

func seg(s string) string { return url.PathEscape(s) }

// Health is GET /healthz.
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, nil)
}

// Ready is GET /readyz: nil when a configuration is active and the backend
// answers.
func (c *Client) Ready(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/readyz", nil, nil)
}

// Status is GET /v1/status.
func (c *Client) Status(ctx context.Context) (api.Status, error) {
	var s api.Status
	err := c.do(ctx, http.MethodGet, "/v1/status", nil, &s)
	return s, err
}

// Reload is POST /v1/reload: a synchronous reload. A rejected
// configuration returns its result (OK false, Error set) and an
// *api.Error with status 422 and code "rejected".
func (c *Client) Reload(ctx context.Context) (api.ReloadResult, error) {
	var res api.ReloadResult
	err := c.send(ctx, http.MethodPost, "/v1/reload", nil, func(status int, b []byte, _ bool) error {
		if status != http.StatusOK && status != http.StatusUnprocessableEntity {
			return apiError(status, b)
		}
		if err := json.Unmarshal(b, &res); err != nil {
			return fmt.Errorf("client: POST /v1/reload: decode the response: %w", err)
		}
		if !res.OK {
			return &api.Error{Code: "rejected", Message: res.Error, Status: status}
		}
		return nil
	})
	return res, err
}

// Pools is GET /v1/pools.
func (c *Client) Pools(ctx context.Context) ([]api.PoolStatus, error) {
	var l api.PoolList
	err := c.do(ctx, http.MethodGet, "/v1/pools", nil, &l)
	return l.Pools, err
}

// Pool is GET /v1/pools/{name}: the status and every holder.
func (c *Client) Pool(ctx context.Context, name string) (api.PoolDetail, error) {
	var s api.PoolDetail
	err := c.do(ctx, http.MethodGet, "/v1/pools/"+seg(name), nil, &s)
	return s, err
}

// Acquire is POST /v1/pools/{name}/acquire. With WaitSeconds 0 it answers
// at once (409 unavailable when no slot is free); otherwise it long-polls
// (408 timeout). ctx should outlive the wait.
func (c *Client) Acquire(ctx context.Context, pool string, req api.AcquireRequest) (api.Lease, error) {
	if req.RequestID == "" {
		req.RequestID = NewRequestID()
	}
	path := "/v1/pools/" + seg(pool) + "/acquire"
	p := c.payloads.Get().(*[]byte)
	payload, err := req.AppendJSON((*p)[:0])
	if err != nil {
		c.payloads.Put(p)
		return api.Lease{}, fmt.Errorf("client: encode %s: %w", where(http.MethodPost, path), err)
	}
	return c.lease(ctx, http.MethodPost, path, p, payload)
}

// Heartbeat is POST /v1/leases/{id}/heartbeat, for pool leases and budget
// permits alike; it returns the lease with its new expiry.
func (c *Client) Heartbeat(ctx context.Context, leaseID string) (api.Lease, error) {
	return c.lease(ctx, http.MethodPost, "/v1/leases/"+seg(leaseID)+"/heartbeat", nil, nil)
}

// Release is DELETE /v1/leases/{id}, for pool leases and budget permits.
func (c *Client) Release(ctx context.Context, leaseID string) error {
	return c.do(ctx, http.MethodDelete, "/v1/leases/"+seg(leaseID), nil, nil)
}

// Budgets is GET /v1/budgets.
func (c *Client) Budgets(ctx context.Context) ([]api.BudgetStatus, error) {
	var l api.BudgetList
	err := c.do(ctx, http.MethodGet, "/v1/budgets", nil, &l)
	return l.Budgets, err
}

// Budget is GET /v1/budgets/{name}: the status and every holder.
func (c *Client) Budget(ctx context.Context, name string) (api.BudgetDetail, error) {
	var s api.BudgetDetail
	err := c.do(ctx, http.MethodGet, "/v1/budgets/"+seg(name), nil, &s)
	return s, err
}

// AcquirePermit is POST /v1/budgets/{name}/permits; the permit is a lease
// (heartbeat it with Heartbeat).
func (c *Client) AcquirePermit(ctx context.Context, budget string, req api.PermitRequest) (api.Lease, error) {
	if req.RequestID == "" {
		req.RequestID = NewRequestID()
	}
	var l api.Lease
	err := c.do(ctx, http.MethodPost, "/v1/budgets/"+seg(budget)+"/permits", req, &l)
	return l, err
}

// ReleasePermit is DELETE /v1/budgets/{name}/permits/{id}.
func (c *Client) ReleasePermit(ctx context.Context, budget, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/budgets/"+seg(budget)+"/permits/"+seg(id), nil, nil)
}

// Ceilings is GET /v1/ceilings.
func (c *Client) Ceilings(ctx context.Context) ([]api.CeilingStatus, error) {
	var l api.CeilingList
	err := c.do(ctx, http.MethodGet, "/v1/ceilings", nil, &l)
	return l.Ceilings, err
}

// Ceiling is GET /v1/ceilings/{name}: the status and every holder.
func (c *Client) Ceiling(ctx context.Context, name string) (api.CeilingDetail, error) {
	var s api.CeilingDetail
	err := c.do(ctx, http.MethodGet, "/v1/ceilings/"+seg(name), nil, &s)
	return s, err
}

// RequestClaim is POST /v1/ceilings/{name}/claims.
func (c *Client) RequestClaim(ctx context.Context, ceiling string, req api.ClaimRequest) (api.Claim, error) {
	if req.RequestID == "" {
		req.RequestID = NewRequestID()
	}
	var cl api.Claim
	err := c.do(ctx, http.MethodPost, "/v1/ceilings/"+seg(ceiling)+"/claims", req, &cl)
	return cl, err
}

// ConfirmClaim is POST /v1/ceilings/{name}/claims/{id}/confirm.
func (c *Client) ConfirmClaim(ctx context.Context, ceiling, id string) (api.Claim, error) {
	var cl api.Claim
	err := c.do(ctx, http.MethodPost, "/v1/ceilings/"+seg(ceiling)+"/claims/"+seg(id)+"/confirm", nil, &cl)
	return cl, err
}

// CancelClaim is DELETE /v1/ceilings/{name}/claims/{id}.
func (c *Client) CancelClaim(ctx context.Context, ceiling, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/ceilings/"+seg(ceiling)+"/claims/"+seg(id), nil, nil)
}

// PushUsage is PUT /v1/ceilings/{name}/usage: the provider's active count.
func (c *Client) PushUsage(ctx context.Context, ceiling string, active int) (api.CeilingStatus, error) {
	var s api.CeilingStatus
	err := c.do(ctx, http.MethodPut, "/v1/ceilings/"+seg(ceiling)+"/usage", api.UsageRequest{Active: &active}, &s)
	return s, err
}

// Pickup is POST /v1/classes/{class}/pickup. When the pool has nothing for
// req the error is an *api.Error with Code api.CodeExhausted and Kind
// api.ExhaustedGlobal or api.ExhaustedLocal.
func (c *Client) Pickup(ctx context.Context, class string, req api.PickupRequest) (api.Instance, error) {
	var in api.Instance
	err := c.do(ctx, http.MethodPost, "/v1/classes/"+seg(class)+"/pickup", req, &in)
	return in, err
}

// Offer is POST /v1/classes/{class}/instances: record an idle instance.
func (c *Client) Offer(ctx context.Context, class string, inst api.Instance) (api.Instance, error) {
	var out api.Instance
	err := c.do(ctx, http.MethodPost, "/v1/classes/"+seg(class)+"/instances", inst, &out)
	return out, err
}

// ReleaseInstance is POST /v1/instances/{id}/release.
func (c *Client) ReleaseInstance(ctx context.Context, id string, req api.ReleaseInstanceRequest) (api.Instance, error) {
	var out api.Instance
	err := c.do(ctx, http.MethodPost, "/v1/instances/"+seg(id)+"/release", req, &out)
	return out, err
}

// NewRequestID returns a random request_id: 128 bits, hex.
func NewRequestID() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ConfirmInstance is POST /v1/instances/{id}/confirm: owner (the worker_id
// of the pickup) received the instance, so a claim of a class with
// claim_ttl no longer lapses.
func (c *Client) ConfirmInstance(ctx context.Context, id, owner string) (api.Instance, error) {
	var out api.Instance
	err := c.do(ctx, http.MethodPost, "/v1/instances/"+seg(id)+"/confirm", api.ConfirmInstanceRequest{Owner: owner}, &out)
	return out, err
}

// PickupAndConfirm picks up a runner and confirms the claim, so that it is
// the caller's until ReleaseInstance even on a class with claim_ttl. A
// request cut by a transport error (the connection dropped, the daemon
// restarted) is sent again, up to 3 times, with the same req.WorkerID,
// which the daemon answers with the runner the first attempt claimed
// (docs/pickup.md): req.WorkerID is therefore required, and must be unique
// to the job. An answer from the daemon (exhausted, a bad request) is
// returned as is.
func (c *Client) PickupAndConfirm(ctx context.Context, class string, req api.PickupRequest) (api.Instance, error) {
	if req.WorkerID == "" {
		return api.Instance{}, errors.New("client: PickupAndConfirm needs a WorkerID: it is the key a cut request is retried with")
	}
	var inst api.Instance
	err := c.retryCut(ctx, func() error {
		var err error
		inst, err = c.Pickup(ctx, class, req)
		return err
	})
	if err != nil {
		return api.Instance{}, err
	}
	err = c.retryCut(ctx, func() error {
		var err error
		inst, err = c.ConfirmInstance(ctx, inst.InstanceID, req.WorkerID)
		return err
	})
	if err != nil {
		return api.Instance{}, fmt.Errorf("client: picked up instance %s but could not confirm it (it lapses after the class's claim_ttl): %w", inst.InstanceID, err)
	}
	return inst, nil
}

// retryCut runs call, again after a short pause when it failed without an
// answer from the daemon (a transport error), up to 3 attempts.
func (c *Client) retryCut(ctx context.Context, call func() error) error {
	var err error
	for attempt := range 3 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return err
			case <-time.After(time.Duration(attempt) * 250 * time.Millisecond):
			}
		}
		err = call()
		var ae *api.Error
		if err == nil || errors.As(err, &ae) || ctx.Err() != nil {
			return err
		}
	}
	return err
}
