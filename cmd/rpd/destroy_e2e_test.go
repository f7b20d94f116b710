package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend/aws"
	"github.com/rpdhq/rpd/backend/local"
	rpdopen "github.com/rpdhq/rpd/internal/open"
	"github.com/rpdhq/rpd/runtime/pools"
)

// asBackend sees a test's admin handle as an open.Backend (not to be
// closed: the test's cleanup closes the handle).
func asBackend(t *testing.T, admin e2eAdmin) *rpdopen.Backend {
	t.Helper()
	switch b := admin.(type) {
	case *local.Backend:
		return rpdopen.Local(b)
	case *aws.Backend:
		return rpdopen.AWS(b)
	}
	t.Fatalf("unknown backend %T", admin)
	return nil
}

// TestE2EGuardAndDestroy drives the binary on both backends: removing a
// class whose queue holds an idle runner fails the plan and the apply
// with nothing changed; destroy is refused by the same guard, then with
// -allow-destroy-nonempty removes every queue, default_pool and the lease
// records; a plan afterwards creates everything again.
func TestE2EGuardAndDestroy(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be e2eBackend) {
		ctx := context.Background()
		w, stack := setup(t, be)
		// A stack never applied (on aws: no tables, so no lock table).
		r := w.must(0, "destroy", "-auto-approve", "-no-color")
		contains(t, r, "stdout", "No objects need to be destroyed.")
		w.must(0, "apply", "-auto-approve", "-no-color")
		b := asBackend(t, be.open(t, w, stack))
		if err := b.Queue(stack+"-rp-small").Send(ctx, `{"instanceId":"i-1"}`, 0); err != nil {
			t.Fatal(err)
		}
		if err := b.Pools.PutLease(ctx, pools.LeaseRecord{LeaseID: "l-1", Pool: "database_pool", TaskID: "job", Slots: 1, GrantedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}

		w.write("main.hcl", be.header(stack)+strings.Replace(e2eBody, "runner_class \"small\" {\n  cpu = 1\n  mem = \"2GiB\"\n}\n", "", 1))
		for _, args := range [][]string{{"plan", "-no-color"}, {"apply", "-auto-approve", "-no-color"}} {
			r = w.must(1, args...)
			contains(t, r, "stderr", "queue.small: queue "+stack+"-rp-small holds 1 idle runner")
			contains(t, r, "stderr", "-allow-destroy-nonempty")
			if strings.Contains(r.stdout, "Destroying...") || strings.Contains(r.stdout, "Creating...") {
				t.Fatalf("%v changed something: %s", args, r)
			}
		}
		if _, err := b.Queues.DescribeQueue(ctx, stack+"-rp-small"); err != nil {
			t.Fatalf("the guarded queue is gone: %v", err)
		}

		w.write("main.hcl", be.header(stack)+e2eBody)
		r = w.must(1, "destroy", "-auto-approve", "-no-color")
		contains(t, r, "stderr", "holds 1 idle runner")
		contains(t, r, "stderr", "pool.database_pool: 1 slot held")
		r = w.must(2, "plan", "-destroy", "-allow-destroy-nonempty", "-detailed-exitcode", "-no-color")
		contains(t, r, "stdout", `- pool "default_pool"`)
		r = w.must(0, "destroy", "-auto-approve", "-allow-destroy-nonempty", "-no-color")
		contains(t, r, "stdout", "Destroy complete! Resources: 6 destroyed, 1 lease record removed.")
		names, err := b.Queues.ListQueues(ctx, stack+"-")
		if err != nil || len(names) != 0 {
			t.Fatalf("queues after destroy: %v, %v", names, err)
		}
		if recs, err := b.Pools.LoadLeases(ctx); err != nil || len(recs) != 0 {
			t.Fatalf("lease records after destroy: %v, %v", recs, err)
		}
		w.must(0, "destroy", "-auto-approve", "-no-color")
		r = w.must(2, "plan", "-detailed-exitcode", "-no-color")
		contains(t, r, "stdout", "Plan: 6 to add")
	})
}
