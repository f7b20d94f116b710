package daemon

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/daemon/internal/security"
	"github.com/rpdhq/rpd/spec"
)

// Secrets of the test principals: one per scope, and a second worker.
var testSecrets = map[string]string{
	"reader": strings.Repeat("r", 32), "worker": strings.Repeat("w", 32),
	"other": strings.Repeat("o", 32), "admin": strings.Repeat("a", 32),
}

// tokenBlocks declares testSecrets as token blocks (the admin's secret
// from a file under dir, the others as hashes).
func tokenBlocks(t testing.TB, dir string) string {
	t.Helper()
	var b strings.Builder
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range testSecrets {
			if !yield(k) {
				return
			}
		}
	}) {
		scope := map[string]string{"reader": "read", "worker": "work", "other": "work", "admin": "admin"}[name]
		if name == "admin" {
			file := filepath.Join(dir, "admin.secret")
			writeFile(t, file, testSecrets[name]+"\n")
			fmt.Fprintf(&b, "token %q {\n  file   = %q\n  scopes = [%q]\n}\n", name, file, scope)
			continue
		}
		sum := sha256.Sum256([]byte(testSecrets[name]))
		fmt.Fprintf(&b, "token %q {\n  sha256 = %q\n  scopes = [%q]\n}\n", name, hex.EncodeToString(sum[:]), scope)
	}
	return b.String()
}

const securedHCL = `
pool "db" {
  slots = 4
}
budget "scan" {
  scan_ring   = "1MiB"
  delta_cache = "1MiB"
}
vm_ceiling "vm" {
  max   = 10
  grant = "immediate"
}
`

// startSecured runs a daemon with the test tokens and an audit log, and
// returns it with the audit log's path.
func startSecured(t *testing.T, mods ...func(*Options)) (*testDaemon, string) {
	t.Helper()
	dir, state := t.TempDir(), t.TempDir()
	audit := filepath.Join(state, "audit.jsonl")
	writeFile(t, filepath.Join(dir, "rpd.hcl"), fmt.Sprintf("rpd {\n  stack = \"t\"\n  audit_log = %q\n  backend \"local\" { path = %q }\n}\n", audit, filepath.Join(state, "state.db")))
	writeFile(t, filepath.Join(dir, "tokens.hcl"), tokenBlocks(t, state))
	writeFile(t, filepath.Join(dir, "main.hcl"), securedHCL)
	return startDaemonIn(t, dir, state, mods...), audit
}

// as sends a request as the named principal ("" for none) and returns the
// status and body.
func (td *testDaemon) as(t *testing.T, who, method, path, body string) (int, string) {
	t.Helper()
	if who == "" {
		return td.raw(t, method, path, body)
	}
	return td.raw(t, method, path, body, "Authorization", "Bearer "+testSecrets[who])
}

// TestRouteScopes is the route × scope table: every route the daemon
// registers (a mux.Handle or mux.HandleFunc call in any of its files) has a
// scope in routeScopes, and each principal gets 401 (none), 403 (a scope
// that does not allow the route) or an answer past the authorization (any
// other status) on each.
func TestRouteScopes(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`mux\.Handle(?:Func)?\("([^"]+)"`).FindAllStringSubmatch(string(src), -1) {
			patterns = append(patterns, m[1])
		}
	}
	for _, p := range patterns {
		if _, ok := security.RouteScopes[p]; !ok {
			t.Errorf("route %q has no entry in routeScopes", p)
		}
	}
	for p := range security.RouteScopes {
		if !slices.Contains(patterns, p) {
			t.Errorf("routeScopes has %q, which the daemon does not register", p)
		}
	}
	td, _ := startSecured(t)
	h := td.d.Handler()
	concrete := strings.NewReplacer("{name}", "db", "{class}", "m", "{id}", "x", "{$}", "")
	for _, pattern := range slices.Sorted(func(yield func(string) bool) {
		for k := range security.RouteScopes {
			if !yield(k) {
				return
			}
		}
	}) {
		method, path, ok := strings.Cut(pattern, " ")
		if !ok {
			method, path = http.MethodGet, "/no/such/route"
		}
		path = concrete.Replace(path)
		switch {
		case strings.HasPrefix(path, "/v1/budgets/"):
			path = strings.Replace(path, "/db", "/scan", 1)
		case strings.HasPrefix(path, "/v1/ceilings/"):
			path = strings.Replace(path, "/db", "/vm", 1)
		}
		need := security.RouteScopes[pattern]
		for _, who := range []string{"", "reader", "worker", "admin"} {
			body := ""
			if method == http.MethodPost || method == http.MethodPut {
				body = "{}"
			}
			req := httptest.NewRequest(method, path, strings.NewReader(body))
			if who != "" {
				req.Header.Set("Authorization", "Bearer "+testSecrets[who])
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			got := rec.Code
			var want string
			switch has := map[string]security.Scope{"": 0, "reader": security.ScopeRead, "worker": security.ScopeWork, "admin": security.ScopeAdmin}[who]; {
			case need == security.ScopePublic:
				want = "not 401/403"
			case who == "":
				want = "401"
			case need == security.ScopeAny || has == security.ScopeAdmin || has&need != 0:
				want = "not 401/403"
			default:
				want = "403"
			}
			if fmt.Sprint(got) != want && !(want == "not 401/403" && got != 401 && got != 403) {
				t.Errorf("%s %s as %q (route %q, needs %v): %d, want %s: %s", method, path, who, pattern, need, got, want, rec.Body.String())
			}
		}
	}
}

// TestHolderOnly: a lease, permit or claim is heartbeated and ended by the
// principal that took it or by an admin; another worker gets 403, also
// after a restart restored the grants from their records.
func TestHolderOnly(t *testing.T) {
	td, _ := startSecured(t)
	take := func(path, body, idField string) string {
		t.Helper()
		st, b := td.as(t, "worker", http.MethodPost, path, body)
		if st != http.StatusOK {
			t.Fatalf("POST %s as worker: %d %s", path, st, b)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(b), &m); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(m[idField])
	}
	if st, b := td.as(t, "admin", http.MethodPut, "/v1/ceilings/vm/usage", `{"active":0}`); st != http.StatusOK {
		t.Fatalf("usage figure as admin: %d %s", st, b)
	}
	lease := take("/v1/pools/db/acquire", `{"task_id":"job-1"}`, "lease_id")
	permit := take("/v1/budgets/scan/permits", `{"scan_ring_bytes":1024,"request_id":"p-1"}`, "lease_id")
	claim := take("/v1/ceilings/vm/claims", `{"worker_id":"w-1","request_id":"c-1"}`, "claim_id")

	check := func(td *testDaemon) {
		t.Helper()
		for _, c := range []struct {
			method, path string
		}{
			{http.MethodPost, "/v1/leases/" + lease + "/heartbeat"},
			{http.MethodDelete, "/v1/leases/" + lease},
			{http.MethodPost, "/v1/leases/" + permit + "/heartbeat"},
			{http.MethodDelete, "/v1/budgets/scan/permits/" + permit},
			{http.MethodPost, "/v1/ceilings/vm/claims/" + claim + "/confirm"},
			{http.MethodDelete, "/v1/ceilings/vm/claims/" + claim},
		} {
			st, b := td.as(t, "other", c.method, c.path, "")
			wantAPIError(t, st, b, http.StatusForbidden, api.CodeForbidden)
			if !strings.Contains(b, "worker") {
				t.Errorf("%s %s as other: %s; want the holder named", c.method, c.path, b)
			}
		}
		// The same request_id from another principal does not hand over
		// the grant made for it.
		st, b := td.as(t, "other", http.MethodPost, "/v1/budgets/scan/permits", `{"scan_ring_bytes":1024,"request_id":"p-1"}`)
		wantAPIError(t, st, b, http.StatusForbidden, api.CodeForbidden)
		st, b = td.as(t, "reader", http.MethodGet, "/v1/leases", "")
		var gl api.GrantList
		if err := json.Unmarshal([]byte(b), &gl); st != http.StatusOK || err != nil || len(gl.Leases) != 3 {
			t.Fatalf("GET /v1/leases: %d %s", st, b)
		}
		for _, g := range gl.Leases {
			if g.Principal != "worker" {
				t.Errorf("grant %s lists principal %q; want worker", g.ID, g.Principal)
			}
		}
	}
	check(td)
	if st, b := td.as(t, "worker", http.MethodPost, "/v1/leases/"+lease+"/heartbeat", ""); st != http.StatusOK {
		t.Fatalf("heartbeat by the holder: %d %s", st, b)
	}

	// A new daemon on the same state restores the owners with the grants.
	if err := td.stop(); err != nil {
		t.Fatal(err)
	}
	td2 := startDaemonIn(t, td.dir, td.state)
	check(td2)
	for _, p := range []string{"/v1/leases/" + lease, "/v1/budgets/scan/permits/" + permit, "/v1/ceilings/vm/claims/" + claim} {
		if st, b := td2.as(t, "admin", http.MethodDelete, p, ""); st != http.StatusNoContent {
			t.Errorf("DELETE %s as admin: %d %s", p, st, b)
		}
	}
}

// TestComponentLimits: a token with pools = [...] works only there.
func TestComponentLimits(t *testing.T) {
	secret := strings.Repeat("l", 32)
	sum := sha256.Sum256([]byte(secret))
	td := startDaemon(t, securedHCL+fmt.Sprintf("pool \"other\" {\n  slots = 1\n}\ntoken \"limited\" {\n  sha256 = %q\n  scopes = [\"work\"]\n  pools  = [\"db\"]\n}\n", hex.EncodeToString(sum[:])))
	auth := []string{"Authorization", "Bearer " + secret}
	if st, b := td.raw(t, http.MethodPost, "/v1/pools/db/acquire", `{}`, auth...); st != http.StatusOK {
		t.Fatalf("acquire in an allowed pool: %d %s", st, b)
	}
	st, b := td.raw(t, http.MethodPost, "/v1/pools/other/acquire", `{}`, auth...)
	wantAPIError(t, st, b, http.StatusForbidden, api.CodeForbidden)
}

// TestAuditLog: one line per state-changing request and per reload, naming
// the principal and the IDs, with no secret anywhere; the lines are all
// written when the daemon stops.
func TestAuditLog(t *testing.T) {
	td, path := startSecured(t)
	st, b := td.as(t, "worker", http.MethodPost, "/v1/pools/db/acquire", `{"task_id":"job-1","request_id":"rid-7"}`)
	if st != http.StatusOK {
		t.Fatalf("acquire: %d %s", st, b)
	}
	var l api.Lease
	if err := json.Unmarshal([]byte(b), &l); err != nil {
		t.Fatal(err)
	}
	td.as(t, "other", http.MethodDelete, "/v1/leases/"+l.LeaseID, "")
	td.as(t, "", http.MethodPost, "/v1/reload", "{}")
	td.as(t, "worker", http.MethodGet, "/v1/status", "") // not audited: reads nothing changes
	if res := td.d.Reload(context.Background()); !res.OK {
		t.Fatal(res.Error)
	}
	if err := td.stop(); err != nil {
		t.Fatal(err)
	}
	lines := readAudit(t, path)
	want := []struct {
		event, principal, route string
		status                  int
	}{
		{"reload", "daemon", "", 0},
		{"request", "worker", "POST /v1/pools/{name}/acquire", 200},
		{"request", "other", "DELETE /v1/leases/{id}", 403},
		{"request", "", "POST /v1/reload", 401},
		{"reload", "daemon", "", 0},
	}
	if len(lines) != len(want) {
		t.Fatalf("audit log has %d lines; want %d:\n%v", len(lines), len(want), lines)
	}
	for i, w := range want {
		got := lines[i]
		if got.Event != w.event || got.Principal != w.principal || got.Route != w.route || got.Status != w.status {
			t.Errorf("line %d = %+v; want %+v", i, got, w)
		}
	}
	if got := lines[1]; got.ID != l.LeaseID || got.RequestID != "rid-7" || got.Component != "db" || got.Remote == "" {
		t.Errorf("acquire line %+v; want lease %s, request rid-7, component db, a remote address", got, l.LeaseID)
	}
	if got := lines[2]; got.ID != l.LeaseID || got.Code != api.CodeForbidden || !strings.Contains(got.Reason, "worker") {
		t.Errorf("refused release line %+v; want the lease, code forbidden and the reason", got)
	}
	raw, _ := os.ReadFile(path)
	for who, s := range testSecrets {
		if strings.Contains(string(raw), s) {
			t.Errorf("the secret of %s is in the audit log", who)
		}
	}
}

func readAudit(t *testing.T, path string) []security.AuditEntry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []security.AuditEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e security.AuditEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

// TestAuditWriteErrorsCounted: a full disk (/dev/full) is logged and
// counted, and the requests still answer.
func TestAuditWriteErrorsCounted(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full on this system")
	}
	dir, state := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(dir, "rpd.hcl"), strings.Replace(rpdBlock(state), "rpd {", "rpd {\n  audit_log = \"/dev/full\"", 1))
	writeFile(t, filepath.Join(dir, "main.hcl"), `pool "db" { slots = 1 }`+"\n")
	td := startDaemonIn(t, dir, state)
	l, err := td.c.Acquire(context.Background(), "db", api.AcquireRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := td.c.Release(context.Background(), l.LeaseID); err != nil {
		t.Fatal(err)
	}
	if err := td.stop(); err != nil { // flushes
		t.Fatal(err)
	}
	var m dto.Metric
	if err := td.d.sec.AuditErrors().Write(&m); err != nil {
		t.Fatal(err)
	}
	if n := m.GetCounter().GetValue(); n < 1 {
		t.Errorf("rpd_audit_write_errors_total = %v after writes to /dev/full; want at least 1", n)
	}
}

// TestWeakSecretsRefused: a secret under 16 bytes, or no credential at
// all, is refused on an address other hosts reach, with how to make one.
func TestWeakSecretsRefused(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	writeFile(t, short, "tooshort\n")
	long := strings.Repeat("x", 16)
	for _, c := range []struct {
		name, env, listen string
		cfg               spec.Config
		want              string // "" for accepted
	}{
		{"short RPD_TOKEN on 0.0.0.0", "short", "0.0.0.0:7070", spec.Config{}, "openssl rand -hex 32"},
		{"short RPD_TOKEN on loopback", "short", "127.0.0.1:7070", spec.Config{}, ""},
		{"16-byte RPD_TOKEN on 0.0.0.0", long, "0.0.0.0:7070", spec.Config{}, ""},
		{"short rpd.token", "", "10.0.0.5:7070", spec.Config{Token: "abc"}, "the rpd block's token"},
		{"short token file", "", "[::]:7070", spec.Config{Tokens: []spec.Token{{Name: "w", File: short, Scopes: []string{"work"}}}}, `token "w"`},
		{"nothing on 0.0.0.0", "", "0.0.0.0:7070", spec.Config{}, "without a bearer token"},
		{"client CA only", "", "0.0.0.0:7070", spec.Config{TLS: &spec.TLS{ClientCAFile: "ca", ClientScopes: []string{"work"}}}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := security.NewCredentials(&c.cfg, c.env, c.listen)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("err = %v; want a refusal mentioning %q", err, c.want)
			case err != nil && strings.Contains(err.Error(), c.env) && c.env != "":
				t.Fatalf("the refusal shows the secret: %v", err)
			}
		})
	}
}

// TestTokenFileRotation: a token read from a file is re-read on reload,
// and several tokens are valid at once.
func TestTokenFileRotation(t *testing.T) {
	td, _ := startSecured(t)
	file := filepath.Join(td.state, "admin.secret")
	next := strings.Repeat("n", 32)
	writeFile(t, file, next+"\n")
	if res := td.d.Reload(context.Background()); !res.OK {
		t.Fatal(res.Error)
	}
	if st, _ := td.raw(t, http.MethodGet, "/v1/status", "", "Authorization", "Bearer "+next); st != http.StatusOK {
		t.Errorf("the rotated admin secret: %d; want 200", st)
	}
	if st, _ := td.as(t, "admin", http.MethodGet, "/v1/status", ""); st != http.StatusUnauthorized {
		t.Errorf("the replaced admin secret: %d; want 401", st)
	}
	if st, _ := td.as(t, "reader", http.MethodGet, "/v1/status", ""); st != http.StatusOK {
		t.Errorf("another token after the rotation: %d; want 200", st)
	}
	// A file that vanished fails the reload; the last credentials stay.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if res := td.d.Reload(context.Background()); res.OK || strings.Contains(res.Error, next) {
		t.Errorf("reload without the token file: %+v; want a failure without the secret", res)
	}
	if st, _ := td.raw(t, http.MethodGet, "/v1/status", "", "Authorization", "Bearer "+next); st != http.StatusOK {
		t.Errorf("after a failed reload: %d; want the last good credentials", st)
	}
}

// TestRateLimitPerPrincipal: a token over its rate_limit gets 429 while
// another token goes on.
func TestRateLimitPerPrincipal(t *testing.T) {
	flood, calm := strings.Repeat("f", 32), strings.Repeat("c", 32)
	hash := func(s string) string { sum := sha256.Sum256([]byte(s)); return hex.EncodeToString(sum[:]) }
	td := startDaemon(t, securedHCL+fmt.Sprintf("token \"flood\" {\n  sha256 = %q\n  scopes = [\"read\"]\n  rate_limit = 2\n}\ntoken \"calm\" {\n  sha256 = %q\n  scopes = [\"read\"]\n}\n", hash(flood), hash(calm)))
	codes := map[int]int{}
	for range 5 {
		st, _ := td.raw(t, http.MethodGet, "/v1/status", "", "Authorization", "Bearer "+flood)
		codes[st]++
	}
	if codes[http.StatusTooManyRequests] == 0 || codes[http.StatusOK] == 0 {
		t.Fatalf("5 requests at once with rate_limit = 2: %v; want some 200 and some 429", codes)
	}
	st, b := td.raw(t, http.MethodGet, "/v1/status", "", "Authorization", "Bearer "+calm)
	if st != http.StatusOK {
		t.Fatalf("another token meanwhile: %d %s", st, b)
	}
	st, b = td.raw(t, http.MethodGet, "/v1/status", "", "Authorization", "Bearer "+flood)
	if st == http.StatusTooManyRequests {
		wantAPIError(t, st, b, http.StatusTooManyRequests, api.CodeRateLimited)
	}
}

// TestAuditToStdout: audit_log = "-" writes the lines to Options.Stdout.
func TestAuditToStdout(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(dir, "rpd.hcl"), strings.Replace(rpdBlock(state), "rpd {", "rpd {\n  audit_log = \"-\"", 1))
	writeFile(t, filepath.Join(dir, "main.hcl"), `pool "db" { slots = 1 }`+"\n")
	var out lockedBuffer
	td := startDaemonIn(t, dir, state, func(o *Options) { o.Stdout = &out })
	l, err := td.c.Acquire(context.Background(), "db", api.AcquireRequest{RequestID: "std-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := td.stop(); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, `"event":"request"`) || !strings.Contains(s, l.LeaseID) || !strings.Contains(s, `"request_id":"std-1"`) {
		t.Fatalf("stdout after a stop:\n%s\nwant the acquire's audit line", s)
	}
}

// lockedBuffer is a strings.Builder safe for the audit writer and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
