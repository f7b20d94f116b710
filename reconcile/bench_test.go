package reconcile_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend/local"
	"github.com/rpdhq/rpd/reconcile"
	"github.com/rpdhq/rpd/spec"
)

// benchConfig declares n objects: n/2 pools and n/2 runner classes (each
// class is two resources, its queue and its settings).
func benchConfig(stack string, n int) *spec.Config {
	cfg := &spec.Config{Stack: stack}
	for i := range n / 2 {
		cfg.Pools = append(cfg.Pools, spec.Pool{Name: fmt.Sprintf("pool-%05d", i), Slots: 1 + i%50})
	}
	for i := range n - n/2 {
		cfg.RunnerClasses = append(cfg.RunnerClasses, spec.RunnerClass{
			Name: fmt.Sprintf("class-%05d", i), CPU: 2, Mem: 4 << 30, InstanceTypes: []string{"c6i.*"},
			Queue:  spec.QueueSpec{VisibilityTimeout: 30 * time.Second, Retention: 96 * time.Hour},
			Pickup: spec.PickupSpec{RequeueDelay: 3 * time.Second, LocalExhaustion: 5, Mode: spec.PickupModeLease},
		})
	}
	return cfg
}

func openBench(b *testing.B, stack string) reconcile.Live {
	b.Helper()
	lb, err := local.Open(context.Background(), filepath.Join(b.TempDir(), "state.db"), local.Options{Stack: stack})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { lb.Close() })
	return reconcile.Live{Queues: lb, State: lb, Lock: lb, Held: reconcile.HeldSlotsFunc(func(ctx context.Context) (map[string]int, error) {
		recs, err := lb.PoolStore().LoadLeases(ctx)
		held := map[string]int{}
		for _, r := range recs {
			held[r.Pool] += r.Slots
		}
		return held, err
	})}
}

// benchPlanNoChanges applies cfg, then measures planning it again.
func benchPlanNoChanges(b *testing.B, cfg *spec.Config) {
	ctx := context.Background()
	live := openBench(b, cfg.Stack)
	p, err := reconcile.MakePlan(ctx, cfg, live, reconcile.PlanOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := reconcile.Apply(ctx, p, live, reconcile.ApplyOptions{Who: "bench@host"}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p, err := reconcile.MakePlan(ctx, cfg, live, reconcile.PlanOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if p.HasChanges() {
			b.Fatal("plan after apply has changes")
		}
	}
	b.ReportMetric(float64(len(cfg.Pools)+len(cfg.RunnerClasses)), "objects")
}

// BenchmarkPlan10k plans 10,000 declared objects (5,000 pools, 5,000
// runner classes with their queues) against the local backend with
// everything applied: the plan has no changes. Target: under 1 s per op.
func BenchmarkPlan10k(b *testing.B) { benchPlanNoChanges(b, benchConfig("bench", 10_000)) }

// BenchmarkPlan1k is the same with 1,000 objects.
func BenchmarkPlan1k(b *testing.B) { benchPlanNoChanges(b, benchConfig("bench", 1_000)) }

// BenchmarkApply1kNewPools plans and applies 1,000 new pools on a fresh
// local backend.
func BenchmarkApply1kNewPools(b *testing.B) {
	ctx := context.Background()
	cfg := &spec.Config{Stack: "bench"}
	for i := range 1000 {
		cfg.Pools = append(cfg.Pools, spec.Pool{Name: fmt.Sprintf("pool-%04d", i), Slots: 4})
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		live := openBench(b, "bench")
		b.StartTimer()
		p, err := reconcile.MakePlan(ctx, cfg, live, reconcile.PlanOptions{})
		if err != nil {
			b.Fatal(err)
		}
		res, err := reconcile.Apply(ctx, p, live, reconcile.ApplyOptions{Who: "bench@host"})
		if err != nil || res.Done.Add != 1000 {
			b.Fatalf("apply: %+v %v", res.Done, err)
		}
	}
}

// BenchmarkPlan10kPools plans 10,000 pools (no queues), everything applied:
// the engine's own cost, without per-queue backend calls.
func BenchmarkPlan10kPools(b *testing.B) {
	cfg := &spec.Config{Stack: "bench"}
	for i := range 10_000 {
		cfg.Pools = append(cfg.Pools, spec.Pool{Name: fmt.Sprintf("pool-%05d", i), Slots: 1 + i%50})
	}
	benchPlanNoChanges(b, cfg)
}
