package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/client"
	"github.com/rpdhq/rpd/daemon/internal/security"
)

const poolsHCL = `
pool "db" {
  slots = 2
}
priority "critical" { weight = 100 }
`

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func apiErr(t *testing.T, err error) *api.Error {
	t.Helper()
	var ae *api.Error
	if !errors.As(err, &ae) {
		t.Fatalf("got error %v (%T), want an *api.Error", err, err)
	}
	return ae
}

func TestPoolAcquireHeartbeatRelease(t *testing.T) {
	td := startDaemon(t, poolsHCL)
	ctx := ctxT(t)
	l, err := td.c.Acquire(ctx, "db", api.AcquireRequest{TaskID: "job-1", Slots: 2, PriorityName: "critical", TTLSeconds: 30})
	if err != nil {
		t.Fatal(err)
	}
	if l.LeaseID == "" || l.Kind != api.KindPool || l.Pool != "db" || l.Slots != 2 || l.Priority != 100 || l.TTLSeconds != 30 {
		t.Fatalf("lease = %+v", l)
	}
	if until := time.Until(l.ExpiresAt); until < 25*time.Second || until > 31*time.Second {
		t.Fatalf("expires in %v, want about 30s", until)
	}
	st, _ := td.c.Pool(ctx, "db")
	if st.Used != 2 || st.Available != 0 {
		t.Fatalf("pool after acquire = %+v, want used 2 available 0", st)
	}
	// Full: an answer-at-once request is refused with 409.
	_, err = td.c.Acquire(ctx, "db", api.AcquireRequest{TaskID: "job-2"})
	if ae := apiErr(t, err); ae.Status != http.StatusConflict || ae.Code != api.CodeUnavailable {
		t.Fatalf("acquire on a full pool = %v, want 409 unavailable", err)
	}
	// A bounded wait times out with 408.
	start := time.Now()
	_, err = td.c.Acquire(ctx, "db", api.AcquireRequest{TaskID: "job-2", WaitSeconds: 0.2})
	if ae := apiErr(t, err); ae.Status != http.StatusRequestTimeout || ae.Code != api.CodeTimeout {
		t.Fatalf("waiting acquire = %v, want 408 timeout", err)
	}
	if el := time.Since(start); el < 150*time.Millisecond {
		t.Fatalf("a 0.2 s wait answered after %v", el)
	}
	hb, err := td.c.Heartbeat(ctx, l.LeaseID)
	if err != nil {
		t.Fatal(err)
	}
	if !hb.ExpiresAt.After(l.ExpiresAt) {
		t.Fatalf("heartbeat did not extend the lease: %v -> %v", l.ExpiresAt, hb.ExpiresAt)
	}
	if err := td.c.Release(ctx, l.LeaseID); err != nil {
		t.Fatal(err)
	}
	if st, _ := td.c.Pool(ctx, "db"); st.Used != 0 {
		t.Fatalf("pool after release = %+v", st)
	}
	// The lease is gone: heartbeat and release are 404.
	if _, err := td.c.Heartbeat(ctx, l.LeaseID); apiErr(t, err).Status != http.StatusNotFound {
		t.Fatalf("heartbeat of a released lease = %v, want 404", err)
	}
	if err := td.c.Release(ctx, l.LeaseID); apiErr(t, err).Status != http.StatusNotFound {
		t.Fatalf("second release = %v, want 404", err)
	}
	list, err := td.c.Pools(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "db" || list[1].Name != "default_pool" {
		t.Fatalf("pools = %+v, %v", list, err)
	}
}

func TestLongPollGrantedOnRelease(t *testing.T) {
	td := startDaemon(t, poolsHCL)
	ctx := ctxT(t)
	l, err := td.c.Acquire(ctx, "db", api.AcquireRequest{Slots: 2})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := td.c.Acquire(ctx, "db", api.AcquireRequest{TaskID: "waiter", WaitSeconds: 10})
		got <- err
	}()
	waitFor(t, "the waiter to queue", func() bool { st, _ := td.c.Pool(ctx, "db"); return st.Queued == 1 })
	if err := td.c.Release(ctx, l.LeaseID); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not granted within 5s of the release")
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	td := startDaemon(t, poolsHCL+`pool "capped" {
  slots      = 1
  max_queued = 1
}
`)
	ctx := ctxT(t)
	// Fill "capped" and queue one waiter, so the next waiter is 429.
	hold, err := td.c.Acquire(ctx, "capped", api.AcquireRequest{})
	if err != nil {
		t.Fatal(err)
	}
	waiterCtx, cancelWaiter := context.WithCancel(ctx)
	defer cancelWaiter()
	go func() { _, _ = td.c.Acquire(waiterCtx, "capped", api.AcquireRequest{WaitSeconds: 30}) }()
	waitFor(t, "the capped pool's waiter", func() bool { st, _ := td.c.Pool(ctx, "capped"); return st.Queued == 1 })

	huge := `{"task_id":"` + strings.Repeat("x", api.MaxBodyBytes) + `"}`
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"malformed JSON", "POST", "/v1/pools/db/acquire", `{"slots":`, 400, api.CodeBadRequest},
		{"not an object", "POST", "/v1/pools/db/acquire", `[1,2]`, 400, api.CodeBadRequest},
		{"two values", "POST", "/v1/pools/db/acquire", `{} {}`, 400, api.CodeBadRequest},
		{"unknown field", "POST", "/v1/pools/db/acquire", `{"slot":1}`, 400, api.CodeBadRequest},
		{"wrong type", "POST", "/v1/pools/db/acquire", `{"slots":"two"}`, 400, api.CodeBadRequest},
		{"negative slots", "POST", "/v1/pools/db/acquire", `{"slots":-1}`, 400, api.CodeBadRequest},
		{"negative wait", "POST", "/v1/pools/db/acquire", `{"wait_seconds":-1}`, 400, api.CodeBadRequest},
		{"wait too long", "POST", "/v1/pools/db/acquire", `{"wait_seconds":100000}`, 400, api.CodeBadRequest},
		{"ttl too short", "POST", "/v1/pools/db/acquire", `{"ttl_seconds":0.01}`, 400, api.CodeBadRequest},
		{"both priorities", "POST", "/v1/pools/db/acquire", `{"priority":1,"priority_name":"critical"}`, 400, api.CodeBadRequest},
		{"unknown priority", "POST", "/v1/pools/db/acquire", `{"priority_name":"urgent"}`, 400, api.CodeBadRequest},
		{"huge body", "POST", "/v1/pools/db/acquire", huge, 413, api.CodeBodyTooLarge},
		{"unknown pool", "POST", "/v1/pools/nope/acquire", `{}`, 404, api.CodeNotFound},
		{"unknown pool status", "GET", "/v1/pools/nope", ``, 404, api.CodeNotFound},
		{"more slots than the pool", "POST", "/v1/pools/db/acquire", `{"slots":3}`, 409, api.CodeUnavailable},
		{"queue full", "POST", "/v1/pools/capped/acquire", `{"wait_seconds":5}`, 429, api.CodeQueueFull},
		{"unknown lease", "POST", "/v1/leases/db.nope-1/heartbeat", ``, 404, api.CodeNotFound},
		{"unknown permit", "DELETE", "/v1/leases/b~nope-1", ``, 404, api.CodeNotFound},
		{"unknown budget", "POST", "/v1/budgets/nope/permits", `{"scan_ring_bytes":1}`, 404, api.CodeNotFound},
		{"unknown ceiling", "POST", "/v1/ceilings/nope/claims", `{"worker_id":"w"}`, 404, api.CodeNotFound},
		{"unknown class", "POST", "/v1/classes/nope/pickup", `{}`, 404, api.CodeNotFound},
		{"unknown route", "GET", "/v1/nothing", ``, 404, api.CodeNotFound},
		{"wrong method", "DELETE", "/v1/pools/db", ``, 405, api.CodeMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := td.raw(t, tc.method, tc.path, tc.body)
			if status != tc.status {
				t.Fatalf("status = %d, want %d; body %s", status, tc.status, body)
			}
			var eb api.ErrorBody
			if err := json.Unmarshal([]byte(body), &eb); err != nil {
				t.Fatalf("body is not the JSON error model: %v: %s", err, body)
			}
			if eb.Error.Code != tc.code || eb.Error.Message == "" {
				t.Fatalf("error = %+v, want code %q and a message", eb.Error, tc.code)
			}
		})
	}
	// Nothing changed: db is still empty, capped still holds 1 with 1 queued.
	if st, _ := td.c.Pool(ctx, "db"); st.Used != 0 || st.Queued != 0 {
		t.Fatalf("db after bad input = %+v, want untouched", st)
	}
	if st, _ := td.c.Pool(ctx, "capped"); st.Used != 1 || st.Queued != 1 {
		t.Fatalf("capped after bad input = %+v, want used 1 queued 1", st)
	}
	_ = hold
}

func TestTokenRequired(t *testing.T) {
	td := startDaemon(t, poolsHCL, func(o *Options) { o.Token = "s3cret" })
	for _, tc := range []struct {
		name, auth string
		status     int
	}{
		{"missing", "", 401},
		{"wrong", "Bearer guess", 401},
		{"wrong scheme", "Basic s3cret", 401},
		{"prefix of the token", "Bearer s3cre", 401},
		{"right", "Bearer s3cret", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := td.raw(t, "GET", "/v1/status", "", "Authorization", tc.auth)
			if status != tc.status {
				t.Fatalf("status = %d, want %d: %s", status, tc.status, body)
			}
			if tc.status == 401 && strings.Contains(body, "s3cret") {
				t.Fatal("the 401 answer leaks the token")
			}
		})
	}
	// A wrong token changes nothing: the acquire is refused before decoding.
	status, _ := td.raw(t, "POST", "/v1/pools/db/acquire", `{}`, "Authorization", "Bearer guess")
	if status != 401 {
		t.Fatalf("acquire with a wrong token: %d, want 401", status)
	}
	if st, _ := td.c.Pool(ctxT(t), "db"); st.Used != 0 {
		t.Fatalf("a refused acquire took a slot: %+v", st)
	}
	// Probes need no token.
	if status, _ := td.raw(t, "GET", "/healthz", ""); status != 200 {
		t.Fatalf("/healthz without a token: %d", status)
	}
	if status, _ := td.raw(t, "GET", "/readyz", ""); status != 200 {
		t.Fatalf("/readyz without a token: %d", status)
	}
}

func TestRefusesNonLoopbackWithoutToken(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	writeFile(t, dir+"/rpd.hcl", rpdBlock(state))
	// The address is never bound: New refuses before listening.
	_, err := New(context.Background(), Options{Mode: ModeWatch, Path: dir, Listen: "0.0.0.0:0"})
	if err == nil || !strings.Contains(err.Error(), "without a bearer token") {
		t.Fatalf("New on 0.0.0.0 without a token = %v, want a refusal naming the token", err)
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7070": true, "localhost:7070": true, "[::1]:7070": true, "127.0.0.2:1": true,
		"0.0.0.0:7070": false, ":7070": false, "10.0.0.1:7070": false, "example.com:80": false, "garbage": false,
	} {
		if got := security.IsLoopback(addr); got != want {
			t.Errorf("isLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

func TestBudgetPermits(t *testing.T) {
	clock := newFakeClock()
	td := startDaemon(t, `
budget "scanner" {
  scan_ring   = "1MiB"
  delta_cache = "2MiB"
  spill_slots = 1
}
`, func(o *Options) { o.Clock = clock })
	ctx := ctxT(t)
	p, err := td.c.AcquirePermit(ctx, "scanner", api.PermitRequest{ScanRingBytes: 1 << 20, DeltaCacheBytes: 1 << 20, Spill: true, TTLSeconds: 10})
	if err != nil {
		t.Fatal(err)
	}
	if p.Kind != api.KindPermit || p.Budget != "scanner" || !p.Spill || p.ScanRingBytes != 1<<20 {
		t.Fatalf("permit = %+v", p)
	}
	st, _ := td.c.Budget(ctx, "scanner")
	if st.ScanRing.Available != 0 || st.DeltaCache.Available != 1<<20 || st.SpillSlots.Available != 0 || st.Permits != 1 {
		t.Fatalf("budget after the permit = %+v", st)
	}
	// All or nothing: a second permit needing scan ring is refused and
	// takes no delta cache.
	_, err = td.c.AcquirePermit(ctx, "scanner", api.PermitRequest{ScanRingBytes: 1, DeltaCacheBytes: 1})
	if ae := apiErr(t, err); ae.Status != 409 {
		t.Fatalf("second permit = %v, want 409", err)
	}
	_, err = td.c.AcquirePermit(ctx, "scanner", api.PermitRequest{ScanRingBytes: 2 << 20})
	if ae := apiErr(t, err); ae.Status != 409 || !strings.Contains(ae.Message, "never") {
		t.Fatalf("permit larger than the budget = %v, want 409 saying it can never be granted", err)
	}
	if st, _ := td.c.Budget(ctx, "scanner"); st.DeltaCache.Available != 1<<20 {
		t.Fatalf("a refused permit took delta cache: %+v", st)
	}
	// Heartbeats keep it; without them the TTL releases it.
	clock.Advance(8 * time.Second)
	if _, err := td.c.Heartbeat(ctx, p.LeaseID); err != nil {
		t.Fatal(err)
	}
	clock.Advance(8 * time.Second)
	if st, _ := td.c.Budget(ctx, "scanner"); st.Permits != 1 {
		t.Fatalf("a heartbeated permit expired: %+v", st)
	}
	clock.Advance(3 * time.Second)
	st, _ = td.c.Budget(ctx, "scanner")
	if st.Permits != 0 || st.ScanRing.Available != 1<<20 || st.SpillSlots.Available != 1 {
		t.Fatalf("budget after the TTL ran out = %+v, want full", st)
	}
	if _, err := td.c.Heartbeat(ctx, p.LeaseID); apiErr(t, err).Status != 404 {
		t.Fatalf("heartbeat of an expired permit = %v, want 404", err)
	}
	// Release through the budget route.
	p2, err := td.c.AcquirePermit(ctx, "scanner", api.PermitRequest{DeltaCacheBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := td.c.ReleasePermit(ctx, "other", p2.LeaseID); apiErr(t, err).Status != 404 {
		t.Fatalf("release under another budget's name = %v, want 404", err)
	}
	if err := td.c.ReleasePermit(ctx, "scanner", p2.LeaseID); err != nil {
		t.Fatal(err)
	}
	if list, err := td.c.Budgets(ctx); err != nil || len(list) != 1 || list[0].Permits != 0 || list[0].DeltaCache.Available != 2<<20 {
		t.Fatalf("budgets = %+v, %v", list, err)
	}
	// A waiting permit is granted when the holder releases.
	p3, _ := td.c.AcquirePermit(ctx, "scanner", api.PermitRequest{ScanRingBytes: 1 << 20})
	got := make(chan error, 1)
	go func() {
		_, err := td.c.AcquirePermit(ctx, "scanner", api.PermitRequest{ScanRingBytes: 1, WaitSeconds: 10})
		got <- err
	}()
	waitFor(t, "the permit waiter", func() bool { st, _ := td.c.Budget(ctx, "scanner"); return st.Queued == 1 })
	if err := td.c.Release(ctx, p3.LeaseID); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiting permit: %v", err)
	}
	if _, err := td.c.AcquirePermit(ctx, "scanner", api.PermitRequest{}); apiErr(t, err).Status != 400 {
		t.Fatalf("an empty permit request = %v, want 400", err)
	}
}

func TestCeilingClaims(t *testing.T) {
	td := startDaemon(t, `
vm_ceiling "vms" {
  max   = 3
  grant = "immediate"
}
`)
	ctx := ctxT(t)
	// No usage figure yet: stale, nothing granted. (A bounded wait leaves
	// nothing behind; wait_seconds 0 would leave a ticket for the worker.)
	_, err := td.c.RequestClaim(ctx, "vms", api.ClaimRequest{WorkerID: "w0", WaitSeconds: 0.1})
	if ae := apiErr(t, err); ae.Status != 408 {
		t.Fatalf("claim before any usage figure = %v, want 408", err)
	}
	st, err := td.c.PushUsage(ctx, "vms", 1)
	if err != nil || st.ProviderActive != 1 || st.Stale {
		t.Fatalf("push usage = %+v, %v", st, err)
	}
	c1, err := td.c.RequestClaim(ctx, "vms", api.ClaimRequest{WorkerID: "w1", Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	if c1.Count != 2 || c1.Ceiling != "vms" || c1.ClaimID == "" {
		t.Fatalf("claim = %+v", c1)
	}
	// wait_seconds 0 is the seed's "ask later": it leaves a ticket for
	// w-try that a later figure may grant.
	if _, err := td.c.RequestClaim(ctx, "vms", api.ClaimRequest{WorkerID: "w-try"}); apiErr(t, err).Status != 409 {
		t.Fatalf("claim beyond max = %v, want 409", err)
	}
	if st, _ := td.c.Ceiling(ctx, "vms"); st.Effective != 3 || st.Available != 0 {
		t.Fatalf("ceiling = %+v, want effective 3", st)
	}
	conf, err := td.c.ConfirmClaim(ctx, "vms", c1.ClaimID)
	if err != nil || !conf.Confirmed {
		t.Fatalf("confirm = %+v, %v", conf, err)
	}
	c2ch := make(chan error, 1)
	go func() {
		_, err := td.c.RequestClaim(ctx, "vms", api.ClaimRequest{WorkerID: "w2", WaitSeconds: 10})
		c2ch <- err
	}()
	waitFor(t, "the claim waiter", func() bool { st, _ := td.c.Ceiling(ctx, "vms"); return st.Queued == 2 })
	// The provider now shows the two confirmed VMs gone (finished): room.
	if _, err := td.c.PushUsage(ctx, "vms", 1); err != nil {
		t.Fatal(err)
	}
	if err := <-c2ch; err != nil {
		t.Fatalf("waiting claim: %v", err)
	}
	// w-try asks again and gets the claim its ticket was granted.
	if c, err := td.c.RequestClaim(ctx, "vms", api.ClaimRequest{WorkerID: "w-try"}); err != nil || c.Count != 1 {
		t.Fatalf("w-try asking again = %+v, %v; want its granted ticket", c, err)
	}
	list, _ := td.c.Ceilings(ctx)
	if len(list) != 1 || list[0].LocalClaims != 2 {
		t.Fatalf("ceilings = %+v", list)
	}
	if err := td.c.CancelClaim(ctx, "vms", "zz"); apiErr(t, err).Status != 404 {
		t.Fatalf("cancel of a bad claim ID = %v, want 404", err)
	}
	if err := td.c.CancelClaim(ctx, "vms", c1.ClaimID); apiErr(t, err).Status != 404 {
		t.Fatalf("cancel of a retired claim = %v, want 404", err)
	}
	for _, body := range []string{`{}`, `{"active":-1}`, `{"active":"x"}`} {
		if status, _ := td.raw(t, "PUT", "/v1/ceilings/vms/usage", body); status != 400 {
			t.Fatalf("PUT usage %s = %d, want 400", body, status)
		}
	}
	if status, _ := td.raw(t, "POST", "/v1/ceilings/vms/claims", `{"count":1}`); status != 400 {
		t.Fatalf("claim without worker_id = %d, want 400", status)
	}
}

func TestMetrics(t *testing.T) {
	td := startDaemon(t, poolsHCL+`budget "b" {}
vm_ceiling "v" { max = 2 }
`)
	ctx := ctxT(t)
	if _, err := td.c.Acquire(ctx, "db", api.AcquireRequest{}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, td.dir+"/main.hcl", "pool {")
	td.d.Reload(ctx)
	status, body := td.raw(t, "GET", "/metrics", "")
	if status != 200 {
		t.Fatalf("/metrics: %d", status)
	}
	for _, want := range []string{
		"rpd_config_last_reload_successful 0",
		"rpd_config_last_reload_success_timestamp_seconds ",
		`rpd_config_reloads_total{result="success"} 1`,
		`rpd_config_reloads_total{result="failure"} 1`,
		"rpd_config_version 1",
		`rpd_pool_slots_used{pool="db"} 1`,
		`rpd_pool_events_total{event="granted",pool="db"} 1`,
		`rpd_budget_bytes{budget="b",resource="scan_ring"} 2.68435456e+08`,
		`rpd_vm_ceiling_max{vm_ceiling="v"} 2`,
		`rpd_vm_ceiling_stale{vm_ceiling="v"} 1`,
		`rpd_pickup_events_total`,
	} {
		if want == "rpd_pickup_events_total" {
			continue // no runner class in this configuration
		}
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestShutdownDrainsLongPoll(t *testing.T) {
	td := startDaemon(t, poolsHCL)
	ctx := ctxT(t)
	if _, err := td.c.Acquire(ctx, "db", api.AcquireRequest{Slots: 2}); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := td.c.Acquire(ctx, "db", api.AcquireRequest{WaitSeconds: 60})
		got <- err
	}()
	waitFor(t, "the waiter", func() bool { st, _ := td.c.Pool(ctx, "db"); return st.Queued == 1 })
	start := time.Now()
	if err := td.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("shutdown with a 60 s long-poll in flight took %v", el)
	}
	select {
	case err := <-got:
		if ae := apiErr(t, err); ae.Status != http.StatusServiceUnavailable {
			t.Fatalf("the long-poll during shutdown = %v, want 503", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the long-poll did not answer during shutdown")
	}
	if err := td.c.Health(ctx); err == nil {
		t.Fatal("the daemon still answers after shutdown")
	}
}

func TestClientErrors(t *testing.T) {
	if _, err := client.New(""); err == nil {
		t.Fatal("client.New(\"\") succeeded")
	}
	if _, err := client.New("ftp://x"); err == nil {
		t.Fatal("client.New with an ftp URL succeeded")
	}
	c, _ := client.New("127.0.0.1:1", client.WithRetry(0)) // nothing listens on port 1
	if err := c.Health(context.Background()); err == nil {
		t.Fatal("Health against a closed port succeeded")
	}
}
