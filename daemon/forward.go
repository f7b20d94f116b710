package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/daemon/internal/httpapi"
	"github.com/rpdhq/rpd/daemon/internal/security"
)

// forwardMargin is what a forward may take beyond the request's own wait
// (wait_seconds): the leader's record write and the round trip. A forward
// never waits minutes for a leader that stopped answering.
const forwardMargin = 5 * time.Second

// errLeaderMoved cancels a forward when another daemon took the lease.
var errLeaderMoved = errors.New("the leadership moved to another daemon")

// arbitrated reports whether a path belongs to the leader: pools, leases,
// budgets and VM ceilings. Runner pickup, status, metrics and probes are
// served by every daemon.
func arbitrated(path string) bool {
	for _, p := range []string{"/v1/pools", "/v1/leases", "/v1/budgets", "/v1/ceilings"} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// forwarder sends a standby's arbitrated requests to the leader. Each
// forward is bounded by the request's own wait plus forwardMargin, and is
// cancelled when the standby learns of a new leader; an idempotent request
// (one with a request_id, a heartbeat, a release, a confirm, a read) is
// then sent again to the new leader, so its client does not wait for a
// frozen one.
type forwarder struct {
	d         *Daemon
	transport *http.Transport
}

func newForwarder(d *Daemon) *forwarder {
	dialer := &net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}
	f := &forwarder{d: d, transport: &http.Transport{
		Proxy:               nil, // replicas talk directly
		DialContext:         dialer.DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		// Each forward's context carries its deadline (wait + margin).
	}}
	d.forwardTLS(f.transport, dialer) // an https:// leader
	return f
}

// forwardBody is what a forward reads of a request body: how long the
// request may wait at the leader, and whether it is safe to send twice.
type forwardBody struct {
	WaitSeconds float64 `json:"wait_seconds"`
	RequestID   string  `json:"request_id"`
}

// idempotent reports whether r may be sent to a second leader after the
// first did not answer: the request_id makes a grant retry find the grant
// already made; heartbeats, releases, confirms, usage figures and reads
// mean the same twice.
func idempotent(r *http.Request, fb forwardBody) bool {
	switch {
	case fb.RequestID != "", r.Method == http.MethodGet, r.Method == http.MethodHead,
		r.Method == http.MethodDelete, r.Method == http.MethodPut:
		return true
	}
	return strings.HasSuffix(r.URL.Path, "/heartbeat") || strings.HasSuffix(r.URL.Path, "/confirm")
}

// serve forwards r to the leader, or serves it with next when this daemon
// took the lead meanwhile, or answers 503 not_leader when no live leader is
// known, r was already forwarded once, or the leader did not answer.
func (f *forwarder) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if f.d.awaitServing(r.Context()) {
		next.ServeHTTP(w, r) // this daemon just took the lead
		return
	}
	if r.Header.Get(security.ForwardedHeader) != "" {
		writeNotLeader(w, f.d.elector.View().Address, "this daemon received a forwarded request but does not lead the stack (the leadership is changing); retry")
		return
	}
	buf := httpapi.BodyBufs.Get().(*bytes.Buffer)
	defer httpapi.PutBuf(&httpapi.BodyBufs, buf)
	buf.Reset()
	body, err := httpapi.ReadBody(buf, http.MaxBytesReader(w, r.Body, api.MaxBodyBytes))
	if err != nil {
		f.d.fail(w, r, err)
		return
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{}) // the body is in
	var fb forwardBody
	if len(body) > 0 {
		// A body the leader will refuse is sent on as it is: the leader's
		// answer names what is wrong with it.
		_ = json.Unmarshal(body, &fb)
	}
	wait := time.Duration(min(max(fb.WaitSeconds, 0), api.MaxWaitSeconds) * float64(time.Second))
	ctx, cancel := context.WithTimeout(r.Context(), wait+forwardMargin)
	defer cancel()
	retry := idempotent(r, fb)
	for {
		if f.d.awaitServing(ctx) { // this daemon leads now (or just took over)
			r.Body = io.NopCloser(bytes.NewReader(body))
			next.ServeHTTP(w, r)
			return
		}
		l, moved := f.d.elector.LeaderView()
		target, msg := f.target(l)
		if target == nil {
			f.d.elector.Wake()
			writeNotLeader(w, l.Address, msg)
			return
		}
		resp, err := f.roundTrip(ctx, moved, target, r, body)
		if err == nil {
			// Name the leader, so that a client sends its next requests
			// there itself (client.WithFollowLeader).
			w.Header().Set(api.LeaderHeader, l.Address)
			copyResponse(w, resp)
			return
		}
		switch {
		case f.d.stopping.Load():
			httpapi.WriteError(w, http.StatusServiceUnavailable, api.CodeNotReady, httpapi.ErrShuttingDown.Error())
			return
		case errors.Is(context.Cause(ctx), context.DeadlineExceeded) && r.Context().Err() == nil:
			f.d.elector.Wake()
			writeNotLeader(w, target.String(), fmt.Sprintf("this daemon is a standby and the leader at %s did not answer within the request's wait plus %v; retry: a standby takes over when the leader's lease runs out", target, forwardMargin))
			return
		case r.Context().Err() != nil:
			return // the client went away; nobody reads an answer
		case errors.Is(err, errLeaderMoved) && retry:
			continue // the same request, to the new leader
		case errors.Is(err, errLeaderMoved):
			writeNotLeader(w, "", "the leadership moved while this request was forwarded, and without a request_id it is not safe to send twice; retry (pass a request_id so that a retry never yields two grants)")
			return
		}
		f.d.elector.Wake() // it may have released the lease, or died
		writeNotLeader(w, target.String(), fmt.Sprintf("this daemon is a standby and the leader at %s did not answer (%v); retry in a moment: a standby takes over when the leader's lease runs out", target, err))
		return
	}
}

// target is the URL of the leader l, or nil and why there is none to
// forward to.
func (f *forwarder) target(l backend.Leader) (*url.URL, string) {
	if !l.Live(time.Now()) || l.Holder == f.d.elector.Holder || l.Address == f.d.elector.Address {
		// No leader, or this daemon's own address: the lease of a
		// predecessor on this address (killed, restarted) running out.
		return nil, "no daemon leads the stack right now (the leader stopped, or its lease is running out); retry in a moment"
	}
	target, err := url.Parse(l.Address)
	if err != nil || target.Host == "" {
		return nil, fmt.Sprintf("the leader advertises %q, which is not a URL; set its advertise address (rpd { ha { advertise = \"http://HOST:PORT\" } } or -advertise)", l.Address)
	}
	return target, ""
}

// roundTrip sends r (with body) to target and returns the leader's answer,
// its headers read. It fails with errLeaderMoved when moved ends first.
func (f *forwarder) roundTrip(ctx context.Context, moved context.Context, target *url.URL, r *http.Request, body []byte) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(moved, func() { cancel(errLeaderMoved) })
	defer stop()
	u := *target
	u.Path = strings.TrimRight(target.Path, "/") + r.URL.Path
	u.RawPath = ""
	u.RawQuery = r.URL.RawQuery
	out, err := http.NewRequestWithContext(ctx, r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		cancel(nil)
		return nil, err
	}
	for k, vs := range r.Header {
		if !hopByHop(k) {
			out.Header[k] = vs
		}
	}
	out.Header.Set(security.ForwardedHeader, f.d.elector.Holder)
	// The bearer token goes on as it came: replicas share the tokens. A
	// client certificate's principal goes in a header the leader believes
	// of a replica only (auth.go).
	security.SetForwardedPrincipal(r, out)
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		if prior := r.Header.Values("X-Forwarded-For"); len(prior) > 0 {
			ip = strings.Join(prior, ", ") + ", " + ip
		}
		out.Header.Set("X-Forwarded-For", ip)
	}
	resp, err := f.transport.RoundTrip(out)
	if err != nil {
		c := context.Cause(ctx)
		cancel(nil)
		if c != nil {
			return nil, c
		}
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: func() { cancel(nil) }}
	return resp, nil
}

// cancelOnClose ends a forward's context when its answer's body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel func()
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// copyResponse writes the leader's answer to w, saying whose it is.
func copyResponse(w http.ResponseWriter, resp *http.Response) {
	defer resp.Body.Close()
	h := w.Header()
	for k, vs := range resp.Header {
		if !hopByHop(k) {
			h[k] = vs
		}
	}
	markFromLeader(h, resp.Request.URL)
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// hopByHop reports whether a header belongs to one connection only (RFC
// 9110, section 7.6.1) and so is not forwarded.
func hopByHop(k string) bool {
	switch k {
	case "Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

func writeNotLeader(w http.ResponseWriter, leader, msg string) {
	w.Header().Set("Retry-After", "1")
	_ = httpapi.WriteJSON(w, http.StatusServiceUnavailable, api.ErrorBody{Error: api.Error{Code: api.CodeNotLeader, Message: msg, Leader: leader}})
}

// leaderOnly serves arbitrated routes here while this daemon leads and is
// serving, and forwards them to the leader otherwise.
func (d *Daemon) leaderOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if arbitrated(r.URL.Path) && !d.arbitrating() {
			d.forward.serve(w, r, next)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// arbitrating reports whether this daemon answers arbitrated requests
// itself: it leads, has restored the stack's grants, and is not shutting
// down.
func (d *Daemon) arbitrating() bool {
	if !d.serving.Load() || d.stopping.Load() {
		return false
	}
	_, err := d.elector.Leading()
	return err == nil
}

// awaitServing waits, while this daemon holds the lease but is still
// taking over (applying, restoring the grants), until it arbitrates, for
// up to 10 s or until ctx ends. It reports whether it arbitrates now; it
// returns at once when it is not taking over.
func (d *Daemon) awaitServing(ctx context.Context) bool {
	takingOver := func() bool {
		_, err := d.elector.Leading()
		return err == nil && !d.stopping.Load() && !d.arbitrating()
	}
	if !takingOver() {
		return d.arbitrating() // a standby's every forward: no timer
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for takingOver() {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return d.arbitrating()
}

// leaderReachable is /readyz on a standby: the leader's /healthz answers.
func (d *Daemon) leaderReachable(ctx context.Context) error {
	l := d.elector.View()
	if !l.Live(time.Now()) || l.Address == d.elector.Address {
		return fmt.Errorf("no daemon leads the stack right now")
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(l.Address, "/")+"/healthz", nil)
	if err != nil {
		return fmt.Errorf("the leader's address %q: %w", l.Address, err)
	}
	resp, err := d.forward.transport.RoundTrip(req)
	if err != nil {
		return fmt.Errorf("the leader at %s does not answer: %w", l.Address, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the leader at %s answers /healthz with %s", l.Address, resp.Status)
	}
	return nil
}
