package daemon

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/rpdhq/rpd/api"
)

// forwardedHeader marks a request a standby forwarded, so that a daemon
// that is not the leader either (its view was stale) answers 503 instead
// of forwarding it on: requests never loop between replicas.
const forwardedHeader = "X-Rpd-Forwarded-By"

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

// forwarder sends a standby's arbitrated requests to the leader.
type forwarder struct {
	d     *Daemon
	proxy *httputil.ReverseProxy
}

type leaderURLKey struct{}

func newForwarder(d *Daemon) *forwarder {
	f := &forwarder{d: d}
	transport := &http.Transport{
		Proxy:               nil, // replicas talk directly
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		// Long-polls wait up to api.MaxWaitSeconds for their headers.
		ResponseHeaderTimeout: (api.MaxWaitSeconds + 10) * time.Second,
	}
	f.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			target := pr.In.Context().Value(leaderURLKey{}).(*url.URL)
			pr.SetURL(target)
			pr.Out.Host = target.Host
			pr.Out.Header.Set(forwardedHeader, d.elector.holder)
			// The bearer token goes on as it came (Authorization is not
			// a hop-by-hop header): replicas share the token.
		},
		Transport: transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// Always an answer, even when r's context ended: that is also
			// how a shutdown ends a forwarded long-poll, and an empty
			// answer would read as a 200. (A client that went away
			// reads nothing.)
			if d.stopping.Load() {
				writeError(w, http.StatusServiceUnavailable, api.CodeNotReady, errShuttingDown.Error())
				return
			}
			leader := r.Context().Value(leaderURLKey{}).(*url.URL).String()
			d.elector.wake() // it may have released the lease, or died
			writeNotLeader(w, leader, fmt.Sprintf("this daemon is a standby and the leader at %s did not answer (%v); retry in a moment: a standby takes over when the leader's lease runs out", leader, err))
		},
	}
	return f
}

// serve forwards r to the leader, or answers 503 not_leader when no live
// leader is known or r was already forwarded once.
func (f *forwarder) serve(w http.ResponseWriter, r *http.Request) {
	l := f.d.elector.view()
	switch {
	case r.Header.Get(forwardedHeader) != "":
		writeNotLeader(w, l.Address, "this daemon received a forwarded request but does not lead the stack (the leadership is changing); retry")
		return
	case !l.Live(time.Now()) || l.Holder == f.d.elector.holder || l.Address == f.d.elector.address:
		// No leader, or this daemon's own address: the lease of a
		// predecessor on this address (killed, restarted) running out.
		f.d.elector.wake()
		writeNotLeader(w, "", "no daemon leads the stack right now (the leader stopped, or its lease is running out); retry in a moment")
		return
	}
	target, err := url.Parse(l.Address)
	if err != nil || target.Host == "" {
		writeNotLeader(w, l.Address, fmt.Sprintf("the leader advertises %q, which is not a URL; set its advertise address (rpd { ha { advertise = \"http://HOST:PORT\" } } or -advertise)", l.Address))
		return
	}
	f.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), leaderURLKey{}, target)))
}

func writeNotLeader(w http.ResponseWriter, leader, msg string) {
	w.Header().Set("Retry-After", "1")
	_ = writeJSON(w, http.StatusServiceUnavailable, api.ErrorBody{Error: api.Error{Code: api.CodeNotLeader, Message: msg, Leader: leader}})
}

// leaderOnly serves arbitrated routes here while this daemon leads and is
// serving, and forwards them to the leader otherwise.
func (d *Daemon) leaderOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if arbitrated(r.URL.Path) && !d.arbitrating() {
			d.forward.serve(w, r)
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
	_, err := d.elector.leading()
	return err == nil
}

// leaderReachable is /readyz on a standby: the leader's /healthz answers.
func (d *Daemon) leaderReachable(ctx context.Context) error {
	l := d.elector.view()
	if !l.Live(time.Now()) || l.Address == d.elector.address {
		return fmt.Errorf("no daemon leads the stack right now")
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(l.Address, "/")+"/healthz", nil)
	if err != nil {
		return fmt.Errorf("the leader's address %q: %w", l.Address, err)
	}
	resp, err := d.forward.proxy.Transport.RoundTrip(req)
	if err != nil {
		return fmt.Errorf("the leader at %s does not answer: %w", l.Address, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the leader at %s answers /healthz with %s", l.Address, resp.Status)
	}
	return nil
}
