package daemon

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/local"
	"github.com/rpdhq/rpd/reconcile"
	"github.com/rpdhq/rpd/spec"
)

const classHCL = `
runner_class "medium" {
  cpu            = 2
  mem            = "4GiB"
  instance_types = ["c6i.*"]
}
`

func TestPickupOfferRelease(t *testing.T) {
	td := startDaemon(t, classHCL)
	ctx := ctxT(t)
	threshold := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	inst := api.Instance{InstanceID: "i-1", UsageClass: "spot", InstanceType: "c6i.large", CPU: 2, Mem: 4096, ResourceClass: "medium", Threshold: threshold}
	if _, err := td.c.Offer(ctx, "medium", inst); err != nil {
		t.Fatal(err)
	}
	// A request the instance does not fit: exhausted (the misfit is
	// re-queued, so the queue is not empty: local or global).
	_, err := td.c.Pickup(ctx, "medium", api.PickupRequest{UsageClass: "on-demand"})
	if ae := apiErr(t, err); ae.Status != 404 || ae.Code != api.CodeExhausted || (ae.Kind != api.ExhaustedGlobal && ae.Kind != api.ExhaustedLocal) {
		t.Fatalf("pickup of a misfit = %+v, want 404 exhausted with a kind", err)
	}
	// The misfit is held by the manager, not hidden for the re-queue
	// delay: a request it fits gets it at once.
	got, err := td.c.Pickup(ctx, "medium", api.PickupRequest{WorkerID: "job-7", UsageClass: "spot", InstanceTypes: []string{"c6i.*"}, MinCPU: 2})
	if err != nil || got.InstanceID != "i-1" || got.Owner != "job-7" || got.State != "claimed" {
		t.Fatalf("picked up %+v", got)
	}
	_, err = td.c.Pickup(ctx, "medium", api.PickupRequest{})
	if ae := apiErr(t, err); ae.Code != api.CodeExhausted || ae.Kind != api.ExhaustedGlobal {
		t.Fatalf("pickup from an empty pool = %v, want exhausted global", err)
	}
	if _, err := td.c.ReleaseInstance(ctx, "i-1", api.ReleaseInstanceRequest{Owner: "someone-else"}); apiErr(t, err).Status != 409 {
		t.Fatalf("release by a non-owner = %v, want 409", err)
	}
	back, err := td.c.ReleaseInstance(ctx, "i-1", api.ReleaseInstanceRequest{})
	if err != nil || back.State != "idle" {
		t.Fatalf("release = %+v, %v", back, err)
	}
	if _, err := td.c.ReleaseInstance(ctx, "i-1", api.ReleaseInstanceRequest{}); apiErr(t, err).Status != 409 {
		t.Fatalf("release of an idle instance = %v, want 409", err)
	}
	if _, err := td.c.ReleaseInstance(ctx, "i-none", api.ReleaseInstanceRequest{}); apiErr(t, err).Status != 404 {
		t.Fatalf("release of an unknown instance = %v, want 404", err)
	}
	// Offers that contradict the class are refused.
	bad := inst
	bad.InstanceID, bad.CPU = "i-2", 8
	if _, err := td.c.Offer(ctx, "medium", bad); apiErr(t, err).Status != 400 {
		t.Fatalf("offer with the wrong cpu = %v, want 400", err)
	}
	if status, _ := td.raw(t, "POST", "/v1/classes/medium/pickup", `{"instance_types":["["]}`); status != 400 {
		t.Fatalf("pickup with a bad glob = %d, want 400", status)
	}
	st := td.d.Status()
	if len(st.Components.Classes) != 1 || st.Components.Classes[0].Outcomes["claimed"] != 1 {
		t.Fatalf("class status = %+v", st.Components.Classes)
	}
}

// Serve mode follows the runtime document that rpd apply writes.
func TestServeFollowsTheStateStore(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(dir, "rpd.hcl"), rpdBlock(state))
	apply := func(body string) {
		t.Helper()
		cfg, diags := spec.NewLoader().LoadSources(map[string][]byte{"rpd.hcl": []byte(rpdBlock(state)), "main.hcl": []byte(body)}, spec.Vars{})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		ctx := ctxT(t)
		lb, err := local.Open(ctx, filepath.Join(state, "state.db"), local.Options{Stack: "t"})
		if err != nil {
			t.Fatal(err)
		}
		defer lb.Close()
		live := reconcile.Live{Queues: lb, State: lb, Lock: lb}
		p, err := reconcile.MakePlan(ctx, cfg, live, reconcile.PlanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := reconcile.Apply(ctx, p, live, reconcile.ApplyOptions{Who: "test", Operation: "apply"}); err != nil {
			t.Fatal(err)
		}
	}
	apply(`pool "db" { slots = 2 }`)
	td := startDaemonIn(t, dir, state, func(o *Options) {
		o.Mode = ModeServe
		o.StatePoll = 20 * time.Millisecond
	})
	ctx := ctxT(t)
	if ps, err := td.c.Pool(ctx, "db"); err != nil || ps.Total != 2 {
		t.Fatalf("serve mode at start-up: pool db = %+v, %v", ps, err)
	}
	l, err := td.c.Acquire(ctx, "db", api.AcquireRequest{Slots: 2})
	if err != nil {
		t.Fatal(err)
	}
	v0 := td.d.Status().ConfigVersion
	apply("pool \"db\" { slots = 5 }\nbudget \"b\" {}\n")
	waitFor(t, "serve mode to follow the new document", func() bool { return td.d.Status().ConfigVersion > v0 })
	ps, _ := td.c.Pool(ctx, "db")
	if ps.Total != 5 || ps.Used != 2 {
		t.Fatalf("pool after the followed apply = %+v, want 5 slots with the 2 held", ps)
	}
	if _, err := td.c.Budget(ctx, "b"); err != nil {
		t.Fatalf("budget from the new document: %v", err)
	}
	if _, err := td.c.Heartbeat(ctx, l.LeaseID); err != nil {
		t.Fatalf("the lease did not survive the followed apply: %v", err)
	}
	st := td.d.Status()
	if st.Mode != ModeServe || st.StateVersion != 2 {
		t.Fatalf("status = mode %q state version %d", st.Mode, st.StateVersion)
	}
}

func TestServeWithoutADocument(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(dir, "rpd.hcl"), rpdBlock(state))
	td := startDaemonIn(t, dir, state, func(o *Options) { o.Mode = ModeServe })
	ps, err := td.c.Pools(ctxT(t))
	if err != nil || len(ps) != 1 || ps[0].Name != "default_pool" || ps[0].Total != 16 {
		t.Fatalf("serve before any apply: pools = %+v, %v; want default_pool only", ps, err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, o := range []Options{{Mode: "other"}, {Mode: ModeWatch}, {Mode: ModeServe, Advertise: "10.0.0.5:7070"}} {
		if _, err := New(context.Background(), o); err == nil || !strings.Contains(err.Error(), "daemon:") {
			t.Errorf("New(%+v) = %v, want an error", o, err)
		}
	}
}

// Removing a class whose queue still holds idle runners is refused by
// apply's guard: nothing changes, and the same content is not retried.
func TestRemovingANonEmptyQueueIsRefused(t *testing.T) {
	td := startDaemon(t, classHCL)
	ctx := ctxT(t)
	inst := api.Instance{InstanceID: "i-9", UsageClass: "on-demand", InstanceType: "c6i.large", CPU: 2, Mem: 4096, ResourceClass: "medium", Threshold: time.Now().Add(time.Hour).UTC()}
	if _, err := td.c.Offer(ctx, "medium", inst); err != nil {
		t.Fatal(err)
	}
	v0 := td.d.Status().ConfigVersion
	writeFile(t, filepath.Join(td.dir, "main.hcl"), `pool "db" { slots = 1 }`)
	res := td.d.reloadIfChanged(ctx)
	if res.OK || res.ConfigVersion != v0 || !strings.Contains(res.Error, "apply") {
		t.Fatalf("removing a class with idle runners = %+v, want an apply rejection at version %d", res, v0)
	}
	if again := td.d.reloadIfChanged(ctx); again.At != res.At {
		t.Fatalf("a refused configuration was retried unchanged: %+v", again)
	}
	got, err := td.c.Pickup(ctx, "medium", api.PickupRequest{WorkerID: "w"})
	if err != nil || got.InstanceID != "i-9" {
		t.Fatalf("the class stopped serving after a refused removal: %+v, %v", got, err)
	}
}

// flakyState fails ReadState while fail is set.
type flakyState struct {
	backend.StateStore
	fail atomic.Bool
}

func (f *flakyState) ReadState(ctx context.Context) ([]byte, int64, error) {
	if f.fail.Load() {
		return nil, 0, errors.New("injected: backend unreachable")
	}
	return f.StateStore.ReadState(ctx)
}

// A failed read of the runtime document is reported, and the next good
// read of the same document reports the reload healthy again (status and
// metric) without a version change.
func TestServeRecoversFromAFailedRead(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(dir, "rpd.hcl"), rpdBlock(state))
	td := startDaemonIn(t, dir, state, func(o *Options) {
		o.Mode = ModeServe
		o.StatePoll = time.Hour // this test drives every read
	})
	ctx := ctxT(t)
	fs := &flakyState{StateStore: td.d.backend.State}
	td.d.backend.State = fs
	v0 := td.d.Status().ConfigVersion
	fs.fail.Store(true)
	if res := td.d.reloadIfChanged(ctx); res.OK || !strings.Contains(res.Error, "injected") || res.ConfigVersion != v0 {
		t.Fatalf("reload with the backend down = %+v, want a failure at version %d", res, v0)
	}
	fs.fail.Store(false)
	res := td.d.reloadIfChanged(ctx)
	if !res.OK || res.ConfigVersion != v0 || res.Changed {
		t.Fatalf("reload once the backend answers again = %+v, want ok and unchanged at version %d", res, v0)
	}
	if st := td.d.Status(); !st.LastReload.OK {
		t.Fatalf("status still reports the failed read: %+v", st.LastReload)
	}
}

// An instance claimed from a class that is then removed from the
// configuration can still be released: it is retired (its queue is gone),
// only by its owner.
func TestReleaseAfterTheClassIsRemoved(t *testing.T) {
	td := startDaemon(t, classHCL)
	ctx := ctxT(t)
	inst := api.Instance{InstanceID: "i-5", UsageClass: "spot", InstanceType: "c6i.large", CPU: 2, Mem: 4096, ResourceClass: "medium", Threshold: time.Now().Add(time.Hour).UTC()}
	if _, err := td.c.Offer(ctx, "medium", inst); err != nil {
		t.Fatal(err)
	}
	got, err := td.c.Pickup(ctx, "medium", api.PickupRequest{WorkerID: "job-1"})
	if err != nil || got.InstanceID != "i-5" {
		t.Fatalf("pickup = %+v, %v", got, err)
	}
	td.edit(t, `pool "db" { slots = 1 }`)
	if _, err := td.c.Pickup(ctx, "medium", api.PickupRequest{}); apiErr(t, err).Status != 404 {
		t.Fatalf("pickup from a removed class = %v, want 404", err)
	}
	if _, err := td.c.ReleaseInstance(ctx, "i-5", api.ReleaseInstanceRequest{Owner: "job-2"}); apiErr(t, err).Status != 409 {
		t.Fatalf("release by a non-owner after the class went = %v, want 409", err)
	}
	back, err := td.c.ReleaseInstance(ctx, "i-5", api.ReleaseInstanceRequest{Owner: "job-1"})
	if err != nil || back.State != "retired" || back.Owner != "" {
		t.Fatalf("release after the class went = %+v, %v; want retired with no owner", back, err)
	}
	if _, err := td.c.ReleaseInstance(ctx, "i-5", api.ReleaseInstanceRequest{}); apiErr(t, err).Status != 409 {
		t.Fatalf("second release = %v, want 409 (not claimed)", err)
	}
}

// A runtime document the daemon rejects leaves status at the version of
// the document in force.
func TestServeRejectedDocumentKeepsStateVersion(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(dir, "rpd.hcl"), rpdBlock(state))
	td := startDaemonIn(t, dir, state, func(o *Options) {
		o.Mode = ModeServe
		o.StatePoll = time.Hour // this test drives every read
	})
	ctx := ctxT(t)
	write := func(slots int) int64 {
		t.Helper()
		doc := reconcile.NewRuntimeDoc("t")
		doc.Pools["db"] = reconcile.PoolEntry{Slots: slots}
		b, err := doc.Encode()
		if err != nil {
			t.Fatal(err)
		}
		_, cur, err := td.d.backend.State.ReadState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		v, err := td.d.backend.State.WriteState(ctx, b, cur)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	good := write(2)
	if res := td.d.reloadIfChanged(ctx); !res.OK {
		t.Fatalf("good document rejected: %s", res.Error)
	}
	write(0)
	if res := td.d.reloadIfChanged(ctx); res.OK || !strings.Contains(res.Error, "slots") {
		t.Fatalf("document with a 0-slot pool = %+v, want rejected", res)
	}
	if st := td.d.Status(); st.StateVersion != good {
		t.Fatalf("status state_version = %d after a rejected document, want %d (the one in force)", st.StateVersion, good)
	}
	if ps, _ := td.c.Pool(ctx, "db"); ps.Total != 2 {
		t.Fatalf("pool db after the rejected document = %+v, want 2 slots", ps)
	}
}

// Beyond the seed (docs/pickup.md): a retried pickup with its worker_id
// gets the same runner, a claim is confirmed by its owner, an unconfirmed
// one lapses after claim_ttl and is offered again, wait_seconds is
// bounded, and all of it is counted.
func TestPickupRetryConfirmLapse(t *testing.T) {
	td := startDaemon(t, `
runner_class "medium" {
  cpu            = 2
  mem            = "4GiB"
  instance_types = ["c6i.*"]
  pickup { claim_ttl = "2s" }
}
`)
	ctx := ctxT(t)
	threshold := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	for _, id := range []string{"i-1", "i-2"} {
		if _, err := td.c.Offer(ctx, "medium", api.Instance{InstanceID: id, UsageClass: "spot", InstanceType: "c6i.large", CPU: 2, Mem: 4096, ResourceClass: "medium", Threshold: threshold}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := td.c.Pickup(ctx, "medium", api.PickupRequest{WorkerID: "w1"})
	if err != nil || first.ClaimExpiresAt == nil {
		t.Fatalf("pickup = %+v, %v; want a claim with a deadline", first, err)
	}
	again, err := td.c.Pickup(ctx, "medium", api.PickupRequest{WorkerID: "w1"})
	if err != nil || again.InstanceID != first.InstanceID || !again.ClaimExpiresAt.Equal(*first.ClaimExpiresAt) {
		t.Fatalf("retried pickup = %+v, %v; want %+v again", again, err, first)
	}
	if _, err := td.c.ConfirmInstance(ctx, first.InstanceID, "w9"); apiErr(t, err).Status != 409 {
		t.Fatalf("confirm by another worker = %v, want 409", err)
	}
	if status, _ := td.raw(t, "POST", "/v1/instances/"+first.InstanceID+"/confirm", `{}`); status != 400 {
		t.Fatalf("confirm without an owner = %d, want 400", status)
	}
	if _, err := td.c.ConfirmInstance(ctx, "i-none", "w1"); apiErr(t, err).Status != 404 {
		t.Fatalf("confirm of an unknown instance = %v, want 404", err)
	}
	confirmed, err := td.c.ConfirmInstance(ctx, first.InstanceID, "w1")
	if err != nil || confirmed.ClaimExpiresAt != nil || confirmed.Owner != "w1" {
		t.Fatalf("confirm = %+v, %v; want claimed by w1 without a deadline", confirmed, err)
	}
	second, err := td.c.Pickup(ctx, "medium", api.PickupRequest{WorkerID: "w2"})
	if err != nil || second.InstanceID == first.InstanceID {
		t.Fatalf("second pickup = %+v, %v", second, err)
	}
	// w2 never confirms: within about claim_ttl plus a pass interval the
	// runner is idle and pickable again; the confirmed one stays.
	var third api.Instance
	waitFor(t, "the unconfirmed claim to lapse", func() bool {
		third, err = td.c.Pickup(ctx, "medium", api.PickupRequest{WorkerID: "w3"})
		return err == nil
	})
	if third.InstanceID != second.InstanceID {
		t.Fatalf("after the lapse: %+v; want %s again", third, second.InstanceID)
	}
	if _, err := td.c.ConfirmInstance(ctx, second.InstanceID, "w2"); apiErr(t, err).Status != 409 {
		t.Fatalf("confirm after the lapse = %v, want 409", err)
	}
	if status, _ := td.raw(t, "POST", "/v1/classes/medium/pickup", `{"wait_seconds":21}`); status != 400 {
		t.Fatalf("pickup with wait_seconds 21 = %d, want 400", status)
	}
	_, metrics := td.raw(t, "GET", "/metrics", "")
	for _, want := range []string{
		`rpd_pickup_events_total{class="medium",event="confirmed"} 1`,
		`rpd_pickup_events_total{class="medium",event="claim_expired"} 1`,
		`rpd_pickup_events_total{class="medium",event="resumed"} 1`,
		`rpd_pickup_held{class="medium"}`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
