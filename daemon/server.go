package daemon

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/daemon/internal/httpapi"
	"github.com/rpdhq/rpd/daemon/internal/security"
	"github.com/rpdhq/rpd/daemon/statuspage"
)

// routes registers every route of the API on a new ServeMux and wraps it in
// the authentication and metrics middleware. docs/api.md documents each.
func (d *Daemon) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", d.healthz)
	mux.HandleFunc("GET /readyz", d.readyz)
	mux.Handle("GET /metrics", d.metricsHandler())
	mux.HandleFunc("GET /v1/status", d.status)
	mux.HandleFunc("POST /v1/reload", d.reloadRoute)

	d.componentRoutes(mux)

	page := statuspage.New()
	for _, pattern := range page.Patterns() {
		mux.Handle(pattern, page)
	}

	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { d.noRoute(mux, w, r) })
	return d.observe(mux, d.middleware(mux, d.leaderOnly(mux)))
}

// noRoute answers requests no pattern matched: 405 when the path exists
// under another method, else 404, both in the JSON error model.
func (d *Daemon) noRoute(mux *http.ServeMux, w http.ResponseWriter, r *http.Request) {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		r2 := r.Clone(r.Context())
		r2.Method = m
		if _, pattern := mux.Handler(r2); pattern != "" && pattern != "/" {
			allowed = append(allowed, m)
		}
	}
	if len(allowed) > 0 {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		httpapi.WriteError(w, http.StatusMethodNotAllowed, api.CodeMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s; use %s", r.Method, r.URL.Path, strings.Join(allowed, " or ")))
		return
	}
	httpapi.WriteError(w, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("no route %s %s; see docs/api.md for the routes", r.Method, r.URL.Path))
}

// middleware matches paths as sent, bounds the time the body may take,
// finds the request's principal and checks that its scopes allow the
// route (auth.go: every route but /healthz and /readyz, so that probes
// need no secret, and the status page's HTML and assets, which carry no
// data: its script sends the token), counting refusals, and writes the
// audit line of every state-changing request.
func (d *Daemon) middleware(mux *http.ServeMux, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if httpapi.UncleanPath(r.URL.EscapedPath()) {
			httpapi.WriteError(w, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("no route %s %s: paths are matched as sent; remove empty, \".\" and \"..\" segments", r.Method, r.URL.EscapedPath()))
			return
		}
		// A body gets BodyReadTimeout from here; httpapi.Decode lifts the deadline
		// once the body is in, so that a long-poll is not cut short (net/http
		// cancels the request's context when a read deadline passes).
		deadline := time.Time{}
		if r.ContentLength != 0 {
			deadline = time.Now().Add(d.opts.BodyReadTimeout)
		}
		httpapi.SetReadDeadline(w, deadline)
		creds := d.creds.Load()
		if creds.Open() && d.audit == nil {
			// Anonymous is the admin on every route, and no audit line
			// names the route: no need to route the request twice.
			next.ServeHTTP(w, r)
			return
		}
		_, pattern := mux.Handler(r)
		need := security.ScopeOf(pattern)
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) && statuspage.Public(r.URL.Path) {
			need = security.ScopePublic
		}
		var p *security.Principal
		if need != security.ScopePublic {
			p = security.Authenticate(r, creds, d.tls)
		}
		if d.audit != nil && security.Audited(r.Method) {
			aw := &security.AuditWriter{ResponseWriter: w}
			w = aw
			defer func() { d.audit.Add(security.RequestEntry(r, p, pattern, aw)) }()
		}
		if !security.Authorize(w, r, p, need, d.sec) {
			return
		}
		if p != nil && p != security.Anonymous {
			r = r.WithContext(security.WithPrincipal(r.Context(), p))
		}
		next.ServeHTTP(w, r)
	})
}

// fail writes err: an *httpapi.Error as it says, anything else through
// httpapi.Classify (the runtime packages' sentinels), else 500.
func (d *Daemon) fail(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpapi.Error
	if !errors.As(err, &he) {
		he = httpapi.Classify(err)
	}
	if he.Status >= 500 {
		d.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	_ = httpapi.WriteJSON(w, he.Status, api.ErrorBody{Error: api.Error{Code: he.Code, Message: he.Msg, Kind: he.Kind}})
}

func (d *Daemon) healthz(w http.ResponseWriter, r *http.Request) {
	_ = httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz is 200 when a configuration is active, the backend answers, and
// a grant record can be written: a daemon that can read but not write (a
// read-only database, a full disk) would answer every grant with 500. On a
// standby the leader must answer too (its requests are forwarded).
func (d *Daemon) readyz(w http.ResponseWriter, r *http.Request) {
	if d.reloader.state().version == 0 {
		httpapi.WriteError(w, http.StatusServiceUnavailable, api.CodeNotReady, "no configuration is active yet")
		return
	}
	if !d.arbitrating() {
		if err := d.leaderReachable(r.Context()); err != nil {
			httpapi.WriteError(w, http.StatusServiceUnavailable, api.CodeNotReady, "standby, and "+err.Error())
			return
		}
	}
	if err := d.backend.Ping(r.Context()); err != nil {
		httpapi.WriteError(w, http.StatusServiceUnavailable, api.CodeNotReady, "backend unreachable: "+err.Error())
		return
	}
	// Only the leader writes grant records (through the fence: a fenced
	// leader is not ready either).
	if d.arbitrating() {
		if err := d.arb.Probe(r.Context()); err != nil {
			httpapi.WriteError(w, http.StatusServiceUnavailable, api.CodeNotReady, "grants cannot be recorded, so every grant would fail: "+err.Error()+"; check that the backend is writable (file permissions, disk space, IAM)")
			return
		}
	}
	_ = httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (d *Daemon) status(w http.ResponseWriter, r *http.Request) {
	_ = httpapi.WriteJSONConditional(w, r, d.statusView(r))
}

func (d *Daemon) reloadRoute(w http.ResponseWriter, r *http.Request) {
	if err := httpapi.Decode(w, r, &struct{}{}); err != nil {
		d.fail(w, r, err)
		return
	}
	res := d.Reload(r.Context())
	status := http.StatusOK
	if !res.OK {
		status = http.StatusUnprocessableEntity
	}
	_ = httpapi.WriteJSON(w, status, res)
}
