package arbiter_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/daemon/arbiter"
	"github.com/rpdhq/rpd/daemon/internal/component"
	"github.com/rpdhq/rpd/internal/open"
	"github.com/rpdhq/rpd/spec"
)

// An arbiter on the embedded backend: a reload declares a pool, a grant
// taken with a request_id is found again by its retry (not granted twice),
// and its release frees the slot.
func Example() {
	dir, _ := os.MkdirTemp("", "rpd-arbiter")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	be, err := open.Open(ctx, "example", backend.Config{Type: "local", Path: filepath.Join(dir, "state.db")}, open.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer be.Close()
	a, err := arbiter.New(arbiter.Options{Backend: be, Leases: be.Pools, Grants: be.Grants})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()

	cfg, diags := spec.NewLoader().LoadSources(map[string][]byte{"main.hcl": []byte(`pool "db" { slots = 1 }`)}, spec.Vars{})
	if diags.HasErrors() {
		fmt.Println(diags)
		return
	}
	commits, err := a.Prepare(component.WatchInput(cfg))
	if err != nil {
		fmt.Println(err)
		return
	}
	changes, _ := a.Commit(ctx, commits)
	fmt.Println(changes)

	req := api.AcquireRequest{TaskID: "job-1", RequestID: "job-1-try"}
	l, _, err := a.AcquireLease(ctx, "db", req)
	if err != nil {
		fmt.Println(err)
		return
	}
	retry, _, _ := a.AcquireLease(ctx, "db", req) // its answer was lost
	p, _ := a.Pool(ctx, "db")
	fmt.Println(l.LeaseID, retry.LeaseID == l.LeaseID, p.Used)
	_ = a.Release(ctx, l.LeaseID)
	p, _ = a.Pool(ctx, "db")
	fmt.Println(p.Used)
	// Output:
	// [pool.db: created with 1 slots pool.default_pool: created with 16 slots]
	// db.r-job-1-try true 1
	// 0
}
