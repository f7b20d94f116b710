package daemon

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/runtime/pickup"
)

// observability holds the series measured on the request and backend
// paths, as opposed to componentCollector's, read at scrape time.
type observability struct {
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	grantWait *prometheus.HistogramVec
	calls     *prometheus.CounterVec
	callTime  *prometheus.HistogramVec

	// The children of the vectors above, by route and by backend
	// operation: WithLabelValues hashes its values and takes a lock on
	// every call, twice or three times a request. No child is ever
	// deleted, so a cached one is the vector's.
	routes children[string, *routeObs]
	ops    children[string, *opObs]

	// writers recycles observe's statusWriters (one per request).
	writers sync.Pool
}

// routeObs are the series of one route pattern.
type routeObs struct {
	latency prometheus.Observer
	// grantKind is the kind of component the route's 200 grants
	// (grantRoutes), "" for other routes.
	grantKind string
	codes     children[int, prometheus.Counter]
	grantWait children[string, prometheus.Observer] // by component name
}

// opObs are the series of one backend operation.
type opObs struct {
	took    prometheus.Observer
	results children[string, prometheus.Counter]
}

// children caches the children of a metric vector: a lookup is one read
// of an immutable map, and a miss (the first use of its labels) copies it.
type children[K comparable, M any] struct {
	m  atomic.Pointer[map[K]M]
	mu sync.Mutex
}

// get returns the child of k, made with mk on first use.
func (c *children[K, M]) get(k K, mk func() M) M {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if v, ok := (*old)[k]; ok {
			return v
		}
	}
	next := make(map[K]M)
	if old != nil {
		next = maps.Clone(*old)
	}
	v := mk()
	next[k] = v
	c.m.Store(&next)
	return v
}

func (o *observability) route(route string) *routeObs {
	return o.routes.get(route, func() *routeObs {
		return &routeObs{latency: o.latency.WithLabelValues(route), grantKind: grantRoutes[route]}
	})
}

// Buckets: requests long-poll up to api.MaxWaitSeconds; backend calls
// include SQS long polls of up to 20 s.
var (
	requestBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	callBuckets    = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20}
)

func newObservability(reg prometheus.Registerer) *observability {
	o := &observability{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rpd_http_requests_total", Help: "HTTP requests answered, by route pattern (\"unmatched\" for none) and status code."}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rpd_http_request_duration_seconds", Help: "Time to answer an HTTP request, by route pattern; long-polls included (they wait up to their wait_seconds).", Buckets: requestBuckets}, []string{"route"}),
		grantWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rpd_grant_wait_seconds", Help: "Time from a grant request's arrival at the leader to its grant, by kind (pool, budget, vm_ceiling) and component name.", Buckets: requestBuckets}, []string{"kind", "name"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rpd_backend_calls_total", Help: "Backend calls by operation and result: ok, condition (a refused condition: fenced, version conflict, lost race, stale handle, not found), canceled, or error."}, []string{"op", "result"}),
		callTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rpd_backend_call_duration_seconds", Help: "Time of a backend call, by operation (queue.receive long-polls up to 20 s).", Buckets: callBuckets}, []string{"op"}),
	}
	reg.MustRegister(o.requests, o.latency, o.grantWait, o.calls, o.callTime)
	return o
}

// backendCall is the backend's open.Observer.
func (o *observability) backendCall(op string, took time.Duration, err error) {
	ob := o.ops.get(op, func() *opObs { return &opObs{took: o.callTime.WithLabelValues(op)} })
	ob.took.Observe(took.Seconds())
	res := callResult(err)
	ob.results.get(res, func() prometheus.Counter { return o.calls.WithLabelValues(op, res) }).Inc()
}

func callResult(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	case errors.Is(err, backend.ErrFenced), errors.Is(err, backend.ErrVersionConflict),
		errors.Is(err, pickup.ErrConditionFailed), errors.Is(err, pickup.ErrNotFound), errors.Is(err, pickup.ErrStaleHandle):
		return "condition"
	}
	return "error"
}

// grantRoutes are the patterns whose 200 is a grant, and the kind of
// component it is of.
var grantRoutes = map[string]string{
	"POST /v1/pools/{name}/acquire":   "pool",
	"POST /v1/budgets/{name}/permits": "budget",
	"POST /v1/ceilings/{name}/claims": "vm_ceiling",
}

// observe counts and times every request by the pattern mux matched (the
// patterns are a fixed set, so the label stays small) and, on the leader,
// the wait of every grant. A standby's forwarded requests never reach mux
// on it; they are labelled by the pattern they would match.
func (d *Daemon) observe(mux *http.ServeMux, next http.Handler) http.Handler {
	o := d.metrics.obs
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw, _ := o.writers.Get().(*statusWriter)
		if sw == nil {
			sw = new(statusWriter)
		}
		*sw = statusWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(sw, r)
		took := time.Since(start)
		routed := r
		if sw.routed != nil {
			routed = sw.routed
		}
		code := sw.code
		*sw = statusWriter{} // the handler returned: nothing uses it now
		o.writers.Put(sw)
		route := routed.Pattern
		local := route != ""
		if !local {
			_, route = mux.Handler(r)
		}
		if route == "" || route == "/" {
			route = "unmatched"
		}
		ro := o.route(route)
		ro.codes.get(code, func() prometheus.Counter { return o.requests.WithLabelValues(route, strconv.Itoa(code)) }).Inc()
		ro.latency.Observe(took.Seconds())
		if ro.grantKind != "" && local && code == http.StatusOK {
			name := routed.PathValue("name")
			ro.grantWait.get(name, func() prometheus.Observer { return o.grantWait.WithLabelValues(ro.grantKind, name) }).Observe(took.Seconds())
		}
	})
}

// statusWriter records the status code a handler wrote, and the request
// the mux routed (noteRoute). Unwrap lets http.ResponseController reach
// the connection (deadlines, flushes).
type statusWriter struct {
	http.ResponseWriter
	code   int
	wrote  bool
	routed *http.Request
}

// noteRoute tells observe, through w (its statusWriter, perhaps wrapped),
// that r is the request the mux routed: the one observe holds is not when
// the middleware handed the mux a copy (with the principal in its
// context), and then has no Pattern or path values. Without the note
// observe routes the request again to label it, and does not count a
// grant's wait.
func noteRoute(w http.ResponseWriter, r *http.Request) {
	for range 8 { // wrappers: the audit log's, observe's
		switch t := w.(type) {
		case *statusWriter:
			t.routed = r
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return
		}
	}
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote {
		s.code, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
