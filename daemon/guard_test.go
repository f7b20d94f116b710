package daemon

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/backend/faulty"
)

const hostileHCL = `
pool "db" {
  slots = 1
}
budget "scan" {
  scan_ring   = "1MiB"
  delta_cache = "1MiB"
}
vm_ceiling "vm" {
  max = 10
}
runner_class "m" {
  cpu            = 2
  mem            = "4GiB"
  instance_types = ["c6i.large"]
}
`

// wantAPIError checks that body is the JSON error model with code.
func wantAPIError(t *testing.T, status int, body string, wantStatus int, wantCode string) api.Error {
	t.Helper()
	if status != wantStatus {
		t.Fatalf("status = %d, want %d; body %s", status, wantStatus, body)
	}
	var eb api.ErrorBody
	if err := json.Unmarshal([]byte(body), &eb); err != nil {
		t.Fatalf("body is not the JSON error model: %v: %q", err, body)
	}
	if eb.Error.Code != wantCode || eb.Error.Message == "" {
		t.Fatalf("error = %+v, want code %q and a message", eb.Error, wantCode)
	}
	return eb.Error
}

// TestUsageAtIntLimitGrantsNothing is the over-booking report: a ceiling at
// its max, a waiting claim, then a usage figure of the int64 limit. The
// figure is refused, the waiting claim times out with a 408 that says what
// waited, and an answer-at-once claim is still refused.
func TestUsageAtIntLimitGrantsNothing(t *testing.T) {
	td := startDaemon(t, hostileHCL)
	if status, body := td.raw(t, "PUT", "/v1/ceilings/vm/usage", `{"active":10}`); status != http.StatusOK {
		t.Fatalf("usage 10: %d %s", status, body)
	}
	type answer struct {
		status int
		body   string
	}
	waiting := make(chan answer, 1)
	go func() {
		s, b := td.raw(t, "POST", "/v1/ceilings/vm/claims", `{"worker_id":"a","count":1,"wait_seconds":1}`)
		waiting <- answer{s, b}
	}()
	waitFor(t, "the claim to queue", func() bool { st, _ := td.c.Ceiling(ctxT(t), "vm"); return st.Queued == 1 })
	status, body := td.raw(t, "PUT", "/v1/ceilings/vm/usage", fmt.Sprintf(`{"active":%d}`, int64(math.MaxInt64)))
	wantAPIError(t, status, body, http.StatusBadRequest, api.CodeBadRequest)
	a := <-waiting
	e := wantAPIError(t, a.status, a.body, http.StatusRequestTimeout, api.CodeTimeout)
	if !strings.Contains(e.Message, `vm_ceiling vm: worker "a"`) || !strings.Contains(e.Message, "waited 1s") || strings.Contains(e.Message, "deadline exceeded") {
		t.Fatalf("408 message %q does not say what waited and for how long", e.Message)
	}
	status, body = td.raw(t, "POST", "/v1/ceilings/vm/claims", `{"worker_id":"b","count":1}`)
	wantAPIError(t, status, body, http.StatusConflict, api.CodeUnavailable)
	st, err := td.c.Ceiling(ctxT(t), "vm")
	if err != nil {
		t.Fatal(err)
	}
	// b's refused claim keeps its place as a ticket (see ledger.TryRequest).
	if st.ProviderActive != 10 || st.Effective != 10 || st.LocalClaims != 0 || st.Queued != 1 {
		t.Fatalf("ceiling after the hostile figure = %+v, want 10 active, no claims, b's ticket queued", st)
	}
}

// TestBudgetWaitTimeoutSaysWhatWaited: a budget's 408 names the budget,
// the permit and the wait, not "context deadline exceeded".
func TestBudgetWaitTimeoutSaysWhatWaited(t *testing.T) {
	td := startDaemon(t, hostileHCL)
	if status, body := td.raw(t, "POST", "/v1/budgets/scan/permits", `{"scan_ring_bytes":1048576}`); status != http.StatusOK {
		t.Fatalf("first permit: %d %s", status, body)
	}
	status, body := td.raw(t, "POST", "/v1/budgets/scan/permits", `{"scan_ring_bytes":1,"wait_seconds":0.2}`)
	e := wantAPIError(t, status, body, http.StatusRequestTimeout, api.CodeTimeout)
	if !strings.Contains(e.Message, "budget scan: a permit for 1 scan-ring bytes") || !strings.Contains(e.Message, "waited 200ms") {
		t.Fatalf("408 message %q does not say what waited and for how long", e.Message)
	}
}

// TestHostileBodies: long identifiers, duplicate keys and impossible byte
// counts are refused with 400 before anything is queued or stored.
func TestHostileBodies(t *testing.T) {
	td := startDaemon(t, hostileHCL)
	long := strings.Repeat("w", api.MaxIDBytes+1)
	huge := strings.Repeat("w", 100_000)
	offer := func(id string) string {
		return fmt.Sprintf(`{"instance_id":%q,"usage_class":"on-demand","instance_type":"c6i.large","cpu":2,"mem":4096,"resource_class":"m","threshold":%q}`,
			id, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	}
	for _, tc := range []struct {
		name, method, path, body string
		want                     string // in the message
	}{
		{"worker_id of 100 KB", "POST", "/v1/ceilings/vm/claims", `{"worker_id":"` + huge + `","count":1}`, "worker_id is 100000 bytes long"},
		{"worker_id of 257 bytes", "POST", "/v1/ceilings/vm/claims", `{"worker_id":"` + long + `"}`, "worker_id is 257 bytes long"},
		{"task_id", "POST", "/v1/pools/db/acquire", `{"task_id":"` + long + `"}`, "task_id is 257"},
		{"priority_name", "POST", "/v1/pools/db/acquire", `{"priority_name":"` + long + `"}`, "priority_name is 257"},
		{"pickup worker_id", "POST", "/v1/classes/m/pickup", `{"worker_id":"` + long + `"}`, "worker_id is 257"},
		{"an instance type glob", "POST", "/v1/classes/m/pickup", `{"instance_types":["c6i.*","` + long + `"]}`, "instance_types is 257"},
		{"instance_id", "POST", "/v1/classes/m/instances", offer(long), "instance_id is 257"},
		{"owner", "POST", "/v1/instances/i-1/release", `{"owner":"` + long + `"}`, "owner is 257"},
		{"duplicate key", "POST", "/v1/ceilings/vm/claims", `{"worker_id":"a","count":1,"count":5}`, `key "count" appears twice`},
		{"nested duplicate key", "POST", "/v1/pools/db/acquire", `{"task_id":"a","x":{"k":1,"k":2}}`, `key "k" appears twice`},
		{"bytes over int64", "POST", "/v1/budgets/scan/permits", `{"scan_ring_bytes":18446744073709551615}`, "must be at most 9223372036854775807"},
		{"usage over MaxCount", "PUT", "/v1/ceilings/vm/usage", `{"active":2147483648}`, "out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := td.raw(t, tc.method, tc.path, tc.body)
			e := wantAPIError(t, status, body, http.StatusBadRequest, api.CodeBadRequest)
			if !strings.Contains(e.Message, tc.want) {
				t.Fatalf("message %q does not contain %q", e.Message, tc.want)
			}
		})
	}
	// Exactly MaxIDBytes is fine.
	ok := strings.Repeat("w", api.MaxIDBytes)
	if status, body := td.raw(t, "POST", "/v1/pools/db/acquire", `{"task_id":"`+ok+`"}`); status != http.StatusOK {
		t.Fatalf("task_id of %d bytes: %d %s", api.MaxIDBytes, status, body)
	}
	ctx := ctxT(t)
	if st, _ := td.c.Ceiling(ctx, "vm"); st.Queued != 0 || st.LocalClaims != 0 {
		t.Fatalf("ceiling after hostile bodies = %+v, want untouched", st)
	}
}

// TestBearerSchemeAnyCase: the auth scheme is case-insensitive.
func TestBearerSchemeAnyCase(t *testing.T) {
	td := startDaemon(t, hostileHCL, func(o *Options) { o.Token = "s3cret" })
	for _, h := range []string{"Bearer s3cret", "bearer s3cret", "BEARER  s3cret"} {
		if status, body := td.raw(t, "GET", "/v1/pools", "", "Authorization", h); status != http.StatusOK {
			t.Errorf("Authorization %q: %d %s", h, status, body)
		}
	}
	for _, h := range []string{"", "Basic s3cret", "Bearer", "Bearer wrong", "Bearers3cret"} {
		status, body := td.raw(t, "GET", "/v1/pools", "", "Authorization", h)
		wantAPIError(t, status, body, http.StatusUnauthorized, api.CodeUnauthorized)
	}
}

// rawExchange sends req on a fresh connection and returns the response.
func rawExchange(t *testing.T, addr, req string) (*http.Response, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer to %.60q: %v", req, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestHostileRequestsGetJSONErrors: what net/http answers by itself, and
// what ServeMux would redirect, is answered in the JSON error model.
func TestHostileRequestsGetJSONErrors(t *testing.T) {
	td := startDaemon(t, hostileHCL, func(o *Options) { o.BodyReadTimeout = 300 * time.Millisecond })
	bigHeader := "X-Junk: " + strings.Repeat("j", 70<<10) + "\r\n"
	for _, tc := range []struct {
		name, req string
		status    int
		code      string
	}{
		{"headers over 64 KiB", "GET /v1/pools HTTP/1.1\r\nHost: x\r\n" + bigHeader + "\r\n", 431, api.CodeHeadersTooLarge},
		{"bad percent escape", "GET /v1/pools/%zz HTTP/1.1\r\nHost: x\r\n\r\n", 400, api.CodeBadRequest},
		{"no Host header", "GET /v1/pools HTTP/1.1\r\n\r\n", 400, api.CodeBadRequest},
		{"dot-dot POST", "POST /v1/pools/db/../../reload HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", 404, api.CodeNotFound},
		{"double slash POST", "POST /v1//pools/db/acquire HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", 404, api.CodeNotFound},
		{"dot segment", "GET /v1/./pools HTTP/1.1\r\nHost: x\r\n\r\n", 404, api.CodeNotFound},
		{"short body, long Content-Length", "POST /v1/pools/db/acquire HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"task_id\"", 408, api.CodeTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := rawExchange(t, td.addr, tc.req)
			wantAPIError(t, resp.StatusCode, body, tc.status, tc.code)
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			if loc := resp.Header.Get("Location"); loc != "" {
				t.Errorf("redirected to %q", loc)
			}
		})
	}
	// Nothing above reached a handler that changes anything.
	if st, _ := td.c.Pool(ctxT(t), "db"); st.Used != 0 {
		t.Fatalf("pool db = %+v, want untouched", st)
	}
}

// TestLongPollOutlivesTheBodyDeadline: lifting the body's read deadline
// after decoding lets a long-poll wait longer than it (net/http would
// otherwise cancel the request when the deadline passes).
func TestLongPollOutlivesTheBodyDeadline(t *testing.T) {
	td := startDaemon(t, hostileHCL, func(o *Options) { o.BodyReadTimeout = 100 * time.Millisecond })
	if status, body := td.raw(t, "POST", "/v1/pools/db/acquire", `{}`); status != http.StatusOK {
		t.Fatalf("first acquire: %d %s", status, body)
	}
	status, body := td.raw(t, "POST", "/v1/pools/db/acquire", `{"wait_seconds":0.5}`)
	wantAPIError(t, status, body, http.StatusRequestTimeout, api.CodeTimeout)
}

// TestFarFutureThresholdRefused: an offer with a threshold in 2300 used to
// answer 200 idle while the SQLite table stored a wrapped (past) time, so
// the runner was lost at its first claim. It is a 400 now, and nothing is
// recorded.
func TestFarFutureThresholdRefused(t *testing.T) {
	td := startDaemon(t, hostileHCL)
	body := `{"instance_id":"i-far","usage_class":"on-demand","instance_type":"c6i.large","cpu":2,"mem":4096,"resource_class":"m","threshold":"2300-01-01T00:00:00Z"}`
	status, resp := td.raw(t, "POST", "/v1/classes/m/instances", body)
	e := wantAPIError(t, status, resp, http.StatusBadRequest, api.CodeBadRequest)
	if !strings.Contains(e.Message, "threshold 2300-01-01T00:00:00Z is more than") {
		t.Fatalf("message %q does not explain the threshold", e.Message)
	}
	status, resp = td.raw(t, "POST", "/v1/instances/i-far/release", `{}`)
	wantAPIError(t, status, resp, http.StatusNotFound, api.CodeNotFound)
}

// TestTokenNeverInReloadErrors: a token written without quotes is an
// unknown reference; the rejected reload's error, /v1/status and the log
// say where the token is but never show it.
func TestTokenNeverInReloadErrors(t *testing.T) {
	const secret = "CfgT0ken-5e3c2b"
	var logs syncBuffer
	td := startDaemon(t, hostileHCL, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	writeFile(t, filepath.Join(td.dir, "rpd.hcl"), strings.Replace(rpdBlock(td.state), "rpd {\n", "rpd {\n  token = "+secret+"\n", 1))
	res := td.d.Reload(ctxT(t))
	if res.OK || !strings.Contains(res.Error, "token attribute") {
		t.Fatalf("reload = %+v; want a rejection naming the token attribute", res)
	}
	status, body := td.raw(t, "GET", "/v1/status", "")
	if status != http.StatusOK || !strings.Contains(body, "token attribute") {
		t.Fatalf("status: %d %s; want the rejected reload", status, body)
	}
	for what, text := range map[string]string{"reload result": res.Error, "/v1/status": body, "log": logs.String()} {
		if strings.Contains(text, secret) {
			t.Errorf("the token reached the %s: %s", what, text)
		}
	}
}

// TestReadyzWhenGrantsCannotBeWritten: a backend that reads but cannot
// write (what a read-only database or a full disk looks like to the grant
// store) made /readyz answer 200 while every grant failed with 500. Now
// /readyz probes a write and answers 503 with the reason.
func TestReadyzWhenGrantsCannotBeWritten(t *testing.T) {
	td := startDaemon(t, hostileHCL)
	if status, body := td.raw(t, "GET", "/readyz", ""); status != http.StatusOK {
		t.Fatalf("readyz on a healthy backend: %d %s", status, body)
	}
	store := td.d.arb.GrantStore()
	td.d.arb.SetGrantStore(faulty.New(faulty.Fault{Op: faulty.PutGrant, Fail: true}).Grants(store))
	status, body := td.raw(t, "GET", "/readyz", "")
	e := wantAPIError(t, status, body, http.StatusServiceUnavailable, api.CodeNotReady)
	if !strings.Contains(e.Message, "grants cannot be recorded") || !strings.Contains(e.Message, "injected") {
		t.Fatalf("readyz message %q does not give the reason", e.Message)
	}
	status, body = td.raw(t, "POST", "/v1/budgets/scan/permits", `{"scan_ring_bytes":1}`)
	wantAPIError(t, status, body, http.StatusInternalServerError, api.CodeInternal)
	td.d.arb.SetGrantStore(store)
	if status, body := td.raw(t, "GET", "/readyz", ""); status != http.StatusOK {
		t.Fatalf("readyz after the backend recovered: %d %s", status, body)
	}
	if recs, err := store.LoadGrants(ctxT(t)); err != nil || len(recs) != 0 {
		t.Fatalf("records after probes: %v, %v; want none (the probe deletes its own)", recs, err)
	}
}

// TestMaxQueuedForCeilingsAndBudgets: the flood report left 20,000
// answer-at-once claims with distinct worker IDs queued; with max_queued a
// ceiling and a budget answer 429 beyond the bound and keep the rest.
func TestMaxQueuedForCeilingsAndBudgets(t *testing.T) {
	td := startDaemon(t, `
budget "scan" {
  scan_ring   = "1MiB"
  delta_cache = "1MiB"
  max_queued  = 1
}
vm_ceiling "vm" {
  max        = 1
  max_queued = 2
}
`)
	if status, body := td.raw(t, "PUT", "/v1/ceilings/vm/usage", `{"active":1}`); status != http.StatusOK {
		t.Fatalf("usage: %d %s", status, body)
	}
	for i := range 5 {
		status, body := td.raw(t, "POST", "/v1/ceilings/vm/claims", fmt.Sprintf(`{"worker_id":"w%d"}`, i))
		if i < 2 {
			wantAPIError(t, status, body, http.StatusConflict, api.CodeUnavailable)
		} else {
			wantAPIError(t, status, body, http.StatusTooManyRequests, api.CodeQueueFull)
		}
	}
	if st, err := td.c.Ceiling(ctxT(t), "vm"); err != nil || st.Queued != 2 {
		t.Fatalf("ceiling = %+v, %v; want 2 queued", st, err)
	}

	if status, body := td.raw(t, "POST", "/v1/budgets/scan/permits", `{"scan_ring_bytes":1048576}`); status != http.StatusOK {
		t.Fatalf("first permit: %d %s", status, body)
	}
	waiting := make(chan int, 1)
	go func() {
		s, _ := td.raw(t, "POST", "/v1/budgets/scan/permits", `{"scan_ring_bytes":1,"wait_seconds":1}`)
		waiting <- s
	}()
	waitFor(t, "the permit to queue", func() bool { st, _ := td.c.Budget(ctxT(t), "scan"); return st.Queued == 1 })
	status, body := td.raw(t, "POST", "/v1/budgets/scan/permits", `{"scan_ring_bytes":1,"wait_seconds":1}`)
	wantAPIError(t, status, body, http.StatusTooManyRequests, api.CodeQueueFull)
	if s := <-waiting; s != http.StatusRequestTimeout {
		t.Fatalf("the queued permit answered %d, want 408", s)
	}
}
