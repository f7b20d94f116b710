package security

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/spec"
)

// auditEntry is one line of the audit log (docs/security.md lists the
// fields). It never carries a secret: the principal is a token's name, and
// bodies are not copied, only the IDs and the refusal reason of answers.
type AuditEntry struct {
	Time      time.Time `json:"time"`
	Event     string    `json:"event"` // "request" or "reload"
	Principal string    `json:"principal,omitempty"`
	Remote    string    `json:"remote,omitempty"`
	Method    string    `json:"method,omitempty"`
	Route     string    `json:"route,omitempty"` // the ServeMux pattern
	Path      string    `json:"path,omitempty"`
	Component string    `json:"component,omitempty"`
	// ID is the lease, permit, claim or instance ID the path names, or
	// the grant's ID from the answer.
	ID          string `json:"id,omitempty"`
	RequestID   string `json:"request_id,omitempty"`
	Status      int    `json:"status,omitempty"`
	Code        string `json:"code,omitempty"`
	Reason      string `json:"reason,omitempty"`
	ForwardedBy string `json:"forwarded_by,omitempty"`
	// ForwardedFor is the client's address as the standby that forwarded
	// the request saw it (Remote is then the standby's).
	ForwardedFor string `json:"forwarded_for,omitempty"`
	// Reload events.
	OK            *bool  `json:"ok,omitempty"`
	ConfigVersion int64  `json:"config_version,omitempty"`
	Changed       bool   `json:"changed,omitempty"`
	Trigger       string `json:"trigger,omitempty"`
}

// auditLog appends entries to a file (or standard output) as JSON lines.
// Appends are queued to one writer goroutine, which flushes its buffer
// whenever the queue runs empty, so a burst costs one write and a lone
// line reaches the file at once. close drains the queue and flushes: a
// clean stop loses nothing. A write that fails is logged and counted
// (rpd_audit_write_errors_total); the request it describes is not failed.
type AuditLog struct {
	log    *slog.Logger
	errs   prometheus.Counter
	queue  chan AuditEntry
	done   chan struct{}
	closer io.Closer // nil for standard output

	closeOnce sync.Once
	mu        sync.RWMutex // held for reading while enqueueing, for writing by close
	closed    bool
}

// auditQueue bounds the entries waiting for the writer; past it an
// append waits (the audit log is not dropped to keep latency).
const auditQueue = 4096

// openAudit opens path for appending ("-" is stdout); "" is no audit log
// (a nil *auditLog, whose methods do nothing).
func OpenAudit(path string, stdout io.Writer, m *Metrics, log *slog.Logger) (*AuditLog, error) {
	errs := m.auditErrors
	if path == "" {
		return nil, nil
	}
	var w io.Writer = stdout
	var closer io.Closer
	if path != spec.AuditStdout {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("open the audit log: %w; create its directory, or change audit_log", err)
		}
		w, closer = f, f
	}
	a := &AuditLog{log: log, errs: errs, queue: make(chan AuditEntry, auditQueue), done: make(chan struct{}), closer: closer}
	go a.run(w)
	return a, nil
}

// run writes the queued entries. After a failed write its buffer is
// dropped (the lines in it are counted lost) and a new one starts, so
// that a disk that recovers gets the lines after.
func (a *AuditLog) run(out io.Writer) {
	defer close(a.done)
	w := bufio.NewWriterSize(out, 64<<10)
	flush := func() {
		if err := w.Flush(); err != nil {
			a.fail(err)
			w = bufio.NewWriterSize(out, 64<<10)
		}
	}
	var line []byte
	for e := range a.queue {
		var err error
		if line, err = json.Marshal(e); err != nil {
			a.fail(err)
			continue
		}
		_, _ = w.Write(append(line, '\n')) // a failure shows at the flush
		if len(a.queue) == 0 {
			flush()
		}
	}
	flush()
}

func (a *AuditLog) fail(err error) {
	a.errs.Inc()
	a.log.Error("cannot write the audit log", "err", err)
}

// add queues e; after close it is dropped and counted as a write error.
func (a *AuditLog) Add(e AuditEntry) {
	if a == nil {
		return
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		a.errs.Inc()
		return
	}
	a.queue <- e
}

// close writes every queued entry, flushes and closes the file.
func (a *AuditLog) Close() {
	if a == nil {
		return
	}
	a.closeOnce.Do(func() {
		a.mu.Lock()
		a.closed = true
		close(a.queue)
		a.mu.Unlock()
		<-a.done
		if a.closer != nil {
			if err := a.closer.Close(); err != nil {
				a.fail(err)
			}
		}
	})
}

// audited reports whether a request changes state (and so is audited).
func Audited(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}

// auditWriter is the ResponseWriter of an audited request: it keeps the
// status and up to auditPeek bytes of the answer, for the IDs and the
// refusal reason.
type AuditWriter struct {
	http.ResponseWriter
	status int
	peek   []byte
}

const auditPeek = 2048

func (w *AuditWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *AuditWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if room := auditPeek - len(w.peek); room > 0 {
		w.peek = append(w.peek, b[:min(room, len(b))]...)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (read
// deadlines, flushes).
func (w *AuditWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// requestEntry is the audit line of an answered request.
func RequestEntry(r *http.Request, p *Principal, pattern string, w *AuditWriter) AuditEntry {
	e := AuditEntry{
		Time: time.Now().UTC(), Event: "request", Remote: r.RemoteAddr, Method: r.Method,
		Route: pattern, Path: r.URL.Path, Component: ComponentOf(r.URL.Path),
		Status: w.status, ForwardedBy: r.Header.Get(ForwardedHeader),
	}
	if e.ForwardedBy != "" {
		e.ForwardedFor = r.Header.Get("X-Forwarded-For")
	}
	if p != nil {
		e.Principal = DisplayName(p)
	}
	if e.Status == 0 {
		e.Status = http.StatusOK
	}
	e.ID = idOf(pattern, r.URL.Path)
	if e.Status >= 400 {
		var body api.ErrorBody
		if json.Unmarshal(w.peek, &body) == nil {
			e.Code, e.Reason = body.Error.Code, body.Error.Message
		}
		return e
	}
	var ids struct {
		LeaseID    string `json:"lease_id"`
		ClaimID    string `json:"claim_id"`
		InstanceID string `json:"instance_id"`
		RequestID  string `json:"request_id"`
	}
	if bytes.HasPrefix(w.peek, []byte("{")) && json.Unmarshal(w.peek, &ids) == nil {
		if e.ID == "" {
			e.ID = ids.LeaseID + ids.ClaimID + ids.InstanceID
		}
		e.RequestID = ids.RequestID
	}
	if e.RequestID == "" {
		// The grant of a request_id has a fixed ID ending "r-<request_id>"
		// (pools.go, permits.go), in the path of later requests too.
		if i := strings.IndexAny(e.ID, ".~"); i > 0 && strings.HasPrefix(e.ID[i+1:], "r-") {
			e.RequestID = e.ID[i+3:]
		}
	}
	return e
}

// secMetrics are the series of authentication and the audit log.
type Metrics struct {
	unauthorized prometheus.Counter
	forbidden    prometheus.Counter
	rateLimited  prometheus.Counter
	auditErrors  prometheus.Counter
}

func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		unauthorized: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rpd_http_unauthorized_total", Help: "Requests refused for a missing or wrong bearer token."}),
		forbidden: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rpd_http_forbidden_total", Help: "Requests refused (403) because the principal lacks the scope, may not use the component, or does not hold the grant."}),
		rateLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rpd_http_rate_limited_total", Help: "Requests refused (429) because their token's rate_limit was spent."}),
		auditErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rpd_audit_write_errors_total", Help: "Audit log lines that could not be written (see the daemon's log for why)."}),
	}
	reg.MustRegister(m.unauthorized, m.forbidden, m.rateLimited, m.auditErrors)
	return m
}

// idOf is the {id} segment of path under the route pattern ("" for none).
// It is read from the path itself: a request a standby forwarded never
// reached its ServeMux, which would have set the path values.
func idOf(pattern, path string) string {
	_, pat, _ := strings.Cut(pattern, " ")
	ps, segs := strings.Split(pat, "/"), strings.Split(path, "/")
	for i, p := range ps {
		if p == "{id}" && i < len(segs) {
			return segs[i]
		}
	}
	return ""
}

// AuditErrors counts the audit lines that could not be written.
func (m *Metrics) AuditErrors() prometheus.Counter { return m.auditErrors }
