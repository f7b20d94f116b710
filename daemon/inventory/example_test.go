package inventory_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/daemon/arbiter"
	"github.com/rpdhq/rpd/daemon/internal/component"
	"github.com/rpdhq/rpd/daemon/inventory"
	"github.com/rpdhq/rpd/internal/open"
	"github.com/rpdhq/rpd/reconcile"
	"github.com/rpdhq/rpd/spec"
)

// A runner class on the embedded backend: a booted runner offers itself,
// and a worker picks it up.
func Example() {
	dir, _ := os.MkdirTemp("", "rpd-inventory")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	cfg, diags := spec.NewLoader().LoadSources(map[string][]byte{"main.hcl": []byte(fmt.Sprintf(`
rpd {
  stack = "example"
  backend "local" { path = %q }
}
runner_class "medium" {
  cpu = 2
  mem = "4GiB"
}
`, filepath.Join(dir, "state.db")))}, spec.Vars{})
	if diags.HasErrors() {
		fmt.Println(diags)
		return
	}
	be, err := open.Open(ctx, cfg.Stack, reconcile.BackendConfigOf(cfg.Backend), open.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer be.Close()
	// The class's queue is created as rpd apply creates it.
	plan, err := reconcile.MakePlan(ctx, cfg, be.Live(), reconcile.PlanOptions{Backend: reconcile.BackendConfigOf(cfg.Backend)})
	if err == nil {
		_, err = reconcile.Apply(ctx, plan, be.Live(), reconcile.ApplyOptions{})
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	a, _ := arbiter.New(arbiter.Options{Backend: be, Leases: be.Pools, Grants: be.Grants})
	defer a.Close()
	inv := inventory.New(inventory.Options{Backend: be, Arbiter: a}, time.Now)
	defer inv.Close()
	commits, err := inv.Prepare(component.WatchInput(cfg))
	if err != nil {
		fmt.Println(err)
		return
	}
	changes, _ := component.Commit(commits)
	fmt.Println(changes)

	if _, err := inv.Offer(ctx, "medium", api.Instance{InstanceID: "i-1", UsageClass: "on-demand", InstanceType: "c6i.large", CPU: 2, Mem: 4096, ResourceClass: "medium", Threshold: time.Now().Add(time.Hour)}); err != nil {
		fmt.Println(err)
		return
	}
	got, _, err := inv.Pickup(ctx, "medium", api.PickupRequest{WorkerID: "worker-1", WaitSeconds: 5})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(got.InstanceID, got.State, got.Owner)
	// Output:
	// [runner_class.medium: created]
	// i-1 claimed worker-1
}
