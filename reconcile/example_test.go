package reconcile_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rpdhq/rpd/backend/local"
	"github.com/rpdhq/rpd/reconcile"
	"github.com/rpdhq/rpd/spec"
)

// A plan against an empty local backend creates everything; after Apply,
// a new plan has no changes.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "rpd-example")
	defer os.RemoveAll(dir)
	b, err := local.Open(ctx, filepath.Join(dir, "state.db"), local.Options{Stack: "demo"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	live := reconcile.Live{Queues: b, State: b, Lock: b}

	cfg := &spec.Config{
		Stack: "demo",
		RunnerClasses: []spec.RunnerClass{{
			Name: "medium", CPU: 2, Mem: 4 << 30,
			Queue:  spec.QueueSpec{VisibilityTimeout: 30 * time.Second, Retention: 96 * time.Hour},
			Pickup: spec.PickupSpec{RequeueDelay: 3 * time.Second, LocalExhaustion: 5, Mode: spec.PickupModeLease},
		}},
		Pools: []spec.Pool{{Name: spec.DefaultPoolName, Slots: 16}},
	}
	plan, err := reconcile.MakePlan(ctx, cfg, live, reconcile.PlanOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range plan.Changes {
		fmt.Println(c.Action.Symbol(), c.Address)
	}
	fmt.Printf("%+v\n", plan.Summary())

	res, err := reconcile.Apply(ctx, plan, live, reconcile.ApplyOptions{Who: "example@host"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("applied: %+v\n", res.Done)

	again, _ := reconcile.MakePlan(ctx, cfg, live, reconcile.PlanOptions{})
	fmt.Println("changes after apply:", again.HasChanges())
	// Output:
	// + queue.medium
	// + runner_class.medium
	// + pool.default_pool
	// {Add:3 Change:0 Destroy:0}
	// applied: {Add:3 Change:0 Destroy:0}
	// changes after apply: false
}

// A runtime document round-trips through its JSON encoding; daemons run
// the entries it holds.
func ExampleDecodeRuntimeDoc() {
	doc := reconcile.NewRuntimeDoc("demo")
	doc.Pools["database_pool"] = reconcile.PoolEntry{Slots: 3, LeaseTTL: reconcile.Duration(10 * time.Minute)}
	b, _ := doc.Encode()
	back, err := reconcile.DecodeRuntimeDoc(b)
	if err != nil {
		fmt.Println(err)
		return
	}
	p := back.Pools["database_pool"]
	fmt.Println(back.Stack, p.Slots, p.LeaseTTL, p == doc.Pools["database_pool"])
	// Output: demo 3 10m true
}

// Addresses parse from the -target syntax.
func ExampleParseAddress() {
	a, err := reconcile.ParseAddress("pool.database_pool")
	fmt.Println(a.Type, a.Name, err)
	_, err = reconcile.ParseAddress("bucket.x")
	fmt.Println(err)
	// Output:
	// pool database_pool <nil>
	// invalid resource address "bucket.x": unknown type "bucket" (known: table, queue, runner_class, budget, vm_ceiling, pool, priority)
}
