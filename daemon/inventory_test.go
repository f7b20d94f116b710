package daemon

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/client"
)

const inventoryHCL = `
pool "db" {
  slots = 3
}
budget "b" {}
vm_ceiling "v" {
  max   = 5
  grant = "immediate"
}
runner_class "medium" {
  cpu            = 2
  mem            = "4GiB"
  instance_types = ["c6i.*"]
}
`

func TestLeasesListsEveryGrant(t *testing.T) {
	td := startDaemon(t, inventoryHCL)
	ctx := ctxT(t)
	prio := 7
	lease, err := td.c.Acquire(ctx, "db", api.AcquireRequest{TaskID: "job-1", Slots: 2, Priority: &prio, TTLSeconds: 30})
	if err != nil {
		t.Fatal(err)
	}
	permit, err := td.c.AcquirePermit(ctx, "b", api.PermitRequest{ScanRingBytes: 1 << 20, DeltaCacheBytes: 2 << 20, Spill: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := td.c.PushUsage(ctx, "v", 1); err != nil {
		t.Fatal(err)
	}
	claim, err := td.c.RequestClaim(ctx, "v", api.ClaimRequest{WorkerID: "worker-x", Count: 2})
	if err != nil {
		t.Fatal(err)
	}

	all, err := td.c.Leases(ctx, client.LeaseFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 {
		t.Fatalf("GET /v1/leases = %+v, want the lease, the permit and the claim", all)
	}
	pg, perm, cl := all[0], all[1], all[2]
	if pg.Kind != api.KindPool || pg.ID != lease.LeaseID || pg.Component != "db" || pg.TaskID != "job-1" || pg.Slots != 2 || pg.Priority != 7 {
		t.Errorf("pool grant = %+v, want lease %s of job-1 (2 slots, priority 7)", pg, lease.LeaseID)
	}
	if pg.GrantedAt == nil || pg.HeartbeatAt == nil || !pg.HeartbeatAt.Equal(*pg.GrantedAt) || pg.ExpiresAt == nil || pg.ExpiresAt.Sub(*pg.GrantedAt) != 30*time.Second {
		t.Errorf("pool grant times: granted %v heartbeat %v expires %v; want heartbeat = granted, expiry 30s later", pg.GrantedAt, pg.HeartbeatAt, pg.ExpiresAt)
	}
	if perm.Kind != api.KindPermit || perm.ID != permit.LeaseID || perm.Component != "b" || perm.ScanRingBytes != 1<<20 || perm.DeltaCacheBytes != 2<<20 || !perm.Spill || perm.ExpiresAt == nil {
		t.Errorf("permit grant = %+v, want permit %s of budget b", perm, permit.LeaseID)
	}
	if cl.Kind != api.KindClaim || cl.ID != claim.ClaimID || cl.Component != "v" || cl.WorkerID != "worker-x" || cl.VMs != 2 || cl.Confirmed || cl.ExpiresAt == nil || cl.HeartbeatAt != nil {
		t.Errorf("claim grant = %+v, want claim %s of worker-x for 2 VMs, unconfirmed", cl, claim.ClaimID)
	}

	// A heartbeat moves heartbeat_at; a confirmed claim no longer expires.
	waitFor(t, "the wall clock to pass the grant", func() bool { return time.Now().After(*pg.GrantedAt) }) // the pool's clock is the wall clock
	if _, err := td.c.Heartbeat(ctx, lease.LeaseID); err != nil {
		t.Fatal(err)
	}
	if _, err := td.c.ConfirmClaim(ctx, "v", claim.ClaimID); err != nil {
		t.Fatal(err)
	}
	pools, _ := td.c.Leases(ctx, client.LeaseFilter{Pool: "db"})
	if len(pools) != 1 || !pools[0].HeartbeatAt.After(*pools[0].GrantedAt) {
		t.Errorf("after a heartbeat: %+v, want heartbeat_at after granted_at", pools)
	}
	claims, _ := td.c.Leases(ctx, client.LeaseFilter{Kind: api.KindClaim})
	if len(claims) != 1 || !claims[0].Confirmed || claims[0].ExpiresAt != nil {
		t.Errorf("confirmed claim = %+v, want confirmed with no expiry", claims)
	}

	for _, tc := range []struct {
		f    client.LeaseFilter
		want []string
	}{
		{client.LeaseFilter{Kind: api.KindPool}, []string{lease.LeaseID}},
		{client.LeaseFilter{Kind: api.KindPermit}, []string{permit.LeaseID}},
		{client.LeaseFilter{Pool: "db", TaskID: "job-1"}, []string{lease.LeaseID}},
		{client.LeaseFilter{Pool: "other"}, nil},
		{client.LeaseFilter{Budget: "b"}, []string{permit.LeaseID}},
		{client.LeaseFilter{Ceiling: "v"}, []string{claim.ClaimID}},
		{client.LeaseFilter{TaskID: "worker-x"}, []string{claim.ClaimID}},
		{client.LeaseFilter{TaskID: "nobody"}, nil},
	} {
		got, err := td.c.Leases(ctx, tc.f)
		if err != nil {
			t.Fatalf("%+v: %v", tc.f, err)
		}
		var ids []string
		for _, g := range got {
			ids = append(ids, g.ID)
		}
		if strings.Join(ids, ",") != strings.Join(tc.want, ",") {
			t.Errorf("filter %+v: got %v, want %v", tc.f, ids, tc.want)
		}
	}
	for _, q := range []string{"?kind=vm", "?pool=db&kind=permit", "?pool=db&budget=b"} {
		if code, body := td.raw(t, "GET", "/v1/leases"+q, ""); code != http.StatusBadRequest || !strings.Contains(body, "bad_request") {
			t.Errorf("GET /v1/leases%s = %d %s, want 400", q, code, body)
		}
	}

	// Every documented field is present, zeros and nulls included.
	_, body := td.raw(t, "GET", "/v1/leases?kind=pool", "")
	var raw struct{ Leases []map[string]json.RawMessage }
	if err := json.Unmarshal([]byte(body), &raw); err != nil || len(raw.Leases) != 1 {
		t.Fatalf("body %s: %v", body, err)
	}
	for _, k := range []string{"kind", "id", "component", "task_id", "worker_id", "priority", "slots", "vms", "scan_ring_bytes", "delta_cache_bytes", "spill", "confirmed", "granted_at", "heartbeat_at", "expires_at"} {
		if _, ok := raw.Leases[0][k]; !ok {
			t.Errorf("a pool grant has no %q: %s", k, body)
		}
	}

	// Released grants are gone.
	if err := td.c.Release(ctx, lease.LeaseID); err != nil {
		t.Fatal(err)
	}
	if err := td.c.Release(ctx, permit.LeaseID); err != nil {
		t.Fatal(err)
	}
	left, _ := td.c.Leases(ctx, client.LeaseFilter{})
	if len(left) != 1 || left[0].Kind != api.KindClaim {
		t.Fatalf("after the releases: %+v, want only the claim", left)
	}
}

func TestClassInventory(t *testing.T) {
	td := startDaemon(t, inventoryHCL)
	ctx := ctxT(t)
	for _, id := range []string{"i-1", "i-2", "i-3"} {
		if _, err := td.c.Offer(ctx, "medium", api.Instance{InstanceID: id, UsageClass: "spot", InstanceType: "c6i.large", CPU: 2, Mem: 4096, ResourceClass: "medium", Threshold: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := td.c.Pickup(ctx, "medium", api.PickupRequest{WorkerID: "w-1"})
	if err != nil {
		t.Fatal(err)
	}

	list, err := td.c.Classes(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("Classes = %+v, %v; want medium", list, err)
	}
	c := list[0]
	if c.Name != "medium" || c.Queue != "t-rp-medium" || c.Mode != "lease" || len(c.Errors) != 0 {
		t.Errorf("class = %+v", c)
	}
	// The class's maintenance pass (at start, then periodically) holds the
	// messages it receives in flight while it runs, then gives them back:
	// the depth settles at the two idle runners.
	waitFor(t, "the queue depth to read 2 visible", func() bool {
		list, err := td.c.Classes(ctx)
		if err != nil || len(list) != 1 {
			t.Fatalf("Classes = %+v, %v; want medium", list, err)
		}
		c = list[0]
		return c.Depth == (api.QueueDepth{Visible: 2})
	})
	if c.Instances != (api.InstanceCounts{Idle: 2, Claimed: 1}) {
		t.Errorf("instances = %+v, want 2 idle, 1 claimed", c.Instances)
	}
	if c.Outcomes["claimed"] != 1 || c.Outcomes["passed"] < 1 || c.Recent.Events["claimed"] != 1 {
		t.Errorf("outcomes %v, recent %+v: want one claim in both", c.Outcomes, c.Recent)
	}
	for _, k := range []string{"discarded_malformed", "exhausted_local", "requeued"} {
		if _, ok := c.Outcomes[k]; !ok {
			t.Errorf("outcomes lack %s (a zero must be present): %v", k, c.Outcomes)
		}
	}
	one, err := td.c.Class(ctx, "medium")
	if err != nil || one.Instances != c.Instances {
		t.Errorf("GET /v1/classes/medium = %+v, %v", one, err)
	}

	claimed, err := td.c.Instances(ctx, "medium", "claimed")
	if err != nil || len(claimed) != 1 || claimed[0].InstanceID != got.InstanceID || claimed[0].Owner != "w-1" || claimed[0].UpdatedAt == nil {
		t.Errorf("claimed instances = %+v, %v; want %s owned by w-1", claimed, err, got.InstanceID)
	}
	if all, err := td.c.Instances(ctx, "medium", ""); err != nil || len(all) != 3 {
		t.Errorf("all instances = %d, %v; want 3", len(all), err)
	}
	inst, err := td.c.Instance(ctx, got.InstanceID)
	if err != nil || inst.State != "claimed" || inst.Class != "medium" {
		t.Errorf("GET /v1/instances/%s = %+v, %v", got.InstanceID, inst, err)
	}

	for _, tc := range []struct {
		path string
		code int
	}{
		{"/v1/classes/nope", 404},
		{"/v1/classes/nope/instances", 404},
		{"/v1/classes/medium/instances?state=busy", 400},
		{"/v1/instances/i-404", 404},
	} {
		if code, body := td.raw(t, "GET", tc.path, ""); code != tc.code {
			t.Errorf("GET %s = %d %s, want %d", tc.path, code, body, tc.code)
		}
	}
}

func TestPageIsPublicButTheAPIIsNot(t *testing.T) {
	td := startDaemon(t, inventoryHCL, func(o *Options) { o.Token = "tok" })
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/", 200},
		{"HEAD", "/", 200},
		{"GET", "/ui/app.js", 200},
		{"GET", "/ui/missing.js", 404},
		{"POST", "/", 401},
		{"GET", "/v1/leases", 401},
		{"GET", "/v1/classes", 401},
		{"GET", "/v1/instances/x", 401},
	} {
		code, body := td.raw(t, tc.method, tc.path, "")
		if code != tc.code {
			t.Errorf("%s %s without the token = %d %s, want %d", tc.method, tc.path, code, body, tc.code)
		}
	}
	code, page := td.raw(t, "GET", "/", "")
	if code != 200 || strings.Contains(page, "medium") || strings.Contains(page, `"db"`) {
		t.Errorf("GET / = %d and carries data:\n%s", code, page)
	}
	if code, _ := td.raw(t, "GET", "/v1/leases", "", "Authorization", "Bearer tok"); code != 200 {
		t.Errorf("GET /v1/leases with the token = %d", code)
	}
}

// Pool, budget and ceiling status carry their holders (a count and a link
// in lists, the holders themselves for one) and waiters by priority.
func TestStatusCarriesHoldersAndWaiters(t *testing.T) {
	td := startDaemon(t, inventoryHCL)
	ctx := ctxT(t)
	lease, err := td.c.Acquire(ctx, "db", api.AcquireRequest{TaskID: "big", Slots: 3})
	if err != nil {
		t.Fatal(err)
	}
	wait := func(task string, prio, slots int) {
		go func() {
			p := prio
			_, _ = td.c.Acquire(ctx, "db", api.AcquireRequest{TaskID: task, Priority: &p, Slots: slots, WaitSeconds: 20})
		}()
	}
	wait("hi-1", 10, 1)
	wait("hi-2", 10, 2)
	wait("lo-1", -5, 1)
	deadline := time.Now().Add(10 * time.Second)
	var pool api.PoolDetail
	for {
		if pool, err = td.c.Pool(ctx, "db"); err != nil {
			t.Fatal(err)
		}
		if pool.Queued == 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if pool.Leases != 1 || len(pool.Holders) != 1 || pool.Holders[0].TaskID != "big" || pool.HoldersURL != "/v1/leases?pool=db" {
		t.Errorf("pool db = %+v, want one holder (big) and its link", pool)
	}
	want := []api.QueuedPriority{{Priority: 10, Requests: 2, Slots: 3}, {Priority: -5, Requests: 1, Slots: 1}}
	if len(pool.QueuedByPriority) != 2 {
		t.Fatalf("queued_by_priority = %+v, want %+v", pool.QueuedByPriority, want)
	}
	for i, q := range pool.QueuedByPriority {
		q.OldestWaitSeconds = 0
		if len(q.TaskIDs) != q.Requests {
			t.Errorf("queued_by_priority[%d] names %v; want the task IDs of its %d requests", i, q.TaskIDs, q.Requests)
		}
		q.TaskIDs = nil
		if !reflect.DeepEqual(q, want[i]) {
			t.Errorf("queued_by_priority[%d] = %+v, want %+v", i, q, want[i])
		}
	}

	if _, err := td.c.AcquirePermit(ctx, "b", api.PermitRequest{ScanRingBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if _, err := td.c.PushUsage(ctx, "v", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := td.c.RequestClaim(ctx, "v", api.ClaimRequest{WorkerID: "w-1", Count: 2}); err != nil {
		t.Fatal(err)
	}
	b, err := td.c.Budget(ctx, "b")
	if err != nil || b.Permits != 1 || len(b.Holders) != 1 || b.Holders[0].ScanRingBytes != 1<<20 || b.HoldersURL != "/v1/leases?budget=b" || b.QueuedByPriority == nil {
		t.Errorf("budget b = %+v, %v; want its permit", b, err)
	}
	v, err := td.c.Ceiling(ctx, "v")
	if err != nil || v.Claims != 1 || len(v.Holders) != 1 || v.Holders[0].WorkerID != "w-1" || v.HoldersURL != "/v1/leases?ceiling=v" {
		t.Errorf("ceiling v = %+v, %v; want w-1's claim", v, err)
	}

	st, err := td.c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st.Components.Pools {
		if p.Name == "db" && (p.Leases != 1 || len(p.QueuedByPriority) != 2) {
			t.Errorf("status pool db = %+v", p)
		}
		if p.Name == "default_pool" && (p.QueuedByPriority == nil || p.Leases != 0) {
			t.Errorf("status default_pool = %+v, want an empty queue list", p)
		}
	}
	if len(st.Components.Budgets) != 1 || st.Components.Budgets[0].Permits != 1 || len(st.Components.Ceilings) != 1 || st.Components.Ceilings[0].Claims != 1 {
		t.Errorf("status budgets %+v ceilings %+v", st.Components.Budgets, st.Components.Ceilings)
	}
	// Lists carry counts and links, never an empty queue as null.
	_, body := td.raw(t, "GET", "/v1/pools", "")
	if strings.Contains(body, `"queued_by_priority":null`) || !strings.Contains(body, `"holders_url":"/v1/leases?pool=default_pool"`) {
		t.Errorf("GET /v1/pools = %s", body)
	}
	if err := td.c.Release(ctx, lease.LeaseID); err != nil {
		t.Fatal(err)
	}
}
