package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rpdhq/rpd/api"
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

	mux.HandleFunc("GET /v1/pools", d.listPools)
	mux.HandleFunc("GET /v1/pools/{name}", d.getPool)
	mux.HandleFunc("POST /v1/pools/{name}/acquire", d.acquire)
	mux.HandleFunc("GET /v1/leases", d.listLeases)
	mux.HandleFunc("POST /v1/leases/{id}/heartbeat", d.heartbeat)
	mux.HandleFunc("DELETE /v1/leases/{id}", d.releaseLease)

	mux.HandleFunc("GET /v1/budgets", d.listBudgets)
	mux.HandleFunc("GET /v1/budgets/{name}", d.getBudget)
	mux.HandleFunc("POST /v1/budgets/{name}/permits", d.acquirePermit)
	mux.HandleFunc("DELETE /v1/budgets/{name}/permits/{id}", d.releasePermit)

	mux.HandleFunc("GET /v1/ceilings", d.listCeilings)
	mux.HandleFunc("GET /v1/ceilings/{name}", d.getCeiling)
	mux.HandleFunc("POST /v1/ceilings/{name}/claims", d.requestClaim)
	mux.HandleFunc("POST /v1/ceilings/{name}/claims/{id}/confirm", d.confirmClaim)
	mux.HandleFunc("DELETE /v1/ceilings/{name}/claims/{id}", d.cancelClaim)
	mux.HandleFunc("PUT /v1/ceilings/{name}/usage", d.putUsage)

	mux.HandleFunc("GET /v1/classes", d.listClasses)
	mux.HandleFunc("GET /v1/classes/{class}", d.getClass)
	mux.HandleFunc("POST /v1/classes/{class}/pickup", d.pickup)
	mux.HandleFunc("GET /v1/classes/{class}/instances", d.listInstances)
	mux.HandleFunc("POST /v1/classes/{class}/instances", d.offer)
	mux.HandleFunc("GET /v1/instances/{id}", d.getInstance)
	mux.HandleFunc("POST /v1/instances/{id}/release", d.releaseInstance)
	mux.HandleFunc("POST /v1/instances/{id}/confirm", d.confirmInstance)

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
		writeError(w, http.StatusMethodNotAllowed, api.CodeMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s; use %s", r.Method, r.URL.Path, strings.Join(allowed, " or ")))
		return
	}
	writeError(w, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("no route %s %s; see docs/api.md for the routes", r.Method, r.URL.Path))
}

// middleware matches paths as sent, bounds the time the body may take,
// finds the request's principal and checks that its scopes allow the
// route (auth.go: every route but /healthz and /readyz, so that probes
// need no secret, and the status page's HTML and assets, which carry no
// data: its script sends the token), counting refusals, and writes the
// audit line of every state-changing request.
func (d *Daemon) middleware(mux *http.ServeMux, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if uncleanPath(r.URL.EscapedPath()) {
			writeError(w, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("no route %s %s: paths are matched as sent; remove empty, \".\" and \"..\" segments", r.Method, r.URL.EscapedPath()))
			return
		}
		// A body gets BodyReadTimeout from here; decode lifts the deadline
		// once the body is in, so that a long-poll is not cut short (net/http
		// cancels the request's context when a read deadline passes).
		deadline := time.Time{}
		if r.ContentLength != 0 {
			deadline = time.Now().Add(d.opts.BodyReadTimeout)
		}
		_ = http.NewResponseController(w).SetReadDeadline(deadline)
		_, pattern := mux.Handler(r)
		need := scopeOf(pattern)
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) && statuspage.Public(r.URL.Path) {
			need = scopePublic
		}
		var p *principal
		if need != scopePublic {
			p = d.authenticate(r, d.creds.Load())
		}
		if d.audit != nil && audited(r.Method) {
			aw := &auditWriter{ResponseWriter: w}
			w = aw
			defer func() { d.audit.add(requestEntry(r, p, pattern, aw)) }()
		}
		if !d.authorize(w, r, p, need) {
			return
		}
		if p != nil && p != anonymous {
			r = r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
		}
		next.ServeHTTP(w, r)
	})
}

// writeJSON writes v with status. It returns the write error, so a handler
// that granted something can give it back when the client is gone.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	buf := answerBufs.Get().(*bytes.Buffer)
	defer putBuf(&answerBufs, buf)
	buf.Reset()
	var err error
	if a, ok := v.(jsonAppender); ok {
		var b []byte
		if b, err = a.AppendJSON(buf.AvailableBuffer()); err == nil {
			buf.Write(append(b, '\n'))
		}
	} else {
		err = json.NewEncoder(buf).Encode(v) // as json.Marshal, plus '\n'
	}
	if err != nil {
		http.Error(w, `{"error":{"code":"internal","message":"cannot encode the response"}}`, http.StatusInternalServerError)
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, err = w.Write(buf.Bytes())
	return err
}

// jsonAppender is an answer with a hand-kept encoder that writes what
// json.Marshal would (api.Lease, the answer of the hot path).
type jsonAppender interface {
	AppendJSON(b []byte) ([]byte, error)
}

// answerBufs holds the buffers writeJSON encodes into, bodyBufs those
// decodeBody reads request bodies into (*bytes.Buffer).
var (
	answerBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}
	bodyBufs   = sync.Pool{New: func() any { return new(bytes.Buffer) }}
)

// putBuf returns buf to pool unless it grew large (a large body or
// answer is rare, and its buffer is not worth keeping).
func putBuf(pool *sync.Pool, buf *bytes.Buffer) {
	if buf.Cap() <= 64<<10 {
		pool.Put(buf)
	}
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	_ = writeJSON(w, status, api.ErrorBody{Error: api.Error{Code: code, Message: msg}})
}

// httpError is an error with its HTTP status and API code.
type httpError struct {
	status int
	code   string
	kind   string
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, args ...any) *httpError {
	return &httpError{status: http.StatusBadRequest, code: api.CodeBadRequest, msg: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *httpError {
	return &httpError{status: http.StatusNotFound, code: api.CodeNotFound, msg: fmt.Sprintf(format, args...)}
}

// fail writes err: an *httpError as it says, anything else through
// classify (the runtime packages' sentinels), else 500.
func (d *Daemon) fail(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	if !errors.As(err, &he) {
		he = classify(err)
	}
	if he.status >= 500 {
		d.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	_ = writeJSON(w, he.status, api.ErrorBody{Error: api.Error{Code: he.code, Message: he.msg, Kind: he.kind}})
}

// decode reads the JSON body of r into v: at most api.MaxBodyBytes within
// the body read timeout, no unknown fields, no key twice in one object, no
// string over api.MaxIDBytes, exactly one value. An empty body decodes as
// {}. This is the one place every request body passes through.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	err := decodeBody(http.MaxBytesReader(w, r.Body, api.MaxBodyBytes), v)
	var he *httpError
	if errors.As(err, &he) && he.status == http.StatusRequestTimeout {
		w.Header().Set("Connection", "close") // the rest of the body is not worth waiting for
		return err
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	return err
}

// decodeBody is decode without the ResponseWriter, for the fuzz target.
// The body is read into a pooled buffer: what v keeps of it is copied.
func decodeBody(body io.Reader, v any) error {
	buf := bodyBufs.Get().(*bytes.Buffer)
	defer putBuf(&bodyBufs, buf)
	buf.Reset()
	b, err := readBody(buf, body)
	if err != nil {
		return err
	}
	if err := checkJSON(b); err != nil {
		return err
	}
	// The hot body has a hand-kept decoder for the shape clients send;
	// anything else, and every error, is encoding/json's.
	if r, ok := v.(*api.AcquireRequest); ok && parseAcquire(b, r) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // empty body: every field takes its default
		}
		return badRequest("invalid JSON body: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("invalid JSON body: more than one JSON value")
	}
	return nil
}

// waitDuration converts wait_seconds, rejecting negative, non-finite and
// too-long waits.
func waitDuration(s float64) (time.Duration, error) {
	if !(s >= 0) || s > api.MaxWaitSeconds {
		return 0, badRequest("wait_seconds %v out of range: use 0 (answer at once) to %d", s, api.MaxWaitSeconds)
	}
	return time.Duration(s * float64(time.Second)), nil
}

// ttlDuration converts ttl_seconds; 0 means def.
func ttlDuration(s float64, def time.Duration) (time.Duration, error) {
	const maxTTL = 7 * 24 * 3600
	if !(s >= 0) || s > maxTTL {
		return 0, badRequest("ttl_seconds %v out of range: use 0 (the default) up to %d", s, maxTTL)
	}
	if s == 0 {
		return def, nil
	}
	d := time.Duration(s * float64(time.Second))
	if d < time.Second {
		return 0, badRequest("ttl_seconds %v too short: a lease must live at least 1 second", s)
	}
	return d, nil
}

func (d *Daemon) healthz(w http.ResponseWriter, r *http.Request) {
	_ = writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz is 200 when a configuration is active, the backend answers, and
// a grant record can be written: a daemon that can read but not write (a
// read-only database, a full disk) would answer every grant with 500. On a
// standby the leader must answer too (its requests are forwarded).
func (d *Daemon) readyz(w http.ResponseWriter, r *http.Request) {
	if d.reloader.state().version == 0 {
		writeError(w, http.StatusServiceUnavailable, api.CodeNotReady, "no configuration is active yet")
		return
	}
	if !d.arbitrating() {
		if err := d.leaderReachable(r.Context()); err != nil {
			writeError(w, http.StatusServiceUnavailable, api.CodeNotReady, "standby, and "+err.Error())
			return
		}
	}
	if err := d.backend.Ping(r.Context()); err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeNotReady, "backend unreachable: "+err.Error())
		return
	}
	// Only the leader writes grant records (through the fence: a fenced
	// leader is not ready either).
	if d.arbitrating() {
		if err := d.grants.probe(r.Context()); err != nil {
			writeError(w, http.StatusServiceUnavailable, api.CodeNotReady, "grants cannot be recorded, so every grant would fail: "+err.Error()+"; check that the backend is writable (file permissions, disk space, IAM)")
			return
		}
	}
	_ = writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (d *Daemon) status(w http.ResponseWriter, r *http.Request) {
	_ = writeJSONConditional(w, r, d.statusView(r))
}

func (d *Daemon) reloadRoute(w http.ResponseWriter, r *http.Request) {
	if err := decode(w, r, &struct{}{}); err != nil {
		d.fail(w, r, err)
		return
	}
	res := d.Reload(r.Context())
	status := http.StatusOK
	if !res.OK {
		status = http.StatusUnprocessableEntity
	}
	_ = writeJSON(w, status, res)
}
