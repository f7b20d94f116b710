package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/client"
	"github.com/rpdhq/rpd/daemon/internal/security"
)

// haPair is two in-process daemons of one stack sharing a SQLite file,
// with a 2 s lease: a is the leader, b the standby.
func haPair(t *testing.T, body string) (a, b *testDaemon) {
	t.Helper()
	dir, state := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(dir, "rpd.hcl"), fmt.Sprintf("rpd {\n  stack = \"t\"\n  ha {\n    lease = \"2s\"\n  }\n  backend \"local\" { path = %q }\n}\n", filepath.Join(state, "state.db")))
	writeFile(t, filepath.Join(dir, "main.hcl"), body)
	a = startDaemonIn(t, dir, state)
	b = startDaemonIn(t, dir, state)
	if r := a.d.Status().Role; r != "leader" {
		t.Fatalf("the first daemon is %s; want leader", r)
	}
	if r := b.d.Status().Role; r != "standby" {
		t.Fatalf("the second daemon is %s; want standby", r)
	}
	return a, b
}

func TestStandbyForwardsToTheLeader(t *testing.T) {
	a, b := haPair(t, "pool \"db\" {\n  slots = 1\n}\nbudget \"scan\" {\n  scan_ring = \"1MiB\"\n}\n")
	ctx := ctxT(t)
	st := b.d.Status()
	if st.Leader == nil || st.Leader.Address != "http://"+a.addr || st.Epoch != 0 || !st.ConfigMatchesLeader {
		t.Fatalf("standby status: %+v; want leader http://%s, epoch 0, same configuration", st.Leader, a.addr)
	}
	l, err := b.c.Acquire(ctx, "db", api.AcquireRequest{TaskID: "via-standby"})
	if err != nil {
		t.Fatalf("acquire through the standby: %v", err)
	}
	if ps, _ := a.c.Pool(ctx, "db"); ps.Used != 1 {
		t.Fatalf("the leader counts %+v; want the forwarded grant", ps)
	}
	if _, err := a.c.Acquire(ctx, "db", api.AcquireRequest{}); !client.IsCode(err, api.CodeUnavailable) {
		t.Fatalf("second grant of a 1-slot pool at the leader = %v; want 409", err)
	}
	// A long-poll forwarded through the standby is granted when the slot frees.
	got := make(chan error, 1)
	go func() {
		_, err := b.c.Acquire(ctx, "db", api.AcquireRequest{WaitSeconds: 20})
		got <- err
	}()
	waitFor(t, "the forwarded waiter", func() bool { ps, _ := a.c.Pool(ctx, "db"); return ps.Queued == 1 })
	if err := b.c.Release(ctx, l.LeaseID); err != nil {
		t.Fatalf("release through the standby: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the forwarded long-poll: %v", err)
	}
	// Budgets forward too; pickup and status are the standby's own.
	if _, err := b.c.AcquirePermit(ctx, "scan", api.PermitRequest{ScanRingBytes: 1024}); err != nil {
		t.Fatalf("permit through the standby: %v", err)
	}
	if n := a.d.Status().Components.Budgets[0].Permits; n != 1 {
		t.Fatalf("the leader holds %d permits; want 1", n)
	}
	// A request already forwarded once is not forwarded again.
	req, _ := http.NewRequest(http.MethodGet, "http://"+b.addr+"/v1/pools/db", nil)
	req.Header.Set(security.ForwardedHeader, "someone")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a forwarded request at the standby = %d; want 503", resp.StatusCode)
	}
	if err := b.c.Ready(ctx); err != nil {
		t.Fatalf("the standby with a live leader is not ready: %v", err)
	}
}

func TestRequestIDReturnsTheSameGrant(t *testing.T) {
	a, b := haPair(t, "pool \"db\" {\n  slots = 2\n}\nbudget \"scan\" {\n  scan_ring = \"1MiB\"\n}\nvm_ceiling \"vms\" {\n  max   = 4\n  grant = \"immediate\"\n}\n")
	ctx := ctxT(t)
	if _, err := a.c.PushUsage(ctx, "vms", 0); err != nil {
		t.Fatal(err)
	}
	l1, err := a.c.Acquire(ctx, "db", api.AcquireRequest{RequestID: "req-1"})
	if err != nil {
		t.Fatal(err)
	}
	l2, err := b.c.Acquire(ctx, "db", api.AcquireRequest{RequestID: "req-1"})
	if err != nil || l2.LeaseID != l1.LeaseID {
		t.Fatalf("the retried acquire = %+v, %v; want lease %s again", l2, err, l1.LeaseID)
	}
	p1, err := a.c.AcquirePermit(ctx, "scan", api.PermitRequest{ScanRingBytes: 1024, RequestID: "req-2"})
	if err != nil {
		t.Fatal(err)
	}
	if p2, err := a.c.AcquirePermit(ctx, "scan", api.PermitRequest{ScanRingBytes: 1024, RequestID: "req-2"}); err != nil || p2.LeaseID != p1.LeaseID {
		t.Fatalf("the retried permit = %+v, %v; want %s", p2, err, p1.LeaseID)
	}
	c1, err := a.c.RequestClaim(ctx, "vms", api.ClaimRequest{WorkerID: "w", RequestID: "req-3"})
	if err != nil {
		t.Fatal(err)
	}
	if c2, err := a.c.RequestClaim(ctx, "vms", api.ClaimRequest{WorkerID: "w", RequestID: "req-3"}); err != nil || c2.ClaimID != c1.ClaimID {
		t.Fatalf("the retried claim = %+v, %v; want %s", c2, err, c1.ClaimID)
	}
	if ps, _ := a.c.Pool(ctx, "db"); ps.Used != 1 {
		t.Fatalf("pool after a retried acquire: %+v; want 1 used", ps)
	}
	for _, bad := range []string{"has/slash", "dots.not", string(make([]byte, 200))} {
		if _, err := a.c.Acquire(ctx, "db", api.AcquireRequest{RequestID: bad}); !client.IsCode(err, api.CodeBadRequest) {
			t.Errorf("request_id %q = %v; want 400", bad, err)
		}
	}

	// After a failover the new leader restored them under their IDs: the
	// same request_ids still find them.
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the standby to take over", func() bool { return b.d.Status().Role == "leader" })
	if l3, err := b.c.Acquire(ctx, "db", api.AcquireRequest{RequestID: "req-1"}); err != nil || l3.LeaseID != l1.LeaseID {
		t.Fatalf("the acquire retried after the failover = %+v, %v; want %s", l3, err, l1.LeaseID)
	}
	if p3, err := b.c.AcquirePermit(ctx, "scan", api.PermitRequest{ScanRingBytes: 1024, RequestID: "req-2"}); err != nil || p3.LeaseID != p1.LeaseID {
		t.Fatalf("the permit retried after the failover = %+v, %v; want %s", p3, err, p1.LeaseID)
	}
	if c3, err := b.c.RequestClaim(ctx, "vms", api.ClaimRequest{WorkerID: "w", RequestID: "req-3"}); err != nil || c3.ClaimID != c1.ClaimID {
		t.Fatalf("the claim retried after the failover = %+v, %v; want %s", c3, err, c1.ClaimID)
	}
	if ps, _ := b.c.Pool(ctx, "db"); ps.Used != 1 {
		t.Fatalf("pool after the failover: %+v; want 1 used", ps)
	}
}

// Concurrent retries of one request_id get one grant between them.
func TestRequestIDRace(t *testing.T) {
	td := startDaemon(t, "pool \"db\" {\n  slots = 8\n}\n")
	ctx := ctxT(t)
	var wg sync.WaitGroup
	ids := make(chan string, 16)
	for range 16 {
		wg.Go(func() {
			l, err := td.c.Acquire(ctx, "db", api.AcquireRequest{RequestID: "same", WaitSeconds: 5})
			if err != nil {
				t.Errorf("acquire: %v", err)
				return
			}
			ids <- l.LeaseID
		})
	}
	wg.Wait()
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		seen[id] = true
	}
	if ps, _ := td.c.Pool(ctx, "db"); len(seen) != 1 || ps.Used != 1 {
		t.Fatalf("16 racing requests with one request_id got leases %v and pool %+v; want one lease, 1 used", seen, ps)
	}
}

// A paused leader's grants are refused by the fence once another daemon
// took the lease; it steps down (Run returns ErrSteppedDown).
func TestFencedLeaderStepsDown(t *testing.T) {
	a, b := haPair(t, "pool \"db\" {\n  slots = 1\n}\n")
	ctx := ctxT(t)
	// b takes the lease behind a's back, as after a pause: the record is
	// forced to b's holder at a newer epoch.
	lb := b.d.backend.Leader
	cur, err := lb.ReadLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := lb.ReleaseLeader(ctx, cur.Holder, cur.Epoch); err != nil {
		t.Fatal(err)
	}
	if _, held, err := lb.AcquireLeader(ctx, backend.LeaderClaim{Holder: "intruder", Address: "http://127.0.0.1:1", Mode: "watch", Lease: time.Minute}); err != nil || !held {
		t.Fatalf("take the lease: %v %v", held, err)
	}
	// Its next grant is fenced (503 not_leader), unless its renewal saw
	// the intruder first and it is already stepping down (503 not_ready):
	// either way, no grant.
	_, err = a.c.Acquire(ctx, "db", api.AcquireRequest{})
	if !client.IsCode(err, api.CodeNotLeader) && !client.IsCode(err, api.CodeNotReady) {
		t.Fatalf("acquire at the fenced leader = %v; want 503", err)
	}
	select {
	case <-a.d.elector.Lost:
	case <-time.After(10 * time.Second):
		t.Fatal("the fenced leader did not step down")
	}
	if err := a.stop(); !errors.Is(err, ErrSteppedDown) {
		t.Fatalf("Run of the fenced leader = %v; want ErrSteppedDown", err)
	}
	if ps, _ := b.d.arb.Pool(context.Background(), "db"); ps.Used != 0 {
		t.Fatalf("the standby counts %+v", ps)
	}
}

// Pickup is served by every replica: two daemons hand out the instances
// of one class between them, each exactly once.
func TestPickupScalesOutAcrossReplicas(t *testing.T) {
	a, b := haPair(t, classHCL)
	ctx := ctxT(t)
	const n = 20
	threshold := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	for i := range n {
		inst := api.Instance{InstanceID: fmt.Sprintf("i-%d", i), UsageClass: "spot", InstanceType: "c6i.large", CPU: 2, Mem: 4096, ResourceClass: "medium", Threshold: threshold}
		if _, err := []*testDaemon{a, b}[i%2].c.Offer(ctx, "medium", inst); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	got := map[string]string{}
	served := map[*testDaemon]int{}
	// One pickup from each replica first: the concurrent ones below may
	// all land on whichever replica's workers start first.
	for i, td := range []*testDaemon{a, b} {
		in, err := td.c.Pickup(ctx, "medium", api.PickupRequest{WorkerID: fmt.Sprintf("first-%d", i)})
		if err != nil {
			t.Fatalf("pickup from replica %d: %v", i, err)
		}
		got[in.InstanceID] = in.Owner
		served[td]++
	}
	var wg sync.WaitGroup
	for w := range 8 {
		td := []*testDaemon{a, b}[w%2]
		wg.Go(func() {
			for k := 0; ; k++ {
				// worker_id is the retry key: one per job.
				in, err := td.c.Pickup(context.Background(), "medium", api.PickupRequest{WorkerID: fmt.Sprintf("w%d-%d", w, k)})
				if client.IsCode(err, api.CodeExhausted) {
					return
				}
				if err != nil {
					t.Errorf("pickup: %v", err)
					return
				}
				mu.Lock()
				if prev, dup := got[in.InstanceID]; dup {
					t.Errorf("instance %s picked up twice (%s and %s)", in.InstanceID, prev, in.Owner)
				}
				got[in.InstanceID] = in.Owner
				served[td]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(got) != n || served[a] == 0 || served[b] == 0 {
		t.Fatalf("picked up %d of %d instances, %d by the leader and %d by the standby; want all, by both", len(got), n, served[a], served[b])
	}
}

func TestArbitratedRoutes(t *testing.T) {
	for path, want := range map[string]bool{
		"/v1/pools": true, "/v1/pools/db/acquire": true, "/v1/leases": true, "/v1/leases/db.x-1/heartbeat": true,
		"/v1/budgets/scan/permits": true, "/v1/ceilings": true, "/v1/ceilings/vms/usage": true,
		"/v1/poolsx": false, "/v1/classes/medium/pickup": false, "/v1/instances/i-1/release": false,
		"/v1/status": false, "/metrics": false, "/healthz": false, "/": false,
	} {
		if got := arbitrated(path); got != want {
			t.Errorf("arbitrated(%q) = %v; want %v", path, got, want)
		}
	}
}

// A standby that shuts down while it forwards a long-poll answers it 503,
// never an empty 200.
func TestStandbyShutdownAnswersForwardedLongPoll(t *testing.T) {
	a, b := haPair(t, "pool \"db\" {\n  slots = 1\n}\n")
	ctx := ctxT(t)
	if _, err := a.c.Acquire(ctx, "db", api.AcquireRequest{}); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := b.c.Acquire(ctx, "db", api.AcquireRequest{WaitSeconds: 30})
		got <- err
	}()
	waitFor(t, "the forwarded waiter", func() bool { ps, _ := a.c.Pool(ctx, "db"); return ps.Queued == 1 })
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if ae := apiErr(t, err); ae.Status != http.StatusServiceUnavailable {
			t.Fatalf("the forwarded long-poll at shutdown = %v; want 503", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the forwarded long-poll did not answer at shutdown")
	}
}
