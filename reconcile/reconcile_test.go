package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/spec"
)

// testConfig is a small configuration built without the loader.
func testConfig(stack string) *spec.Config {
	spill := 16
	return &spec.Config{
		Stack:   stack,
		Backend: spec.Backend{Type: "local", Path: ".rpd/state.db"},
		RunnerClasses: []spec.RunnerClass{
			testClass("medium", 2), testClass("small", 1),
		},
		Budgets: []spec.Budget{{Name: "scanner", ScanRing: 256 << 20, DeltaCache: 512 << 20, SpillSlots: &spill}},
		VMCeilings: []spec.VMCeiling{{Name: "browser-vms", Max: 100, ClaimTTL: 2 * time.Minute, PollInterval: 5 * time.Second, StaleAfter: 30 * time.Second, Grant: spec.GrantNextUsage,
			Usage: &spec.UsageSource{Type: "http", URL: "http://127.0.0.1:9000/usage", Field: "active", Timeout: 5 * time.Second}}},
		Pools: []spec.Pool{
			{Name: "database_pool", Slots: 3, Description: "heavy queries", LeaseTTL: 10 * time.Minute},
			{Name: spec.DefaultPoolName, Slots: 16},
		},
		Priorities: []spec.Priority{{Name: "critical", Weight: 100}},
	}
}

func testClass(name string, cpu int) spec.RunnerClass {
	return spec.RunnerClass{
		Name: name, CPU: cpu, Mem: uint64(cpu) << 31, InstanceTypes: []string{"c6i.*"},
		Queue:  spec.QueueSpec{VisibilityTimeout: 30 * time.Second, Retention: 96 * time.Hour},
		Pickup: spec.PickupSpec{RequeueDelay: 3 * time.Second, LocalExhaustion: 5, Mode: spec.PickupModeLease},
	}
}

func mustPlan(t *testing.T, cfg *spec.Config, live Live, opts PlanOptions) *Plan {
	t.Helper()
	p, err := MakePlan(context.Background(), cfg, live, opts)
	if err != nil {
		t.Fatalf("MakePlan: %v", err)
	}
	return p
}

func mustApply(t *testing.T, cfg *spec.Config, f *fakeBackend) *ApplyResult {
	t.Helper()
	p := mustPlan(t, cfg, f.live(), PlanOptions{})
	res, err := Apply(context.Background(), p, f.live(), ApplyOptions{Who: "test@host"})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return res
}

// changed returns "ACTION ADDRESS" for every change that is not a no-op.
func changed(p *Plan) []string {
	var out []string
	for _, c := range p.Changes {
		if c.Action != NoOp {
			out = append(out, c.Action.Symbol()+" "+c.Address.String())
		}
	}
	return out
}

func TestPlanEmptyToFull(t *testing.T) {
	f := newFakeBackend()
	p := mustPlan(t, testConfig("ci"), f.live(), PlanOptions{})
	got := changed(p)
	want := []string{
		"+ queue.medium", "+ queue.small",
		"+ runner_class.medium", "+ runner_class.small",
		"+ budget.scanner", "+ vm_ceiling.browser-vms",
		"+ pool.database_pool", "+ pool.default_pool", "+ priority.critical",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("changes:\n got %q\nwant %q", got, want)
	}
	if s := p.Summary(); s != (Summary{Add: 9}) {
		t.Errorf("summary = %+v, want 9 to add", s)
	}
	if !p.HasChanges() {
		t.Error("HasChanges = false")
	}
	if len(f.queueNames()) != 0 || f.version != 0 {
		t.Error("MakePlan changed the backend")
	}
}

func TestApplyConvergesThenNoChanges(t *testing.T) {
	f := newFakeBackend()
	cfg := testConfig("ci")
	res := mustApply(t, cfg, f)
	if res.Done != (Summary{Add: 9}) {
		t.Errorf("done = %+v, want 9 added", res.Done)
	}
	for _, r := range res.Results {
		if r.Status != Succeeded {
			t.Errorf("%s: %s %v", r.Address, r.Status, r.Err)
		}
	}
	if got, want := f.queueNames(), []string{"ci-rp-medium", "ci-rp-small"}; !slices.Equal(got, want) {
		t.Errorf("queues = %q, want %q", got, want)
	}
	doc := f.state()
	if doc.Pools["database_pool"].Slots != 3 || doc.Lineage == "" || doc.RunnerClasses["medium"].Queue != "ci-rp-medium" {
		t.Errorf("runtime document = %+v", doc)
	}
	p := mustPlan(t, cfg, f.live(), PlanOptions{})
	if p.HasChanges() || len(p.Drift) > 0 {
		t.Fatalf("second plan has changes %q / drift %v", changed(p), p.Drift)
	}
	if f.lock != nil {
		t.Error("lock still held after apply")
	}
	// Applying a no-change plan writes nothing.
	v := f.version
	if _, err := Apply(context.Background(), p, f.live(), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if f.version != v {
		t.Errorf("no-op apply wrote the state: version %d -> %d", v, f.version)
	}
}

func TestPlanUpdateInPlaceShowsOnlyChangedAttributes(t *testing.T) {
	f := newFakeBackend()
	cfg := testConfig("ci")
	mustApply(t, cfg, f)
	cfg.Pools[0].Slots = 4
	cfg.RunnerClasses[0].Queue.VisibilityTimeout = time.Minute
	p := mustPlan(t, cfg, f.live(), PlanOptions{})
	if got, want := changed(p), []string{"~ queue.medium", "~ pool.database_pool"}; !slices.Equal(got, want) {
		t.Fatalf("changes = %q, want %q", got, want)
	}
	for _, c := range p.Changes {
		if c.Action != Update {
			continue
		}
		attrs := ChangedAttributes(c.Before, c.After)
		want := map[string][]string{"queue.medium": {"visibility_timeout"}, "pool.database_pool": {"slots"}}[c.Address.String()]
		if !slices.Equal(attrs, want) {
			t.Errorf("%s changed %q, want %q", c.Address, attrs, want)
		}
	}
	res, err := Apply(context.Background(), p, f.live(), ApplyOptions{})
	if err != nil || res.Done != (Summary{Change: 2}) {
		t.Fatalf("apply: %+v %v", res.Done, err)
	}
	if q := f.queues["ci-rp-medium"]; q.Attributes.VisibilityTimeout != time.Minute {
		t.Errorf("queue not updated: %+v", q.Attributes)
	}
	if p2 := mustPlan(t, cfg, f.live(), PlanOptions{}); p2.HasChanges() {
		t.Errorf("not converged: %q", changed(p2))
	}
}

func TestPlanQueueRenameIsReplace(t *testing.T) {
	f := newFakeBackend()
	cfg := testConfig("ci")
	mustApply(t, cfg, f)
	cfg.RunnerClasses[1].Queue.Name = "ci-small-v2"
	p := mustPlan(t, cfg, f.live(), PlanOptions{})
	if got, want := changed(p), []string{"-/+ queue.small", "~ runner_class.small"}; !slices.Equal(got, want) {
		t.Fatalf("changes = %q, want %q", got, want)
	}
	c := p.Changes[slices.IndexFunc(p.Changes, func(c ResourceChange) bool { return c.Address.String() == "queue.small" })]
	if len(c.ReplacePaths) != 1 || c.ReplacePaths[0][0] != "name" {
		t.Errorf("replace paths = %v", c.ReplacePaths)
	}
	if s := p.Summary(); s != (Summary{Add: 1, Change: 1, Destroy: 1}) {
		t.Errorf("summary = %+v", s)
	}
	if _, err := Apply(context.Background(), p, f.live(), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, want := f.queueNames(), []string{"ci-rp-medium", "ci-small-v2"}; !slices.Equal(got, want) {
		t.Errorf("queues = %q, want %q", got, want)
	}
	if p2 := mustPlan(t, cfg, f.live(), PlanOptions{}); p2.HasChanges() || len(p2.Drift) > 0 {
		t.Errorf("not converged: %q %v", changed(p2), p2.Drift)
	}
}

func TestRemovedClassDeletesQueueAndEntry(t *testing.T) {
	f := newFakeBackend()
	cfg := testConfig("ci")
	mustApply(t, cfg, f)
	cfg.RunnerClasses = cfg.RunnerClasses[:1]
	cfg.Priorities = nil
	p := mustPlan(t, cfg, f.live(), PlanOptions{})
	if got, want := changed(p), []string{"- queue.small", "- runner_class.small", "- priority.critical"}; !slices.Equal(got, want) {
		t.Fatalf("changes = %q, want %q", got, want)
	}
	res, err := Apply(context.Background(), p, f.live(), ApplyOptions{})
	if err != nil || res.Done != (Summary{Destroy: 3}) {
		t.Fatalf("apply: %+v %v", res.Done, err)
	}
	if got := f.queueNames(); !slices.Equal(got, []string{"ci-rp-medium"}) {
		t.Errorf("queues = %q", got)
	}
	doc := f.state()
	if _, ok := doc.Queues["small"]; ok {
		t.Error("deleted queue still recorded")
	}
	if _, ok := doc.RunnerClasses["small"]; ok {
		t.Error("deleted class still in the document")
	}
}

func TestUnmanagedQueueIsAnError(t *testing.T) {
	for _, tc := range []struct {
		name, tag, want string
	}{
		{"untagged", "", "queue ci-rp-medium exists but is not managed by rpd stack ci (it has no rpd:stack tag)"},
		{"other stack", "prod", "queue ci-rp-medium exists but is not managed by rpd stack ci (it belongs to rpd stack prod)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeBackend()
			tags := map[string]string{}
			if tc.tag != "" {
				tags[backend.StackTag] = tc.tag
			}
			f.queues["ci-rp-medium"] = &backend.QueueInfo{Name: "ci-rp-medium", Attributes: backend.QueueAttributes{Tags: tags}}
			_, err := MakePlan(context.Background(), testConfig("ci"), f.live(), PlanOptions{})
			if !errors.Is(err, ErrNotManaged) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestUntaggedQueueWithStackPrefixIsLeftAlone(t *testing.T) {
	f := newFakeBackend()
	f.queues["ci-rp-stranger"] = &backend.QueueInfo{Name: "ci-rp-stranger", Attributes: backend.QueueAttributes{Tags: map[string]string{}}}
	mustApply(t, testConfig("ci"), f)
	if !slices.Contains(f.queueNames(), "ci-rp-stranger") {
		t.Fatal("an untagged queue was deleted")
	}
}

func TestOrphanTaggedQueueIsDeleted(t *testing.T) {
	f := newFakeBackend()
	f.queues["ci-rp-old"] = &backend.QueueInfo{Name: "ci-rp-old", Attributes: backend.QueueAttributes{Tags: map[string]string{backend.StackTag: "ci"}}}
	p := mustPlan(t, testConfig("ci"), f.live(), PlanOptions{})
	if !slices.Contains(changed(p), "- queue.old") {
		t.Fatalf("changes = %q, want - queue.old", changed(p))
	}
}

func TestDriftReportedSeparately(t *testing.T) {
	f := newFakeBackend()
	cfg := testConfig("ci")
	mustApply(t, cfg, f)
	f.queues["ci-rp-medium"].Attributes.Retention = time.Hour
	delete(f.queues, "ci-rp-small")
	p := mustPlan(t, cfg, f.live(), PlanOptions{})
	var drifted []string
	for _, d := range p.Drift {
		drifted = append(drifted, d.Address.String())
	}
	if !slices.Equal(drifted, []string{"queue.medium", "queue.small"}) {
		t.Fatalf("drift = %q", drifted)
	}
	if p.Drift[1].After != nil {
		t.Error("a deleted queue's drift has After values")
	}
	if got, want := changed(p), []string{"~ queue.medium", "+ queue.small"}; !slices.Equal(got, want) {
		t.Fatalf("changes = %q, want %q", got, want)
	}
	mustApply(t, cfg, f)
	if p2 := mustPlan(t, cfg, f.live(), PlanOptions{}); p2.HasChanges() || len(p2.Drift) > 0 {
		t.Errorf("not converged: %q %v", changed(p2), p2.Drift)
	}
}

func TestRefreshOnlyRecordsDrift(t *testing.T) {
	f := newFakeBackend()
	cfg := testConfig("ci")
	mustApply(t, cfg, f)
	f.queues["ci-rp-medium"].Attributes.Retention = time.Hour
	p := mustPlan(t, cfg, f.live(), PlanOptions{RefreshOnly: true})
	if len(changed(p)) != 0 || len(p.Drift) != 1 || !p.HasChanges() {
		t.Fatalf("refresh-only plan: changes %q drift %v", changed(p), p.Drift)
	}
	if _, err := Apply(context.Background(), p, f.live(), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := f.state().Queues["medium"].Retention; got != Duration(time.Hour) {
		t.Errorf("recorded retention = %v, want 1h", got)
	}
	if f.queues["ci-rp-medium"].Attributes.Retention != time.Hour {
		t.Error("refresh-only apply changed the queue")
	}
	p2 := mustPlan(t, cfg, f.live(), PlanOptions{})
	if len(p2.Drift) != 0 || !slices.Equal(changed(p2), []string{"~ queue.medium"}) {
		t.Errorf("after refresh-only: drift %v changes %q", p2.Drift, changed(p2))
	}
}

func TestStalePlanIsRefused(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		change func(f *fakeBackend, cfg *spec.Config)
	}{
		{"state changed", func(f *fakeBackend, cfg *spec.Config) {
			cfg.Pools[0].Slots = 9
			mustApply(&testing.T{}, cfg, f)
		}},
		{"queue changed out of band", func(f *fakeBackend, cfg *spec.Config) {
			f.queues["ci-rp-medium"].Attributes.Delay = time.Second
		}},
		{"queue appeared", func(f *fakeBackend, cfg *spec.Config) {
			f.queues["ci-rp-new"] = &backend.QueueInfo{Name: "ci-rp-new", Attributes: backend.QueueAttributes{Tags: map[string]string{backend.StackTag: "ci"}}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeBackend()
			cfg := testConfig("ci")
			mustApply(t, cfg, f)
			edited := testConfig("ci")
			edited.Pools[1].Slots = 20
			edited.RunnerClasses = append(edited.RunnerClasses, testClass("new", 4))
			p := mustPlan(t, edited, f.live(), PlanOptions{})
			tc.change(f, testConfig("ci"))
			before, version := f.queueNames(), f.version
			res, err := Apply(ctx, p, f.live(), ApplyOptions{})
			if !errors.Is(err, ErrStalePlan) || !strings.Contains(err.Error(), "Saved plan is stale") {
				t.Fatalf("err = %v, want stale", err)
			}
			if !slices.Equal(f.queueNames(), before) || f.version != version {
				t.Error("a stale plan changed something")
			}
			for _, r := range res.Results {
				if r.Status != Skipped {
					t.Errorf("%s: %s", r.Address, r.Status)
				}
			}
			if f.lock != nil {
				t.Error("lock left held")
			}
		})
	}
}

func TestApplyWaitsForLockThenFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeBackend()
		holder := backend.LockInfo{ID: "abc123", Who: "bob@ci-7", Operation: "apply", Created: time.Now()}
		if _, err := f.Lock(context.Background(), holder, time.Hour); err != nil {
			t.Fatal(err)
		}
		p := mustPlan(t, testConfig("ci"), f.live(), PlanOptions{})
		start := time.Now()
		_, err := Apply(context.Background(), p, f.live(), ApplyOptions{LockTimeout: 2 * time.Second})
		if waited := time.Since(start); waited != 2*time.Second {
			t.Errorf("gave up after %v; want the -lock-timeout, 2s", waited)
		}
		var le *backend.LockedError
		if !errors.As(err, &le) || le.Holder.Who != "bob@ci-7" || !strings.Contains(err.Error(), "-lock-timeout=2s") || !strings.Contains(err.Error(), "rpd force-unlock abc123") {
			t.Fatalf("err = %v", err)
		}
		if len(f.queueNames()) != 0 {
			t.Error("applied without the lock")
		}
	})
}

func TestApplyWaitsForLockThenSucceeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeBackend()
		if _, err := f.Lock(context.Background(), backend.LockInfo{ID: "other", Who: "bob@x"}, time.Hour); err != nil {
			t.Fatal(err)
		}
		p := mustPlan(t, testConfig("ci"), f.live(), PlanOptions{})
		start := time.Now()
		done := make(chan error, 1)
		go func() {
			_, err := Apply(context.Background(), p, f.live(), ApplyOptions{LockTimeout: time.Minute})
			done <- err
		}()
		// Attempts at 0 and 500ms fail; the other holder lets go at 750ms.
		time.Sleep(3 * lockRetryInterval / 2)
		if err := f.Unlock(context.Background(), "other"); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != 2*lockRetryInterval {
			t.Errorf("took the released lock after %v; want the next retry, at %v", took, 2*lockRetryInterval)
		}
	})
}

func TestPartialFailureContinuesIndependentChanges(t *testing.T) {
	f := newFakeBackend()
	f.fail = func(call string) error {
		if call == "CreateQueue ci-rp-small" {
			return errors.New("injected: throttled")
		}
		return nil
	}
	cfg := testConfig("ci")
	p := mustPlan(t, cfg, f.live(), PlanOptions{})
	res, err := Apply(context.Background(), p, f.live(), ApplyOptions{})
	if !errors.Is(err, ErrApplyIncomplete) || !strings.Contains(err.Error(), "injected: throttled") {
		t.Fatalf("err = %v", err)
	}
	status := map[string]Status{}
	for _, r := range res.Results {
		status[r.Address.String()] = r.Status
	}
	want := map[string]Status{
		"queue.medium": Succeeded, "queue.small": Failed,
		"runner_class.medium": Succeeded, "runner_class.small": Skipped,
		"budget.scanner": Succeeded, "vm_ceiling.browser-vms": Succeeded,
		"pool.database_pool": Succeeded, "pool.default_pool": Succeeded, "priority.critical": Succeeded,
	}
	for k, w := range want {
		if status[k] != w {
			t.Errorf("%s: %s, want %s", k, status[k], w)
		}
	}
	f.fail = nil
	p2 := mustPlan(t, cfg, f.live(), PlanOptions{})
	if got, want := changed(p2), []string{"+ queue.small", "+ runner_class.small"}; !slices.Equal(got, want) {
		t.Fatalf("re-plan = %q, want %q", got, want)
	}
	mustApply(t, cfg, f)
	if p3 := mustPlan(t, cfg, f.live(), PlanOptions{}); p3.HasChanges() {
		t.Errorf("not converged: %q", changed(p3))
	}
}

func TestGuards(t *testing.T) {
	ctx := context.Background()
	t.Run("non-empty queue fails the plan", func(t *testing.T) {
		f := newFakeBackend()
		cfg := testConfig("ci")
		mustApply(t, cfg, f)
		f.setMessages("ci-rp-small", 12, 1)
		cfg.RunnerClasses = cfg.RunnerClasses[:1]
		p, err := MakePlan(ctx, cfg, f.live(), PlanOptions{})
		if p != nil || !errors.Is(err, ErrGuard) {
			t.Fatalf("plan = %v, %v; want no plan and ErrGuard", p, err)
		}
		for _, want := range []string{"queue.small: queue ci-rp-small holds 13 idle runners (12 visible, 1 in flight, 0 delayed)", "-allow-destroy-nonempty", `allow_destroy = true on runner_class "small"`, "keeping the block for that one apply"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("refusal lacks %q: %v", want, err)
			}
		}
		p = mustPlan(t, cfg, f.live(), PlanOptions{AllowDestroyNonEmpty: true})
		if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0].Summary, "holds 13 idle runners") || !strings.Contains(p.Warnings[0].Summary, "deleting it discards them") {
			t.Fatalf("warnings = %v", p.Warnings)
		}
		// The plan carries the permission: apply needs no option.
		if _, err := Apply(ctx, p, f.live(), ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(f.queueNames(), "ci-rp-small") {
			t.Fatal("queue not deleted with AllowDestroyNonEmpty")
		}
	})
	t.Run("plurals", func(t *testing.T) {
		f := newFakeBackend()
		cfg := testConfig("ci")
		mustApply(t, cfg, f)
		f.setMessages("ci-rp-small", 1, 0)
		cfg.RunnerClasses = cfg.RunnerClasses[:1]
		_, err := MakePlan(ctx, cfg, f.live(), PlanOptions{})
		if err == nil || !strings.Contains(err.Error(), "holds 1 idle runner (") || !strings.Contains(err.Error(), "would discard it,") {
			t.Fatalf("err = %v, want singular wording", err)
		}
	})
	t.Run("runners that arrive after the plan refuse the whole apply", func(t *testing.T) {
		f := newFakeBackend()
		cfg := testConfig("ci")
		mustApply(t, cfg, f)
		_, before, err := f.ReadState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cfg.RunnerClasses = cfg.RunnerClasses[:1] // guarded once small's queue holds runners
		cfg.Pools[0].Slots = 5                    // independent: must not apply either
		p := mustPlan(t, cfg, f.live(), PlanOptions{})
		f.setMessages("ci-rp-small", 4, 0)
		res, err := Apply(ctx, p, f.live(), ApplyOptions{})
		if !errors.Is(err, ErrGuard) {
			t.Fatalf("err = %v, want ErrGuard", err)
		}
		if _, after, _ := f.ReadState(ctx); after != before {
			t.Errorf("state version %d -> %d: a refused apply wrote the runtime document", before, after)
		}
		if got := f.state().Pools["database_pool"].Slots; got != 3 {
			t.Errorf("database_pool slots = %d, want 3 (unchanged)", got)
		}
		if !slices.Contains(f.queueNames(), "ci-rp-small") {
			t.Fatal("non-empty queue deleted")
		}
		if res.Started {
			t.Error("a refused apply reports that it started")
		}
		for _, r := range res.Results {
			if r.Status != Skipped {
				t.Errorf("%s %s in a refused apply", r.Address, r.Status)
			}
		}
		if _, err := Apply(ctx, p, f.live(), ApplyOptions{AllowDestroyNonEmpty: true}); err != nil {
			t.Fatalf("apply with AllowDestroyNonEmpty: %v", err)
		}
	})
	t.Run("class allow_destroy", func(t *testing.T) {
		f := newFakeBackend()
		cfg := testConfig("ci")
		cfg.RunnerClasses[1].AllowDestroy = true
		mustApply(t, cfg, f)
		f.setMessages("ci-rp-small", 2, 0)
		cfg.RunnerClasses = cfg.RunnerClasses[:1]
		mustApply(t, cfg, f)
		if slices.Contains(f.queueNames(), "ci-rp-small") {
			t.Fatal("queue of an allow_destroy class not deleted")
		}
	})
	t.Run("pool with held slots", func(t *testing.T) {
		f := newFakeBackend()
		cfg := testConfig("ci")
		mustApply(t, cfg, f)
		held := map[string]int{"database_pool": 3}
		live := f.live()
		live.Held = HeldSlotsFunc(func(context.Context) (map[string]int, error) { return held, nil })
		cfg.Pools = cfg.Pools[1:]
		_, err := MakePlan(ctx, cfg, live, PlanOptions{})
		if !errors.Is(err, ErrGuard) || !strings.Contains(err.Error(), "pool.database_pool: 3 slots held") || !strings.Contains(err.Error(), `allow_destroy = true on pool "database_pool"`) {
			t.Fatalf("err = %v", err)
		}
		if _, ok := f.state().Pools["database_pool"]; !ok {
			t.Fatal("pool with holders deleted")
		}
		p := mustPlan(t, cfg, live, PlanOptions{AllowDestroyNonEmpty: true})
		if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0].Summary, "revokes what is held") {
			t.Fatalf("warnings = %v", p.Warnings)
		}
		held = map[string]int{"database_pool": 1}
		if _, err := MakePlan(ctx, cfg, live, PlanOptions{}); err == nil || !strings.Contains(err.Error(), "1 slot held;") {
			t.Fatalf("err = %v, want singular", err)
		}
		held = nil
		p = mustPlan(t, cfg, live, PlanOptions{})
		if _, err := Apply(ctx, p, live, ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, ok := f.state().Pools["database_pool"]; ok {
			t.Fatal("released pool not deleted")
		}
	})
}

// fakeLeases is a LeaseRecords holding n records.
type fakeLeases struct {
	n   int
	err error
}

func (l *fakeLeases) CountLeaseRecords(context.Context) (int, error) { return l.n, nil }
func (l *fakeLeases) DeleteLeaseRecords(context.Context) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n := l.n
	l.n = 0
	return n, nil
}

func TestDestroy(t *testing.T) {
	ctx := context.Background()
	f := newFakeBackend()
	cfg := testConfig("ci")
	mustApply(t, cfg, f)
	lineage := f.state().Lineage
	leases := &fakeLeases{n: 2}
	live := f.live()
	live.Leases = leases
	p := mustPlan(t, cfg, live, PlanOptions{Destroy: true})
	want := []string{"- queue.medium", "- queue.small", "- runner_class.medium", "- runner_class.small", "- budget.scanner", "- vm_ceiling.browser-vms", "- pool.database_pool", "- pool.default_pool", "- priority.critical"}
	if got := changed(p); !slices.Equal(got, want) {
		t.Fatalf("destroy plan = %q, want %q", got, want)
	}
	if !p.Destroy || p.LeaseRecords != 2 {
		t.Fatalf("destroy = %v, lease records = %d; want true, 2", p.Destroy, p.LeaseRecords)
	}
	res, err := Apply(ctx, p, live, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Done.Destroy != len(want) || res.LeaseRecordsDeleted != 2 || leases.n != 0 {
		t.Fatalf("destroyed %d, lease records deleted %d (left %d)", res.Done.Destroy, res.LeaseRecordsDeleted, leases.n)
	}
	doc := f.state()
	if len(doc.Queues)+len(doc.RunnerClasses)+len(doc.Pools)+len(doc.Budgets)+len(doc.VMCeilings)+len(doc.Priorities) != 0 || len(f.queueNames()) != 0 {
		t.Fatalf("after destroy: document %+v, queues %v", doc, f.queueNames())
	}
	if doc.Lineage != lineage {
		t.Errorf("lineage %q -> %q: destroy keeps the state's lineage", lineage, doc.Lineage)
	}
	if again := mustPlan(t, cfg, live, PlanOptions{Destroy: true}); again.HasChanges() {
		t.Errorf("destroy twice: %q", changed(again))
	}
	if p := mustPlan(t, cfg, live, PlanOptions{}); len(changed(p)) != len(want) {
		t.Errorf("after destroy, plan = %q; want everything created again", changed(p))
	}

	t.Run("guards apply", func(t *testing.T) {
		f := newFakeBackend()
		mustApply(t, cfg, f)
		f.setMessages("ci-rp-medium", 1, 0)
		if _, err := MakePlan(ctx, cfg, f.live(), PlanOptions{Destroy: true}); !errors.Is(err, ErrGuard) {
			t.Fatalf("err = %v, want ErrGuard", err)
		}
		mustPlan(t, cfg, f.live(), PlanOptions{Destroy: true, AllowDestroyNonEmpty: true})
	})
	t.Run("an incomplete destroy keeps the lease records", func(t *testing.T) {
		f := newFakeBackend()
		mustApply(t, cfg, f)
		leases := &fakeLeases{n: 3}
		live := f.live()
		live.Leases = leases
		p := mustPlan(t, cfg, live, PlanOptions{Destroy: true})
		f.fail = func(call string) error {
			if call == "DeleteQueue ci-rp-small" {
				return errors.New("injected")
			}
			return nil
		}
		res, err := Apply(ctx, p, live, ApplyOptions{})
		if !errors.Is(err, ErrApplyIncomplete) || leases.n != 3 || res.LeaseRecordsDeleted != 0 {
			t.Fatalf("err = %v, lease records left %d", err, leases.n)
		}
	})
	t.Run("with refresh-only", func(t *testing.T) {
		if _, err := MakePlan(ctx, cfg, f.live(), PlanOptions{Destroy: true, RefreshOnly: true}); err == nil {
			t.Fatal("-destroy with -refresh-only planned")
		}
	})
}

func TestPlanForAnotherStateIsRefused(t *testing.T) {
	ctx := context.Background()
	a, b := newFakeBackend(), newFakeBackend()
	cfg := testConfig("ci")
	mustApply(t, cfg, a)
	cfg.Pools[0].Slots = 7
	p := mustPlan(t, cfg, a.live(), PlanOptions{})
	for name, f := range map[string]*fakeBackend{"empty": b, "another lineage": func() *fakeBackend {
		o := newFakeBackend()
		mustApply(t, testConfig("ci"), o)
		return o
	}()} {
		_, err := Apply(ctx, p, f.live(), ApplyOptions{})
		if !errors.Is(err, ErrOtherState) || errors.Is(err, ErrStalePlan) || !strings.Contains(err.Error(), "lineage "+p.Lineage) || !strings.Contains(err.Error(), "another state database") {
			t.Errorf("%s: err = %v, want ErrOtherState naming the lineage", name, err)
		}
	}
}

func TestWarnings(t *testing.T) {
	f := newFakeBackend()
	cfg := testConfig("ci")
	mustApply(t, cfg, f)
	live := f.live()
	live.Held = HeldSlotsFunc(func(context.Context) (map[string]int, error) { return map[string]int{"database_pool": 3}, nil })
	live.Budgets = budgetsFunc(func(context.Context) (map[string]BudgetUse, error) {
		return map[string]BudgetUse{"scanner": {ScanRing: 200 << 20, SpillSlots: 4}}, nil
	})
	cfg.Pools[0].Slots = 2
	cfg.Budgets[0].ScanRing = 128 << 20
	p := mustPlan(t, cfg, live, PlanOptions{})
	var got []string
	for _, w := range p.Warnings {
		got = append(got, w.Summary)
	}
	want := []string{
		"budget.scanner: lowered below what is in use (scan_ring 128MiB < 200MiB in use); held permits are kept and new ones wait until enough is released",
		"pool.database_pool: 3 slots held; shrinking to 2 makes new requests wait until 1 is released",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("warnings:\n got %q\nwant %q", got, want)
	}

	// Growing a pool that is still below what is held says so.
	mustApply(t, cfg, f)
	cfg.Pools[0].Slots = 3
	live.Held = HeldSlotsFunc(func(context.Context) (map[string]int, error) { return map[string]int{"database_pool": 4}, nil })
	p = mustPlan(t, cfg, live, PlanOptions{})
	got = got[:0]
	for _, w := range p.Warnings {
		got = append(got, w.Summary)
	}
	if want := "pool.database_pool: 4 slots held; growing to 3 makes new requests wait until 1 is released"; !slices.Contains(got, want) {
		t.Fatalf("warnings of a grow below the held slots:\n got %q\nwant %q", got, want)
	}
}

type budgetsFunc func(context.Context) (map[string]BudgetUse, error)

func (f budgetsFunc) BudgetsInUse(ctx context.Context) (map[string]BudgetUse, error) { return f(ctx) }

func TestTargets(t *testing.T) {
	f := newFakeBackend()
	cfg := testConfig("ci")
	p := mustPlan(t, cfg, f.live(), PlanOptions{Targets: []Address{{TypeRunnerClass, "small"}, {TypePool, "default_pool"}}})
	if got, want := changed(p), []string{"+ queue.small", "+ runner_class.small", "+ pool.default_pool"}; !slices.Equal(got, want) {
		t.Fatalf("changes = %q, want %q", got, want)
	}
	mustApplyPlan(t, p, f)
	if got := f.queueNames(); !slices.Equal(got, []string{"ci-rp-small"}) {
		t.Errorf("queues = %q", got)
	}
	_, err := MakePlan(context.Background(), cfg, f.live(), PlanOptions{Targets: []Address{{TypePool, "nope"}}})
	if !errors.Is(err, ErrUnknownTarget) || !strings.Contains(err.Error(), "-target pool.nope") {
		t.Fatalf("err = %v", err)
	}
}

func mustApplyPlan(t *testing.T, p *Plan, f *fakeBackend) {
	t.Helper()
	if _, err := Apply(context.Background(), p, f.live(), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestStopSkipsEverythingNotStarted(t *testing.T) {
	f := newFakeBackend()
	stop := make(chan struct{})
	close(stop)
	p := mustPlan(t, testConfig("ci"), f.live(), PlanOptions{})
	res, err := Apply(context.Background(), p, f.live(), ApplyOptions{Stop: stop})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v", err)
	}
	for _, r := range res.Results {
		if r.Status != Skipped {
			t.Errorf("%s: %s", r.Address, r.Status)
		}
	}
	mustApply(t, testConfig("ci"), f)
}

func TestStopAfterQueuesRecordsThem(t *testing.T) {
	f := newFakeBackend()
	stop := make(chan struct{})
	f.fail = func(call string) error {
		if call == "CreateQueue ci-rp-small" {
			close(stop) // Ctrl-C while the queues are being created
		}
		return nil
	}
	cfg := testConfig("ci")
	p := mustPlan(t, cfg, f.live(), PlanOptions{Parallelism: 1})
	_, err := Apply(context.Background(), p, f.live(), ApplyOptions{Stop: stop, Parallelism: 1})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v", err)
	}
	f.fail = nil
	doc := f.state()
	if doc == nil || len(doc.Queues) != 2 || len(doc.Pools) != 0 {
		t.Fatalf("after a graceful stop the document should record both created queues and nothing else: %+v", doc)
	}
	p2 := mustPlan(t, cfg, f.live(), PlanOptions{})
	if len(p2.Drift) > 0 || slices.Contains(changed(p2), "+ queue.small") {
		t.Fatalf("re-plan: %q drift %v", changed(p2), p2.Drift)
	}
	mustApply(t, cfg, f)
}

func TestProgressEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeBackend()
		f.fail = func(call string) error {
			if call == "CreateQueue ci-rp-medium" {
				f.mu.Unlock()
				time.Sleep(25 * time.Second)
				f.mu.Lock()
			}
			return nil
		}
		var events []string
		cfg := testConfig("ci")
		cfg.RunnerClasses = cfg.RunnerClasses[:1]
		p := mustPlan(t, cfg, f.live(), PlanOptions{})
		_, err := Apply(context.Background(), p, f.live(), ApplyOptions{Parallelism: 1, Progress: func(e Event) {
			if e.Address.Type == TypeQueue {
				events = append(events, fmt.Sprintf("%d %s %s", e.Kind, e.Address, e.Elapsed))
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		// The default StillInterval is 10s.
		want := []string{"0 queue.medium 0s", "1 queue.medium 10s", "1 queue.medium 20s", "2 queue.medium 25s"}
		if !slices.Equal(events, want) {
			t.Fatalf("events = %q; want %q", events, want)
		}
	})
}

func TestWrongStackState(t *testing.T) {
	f := newFakeBackend()
	mustApply(t, testConfig("ci"), f)
	_, err := MakePlan(context.Background(), testConfig("prod"), f.live(), PlanOptions{})
	if !errors.Is(err, ErrWrongStack) {
		t.Fatalf("err = %v", err)
	}
}

func TestCorruptStateIsAnError(t *testing.T) {
	f := newFakeBackend()
	f.doc, f.version = []byte(`{"format_version": 1, "stack": "ci", "pools": {"x": {"slots": "many"}}}`), 3
	_, err := MakePlan(context.Background(), testConfig("ci"), f.live(), PlanOptions{})
	if !errors.Is(err, ErrDocFormat) || !strings.Contains(err.Error(), "version 3") {
		t.Fatalf("err = %v", err)
	}
}

// TestInterruptedDeleteResumes: a class's removal interrupted after the
// document retired its queue (delete failed) or after the delete (the last
// document write failed) is finished by the next apply, without reporting
// rpd's own deletion as drift.
func TestInterruptedDeleteResumes(t *testing.T) {
	for _, failing := range []string{"DeleteQueue ci-rp-small", "WriteState#2"} {
		t.Run(failing, func(t *testing.T) {
			f := newFakeBackend()
			cfg := testConfig("ci")
			mustApply(t, cfg, f)
			cfg.RunnerClasses = cfg.RunnerClasses[:1]
			writes := 0
			f.fail = func(call string) error {
				if call == "WriteState" {
					writes++
					call = fmt.Sprintf("WriteState#%d", writes)
				}
				if call == failing {
					return errors.New("injected")
				}
				return nil
			}
			p := mustPlan(t, cfg, f.live(), PlanOptions{})
			if _, err := Apply(context.Background(), p, f.live(), ApplyOptions{}); err == nil && failing != "WriteState#2" {
				t.Fatal("apply with a failing call succeeded")
			}
			f.fail = nil
			if !f.state().Queues["small"].Retired {
				t.Fatalf("queue not recorded as retired: %+v", f.state().Queues)
			}
			p = mustPlan(t, cfg, f.live(), PlanOptions{})
			if len(p.Drift) > 0 {
				t.Fatalf("rpd's own deletion reported as drift: %v", p.Drift)
			}
			mustApplyPlan(t, p, f)
			if _, ok := f.state().Queues["small"]; ok || slices.Contains(f.queueNames(), "ci-rp-small") {
				t.Fatalf("not finished: %+v %q", f.state().Queues, f.queueNames())
			}
			if p := mustPlan(t, cfg, f.live(), PlanOptions{}); p.HasChanges() || len(p.Forget) > 0 {
				t.Fatalf("not converged: %q %v", changed(p), p.Forget)
			}
		})
	}
}

func TestRefusedApplyReportsNoEvents(t *testing.T) {
	f := newFakeBackend()
	if _, err := f.Lock(context.Background(), backend.LockInfo{ID: "x", Who: "other@host"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	p := mustPlan(t, testConfig("ci"), f.live(), PlanOptions{})
	var events int
	res, err := Apply(context.Background(), p, f.live(), ApplyOptions{Progress: func(Event) { events++ }})
	if err == nil || res.Started || events != 0 {
		t.Fatalf("err %v, started %v, %d events", err, res.Started, events)
	}
	for _, r := range res.Results {
		if r.Status != Skipped {
			t.Fatalf("%s: %s", r.Address, r.Status)
		}
	}
}
