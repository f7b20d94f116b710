package reconcile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/spec"
)

// genConfig draws a configuration over a small universe of names, so that
// successive draws create, update, rename and delete the same objects.
func genConfig(t *rapid.T, label string) *spec.Config {
	cfg := &spec.Config{Stack: "prop"}
	for _, name := range []string{"a", "b", "c"} {
		if !rapid.Bool().Draw(t, label+" class "+name) {
			continue
		}
		c := testClass(name, rapid.IntRange(1, 3).Draw(t, label+" cpu "+name))
		c.Queue.VisibilityTimeout = time.Duration(rapid.IntRange(1, 3).Draw(t, label+" vt "+name)) * 10 * time.Second
		if rapid.Bool().Draw(t, label+" rename "+name) {
			c.Queue.Name = "prop-custom-" + name
		}
		c.AllowDestroy = rapid.Bool().Draw(t, label+" allow "+name)
		cfg.RunnerClasses = append(cfg.RunnerClasses, c)
	}
	for _, name := range []string{"p1", "p2", spec.DefaultPoolName} {
		if name == spec.DefaultPoolName || rapid.Bool().Draw(t, label+" pool "+name) {
			cfg.Pools = append(cfg.Pools, spec.Pool{Name: name, Slots: rapid.IntRange(1, 5).Draw(t, label+" slots "+name)})
		}
	}
	if rapid.Bool().Draw(t, label+" priority") {
		cfg.Priorities = []spec.Priority{{Name: "hi", Weight: rapid.IntRange(1, 100).Draw(t, label+" weight")}}
	}
	return cfg
}

// TestPropertyApplyConverges: whatever the sequence of configurations and
// wherever an apply is cut short by a failing backend call, one fault-free
// plan+apply afterwards converges: the next plan has no changes, the live
// queues are exactly the declared ones (plus the untagged queue rpd must
// never touch), and the runtime document equals the configuration.
func TestPropertyApplyConverges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		f := newFakeBackend()
		f.queues["prop-rp-zz"] = &backend.QueueInfo{Name: "prop-rp-zz", Attributes: backend.QueueAttributes{Tags: map[string]string{}}}
		steps := rapid.IntRange(1, 4).Draw(t, "steps")
		var cfg *spec.Config
		for i := range steps {
			cfg = genConfig(t, fmt.Sprintf("step %d", i))
			failAt := rapid.IntRange(0, 40).Draw(t, fmt.Sprintf("fail at %d", i)) // 0: no fault
			n := 0
			f.fail = func(call string) error {
				n++
				if failAt > 0 && n >= failAt && call != "Unlock" {
					return errors.New("injected")
				}
				return nil
			}
			if p, err := MakePlan(ctx, cfg, f.live(), PlanOptions{Parallelism: 1}); err == nil {
				_, _ = Apply(ctx, p, f.live(), ApplyOptions{AllowDestroyNonEmpty: true, Parallelism: 1})
			}
			f.fail = nil
			if f.lock != nil {
				t.Fatalf("step %d: lock left held", i)
			}
			if _, ok := f.queues["prop-rp-zz"]; !ok {
				t.Fatal("the untagged queue was deleted")
			}
		}
		p, err := MakePlan(ctx, cfg, f.live(), PlanOptions{})
		if err != nil {
			t.Fatalf("final plan: %v", err)
		}
		if _, err := Apply(ctx, p, f.live(), ApplyOptions{AllowDestroyNonEmpty: true}); err != nil {
			t.Fatalf("final apply: %v", err)
		}
		p, err = MakePlan(ctx, cfg, f.live(), PlanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.HasChanges() || len(p.Drift) > 0 || len(p.Forget) > 0 {
			t.Fatalf("not converged: %q drift %v forget %v", changed(p), p.Drift, p.Forget)
		}
		want := []string{"prop-rp-zz"}
		desired := DesiredDoc(cfg)
		for _, q := range desired.Queues {
			want = append(want, q.Name)
		}
		slices.Sort(want)
		if got := f.queueNames(); !slices.Equal(got, want) {
			t.Fatalf("queues %q, want %q", got, want)
		}
		doc := f.state()
		doc.Lineage = ""
		if !maps.EqualFunc(doc.Pools, desired.Pools, func(a, b PoolEntry) bool { return a == b }) ||
			len(doc.RunnerClasses) != len(desired.RunnerClasses) || len(doc.Queues) != len(desired.Queues) ||
			len(doc.Priorities) != len(desired.Priorities) {
			t.Fatalf("runtime document %+v\nwant %+v", doc, desired)
		}
	})
}

// TestConcurrentAppliesSerialize runs applies of different configurations
// at once: the lock lets one at a time change state, the others fail
// cleanly (lock held, or stale), and the state is one of the configurations
// entirely, never a mix.
func TestConcurrentAppliesSerialize(t *testing.T) {
	ctx := context.Background()
	for round := range 20 {
		f := newFakeBackend()
		mustApply(t, testConfig("ci"), f)
		const n = 6
		plans := make([]*Plan, n)
		for i := range n {
			cfg := testConfig("ci")
			cfg.Pools[0].Slots = 10 + i
			cfg.Priorities[0].Weight = 10 + i
			plans[i] = mustPlan(t, cfg, f.live(), PlanOptions{})
		}
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = Apply(ctx, plans[i], f.live(), ApplyOptions{Who: fmt.Sprint("w", i)})
			}()
		}
		wg.Wait()
		winners := 0
		for i, err := range errs {
			var locked *backend.LockedError
			switch {
			case err == nil:
				winners++
			case errors.As(err, &locked), errors.Is(err, ErrStalePlan):
			default:
				t.Fatalf("round %d apply %d: unexpected error %v", round, i, err)
			}
		}
		if winners != 1 {
			t.Fatalf("round %d: %d applies succeeded from the same state version, want exactly 1", round, winners)
		}
		doc := f.state()
		if doc.Pools["database_pool"].Slots-10 != doc.Priorities["critical"].Weight-10 {
			t.Fatalf("round %d: a mixed state: %+v %+v", round, doc.Pools, doc.Priorities)
		}
		if f.lock != nil {
			t.Fatalf("round %d: lock left held", round)
		}
	}
}
