package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/local"
	"github.com/rpdhq/rpd/internal/open"
	"github.com/rpdhq/rpd/reconcile"
	"github.com/rpdhq/rpd/runtime/pools"
	"github.com/rpdhq/rpd/spec"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata/")

// goldenFull is the configuration most scenarios start from.
const goldenFull = `
runner_class "medium" {
  cpu            = 2
  mem            = "4GiB"
  instance_types = ["c6i.large", "m6i.*"]
}

runner_class "small" {
  cpu = 1
  mem = "2GiB"
  queue {
    visibility_timeout = "45s"
  }
}

budget "scanner" {
  spill_slots = 8
}

vm_ceiling "browser-vms" {
  max = 100
  usage "http" {
    url = "http://127.0.0.1:9000/usage"
  }
}

pool "database_pool" {
  slots       = 3
  description = "at most 3 concurrent heavy queries"
  lease_ttl   = "10m"
}

priority "critical" {
  weight = 100
}
`

// goldenConfig loads body under an rpd block for stack "golden" whose
// local backend lives in dir.
func goldenConfig(t *testing.T, dir, body string) *spec.Config {
	t.Helper()
	src := "rpd {\n  stack = \"golden\"\n  backend \"local\" {\n    path = \"" + filepath.ToSlash(filepath.Join(dir, "state.db")) + "\"\n  }\n}\n" + body
	path := filepath.Join(dir, "main.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := spec.Load(path, spec.Vars{})
	if diags.HasErrors() {
		t.Fatalf("load: %v", diags)
	}
	return cfg
}

func openGolden(t *testing.T, cfg *spec.Config) (*local.Backend, reconcile.Live) {
	t.Helper()
	lb, err := local.Open(context.Background(), cfg.Backend.Path, local.Options{Stack: cfg.Stack})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lb.Close() })
	return lb, open.Local(lb).Live()
}

func applyConfig(t *testing.T, cfg *spec.Config, live reconcile.Live) {
	t.Helper()
	p, err := reconcile.MakePlan(context.Background(), cfg, live, reconcile.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reconcile.Apply(context.Background(), p, live, reconcile.ApplyOptions{Who: "golden@test"}); err != nil {
		t.Fatal(err)
	}
}

// checkGolden compares got with testdata/NAME, or rewrites it with -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/rpd -run %s -update to create it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (-update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestPlanGolden(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		before string // applied first; "" applies nothing
		after  string // planned
		mutate func(t *testing.T, lb *local.Backend)
		opts   reconcile.PlanOptions
		color  bool
		// wantErr: the plan fails, and the golden files hold the error
		// as each view renders it.
		wantErr bool
	}{
		{name: "empty_to_full", after: goldenFull},
		{name: "no_op", before: goldenFull, after: goldenFull},
		{name: "update", before: goldenFull, after: strings.NewReplacer(
			`slots       = 3`, `slots       = 5`,
			`mem = "2GiB"`, `mem = "3GiB"`,
			`visibility_timeout = "45s"`, `visibility_timeout = "1m"`,
		).Replace(goldenFull)},
		{name: "update_color", before: goldenFull, after: strings.Replace(goldenFull, `slots       = 3`, `slots       = 5`, 1), color: true},
		{name: "replace", before: goldenFull, after: strings.Replace(goldenFull, `visibility_timeout = "45s"`, "visibility_timeout = \"45s\"\n    name = \"golden-small-v2\"", 1)},
		{name: "delete", before: goldenFull, after: goldenFull[:strings.Index(goldenFull, `runner_class "small"`)] + goldenFull[strings.Index(goldenFull, `budget "scanner"`):strings.Index(goldenFull, `priority "critical"`)]},
		{name: "drift", before: goldenFull, after: goldenFull, mutate: func(t *testing.T, lb *local.Backend) {
			attrs := backend.QueueAttributes{VisibilityTimeout: 30 * time.Second, Retention: time.Hour, Tags: map[string]string{backend.StackTag: "golden"}}
			if err := lb.UpdateQueue(ctx, "golden-rp-medium", attrs); err != nil {
				t.Fatal(err)
			}
			if err := lb.DeleteQueue(ctx, "golden-rp-small"); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "refresh_only", before: goldenFull, after: goldenFull, opts: reconcile.PlanOptions{RefreshOnly: true}, mutate: func(t *testing.T, lb *local.Backend) {
			attrs := backend.QueueAttributes{VisibilityTimeout: 2 * time.Minute, Retention: 96 * time.Hour, Tags: map[string]string{backend.StackTag: "golden"}}
			if err := lb.UpdateQueue(ctx, "golden-rp-medium", attrs); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "destroy", before: goldenFull, after: goldenFull, opts: reconcile.PlanOptions{Destroy: true, AllowDestroyNonEmpty: true}, mutate: holdLease},
		{name: "guard", before: goldenFull, after: goldenFull, opts: reconcile.PlanOptions{Destroy: true}, wantErr: true, mutate: func(t *testing.T, lb *local.Backend) {
			holdLease(t, lb)
			if err := lb.Queue("golden-rp-small").Send(ctx, `{"instanceId":"i-1"}`, 0); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "warnings", before: goldenFull, after: strings.Replace(goldenFull[:strings.Index(goldenFull, `runner_class "small"`)]+goldenFull[strings.Index(goldenFull, `budget "scanner"`):], `slots       = 3`, `slots       = 1`, 1),
			opts: reconcile.PlanOptions{AllowDestroyNonEmpty: true},
			mutate: func(t *testing.T, lb *local.Backend) {
				for i, slots := range []int{2, 1} {
					rec := pools.LeaseRecord{LeaseID: "lease-" + string(rune('a'+i)), Pool: "database_pool", TaskID: "job", Slots: slots, GrantedAt: time.Now()}
					if err := lb.PoolStore().PutLease(ctx, rec); err != nil {
						t.Fatal(err)
					}
				}
				for range 3 {
					if err := lb.Queue("golden-rp-small").Send(ctx, `{"instanceId":"i-1"}`, 0); err != nil {
						t.Fatal(err)
					}
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var lb *local.Backend
			var live reconcile.Live
			if tc.before != "" {
				cfg := goldenConfig(t, dir, tc.before)
				lb, live = openGolden(t, cfg)
				applyConfig(t, cfg, live)
			}
			cfg := goldenConfig(t, dir, tc.after)
			if lb == nil {
				lb, live = openGolden(t, cfg)
			}
			if tc.mutate != nil {
				tc.mutate(t, lb)
			}
			p, err := reconcile.MakePlan(ctx, cfg, live, tc.opts)
			var text, js, errs bytes.Buffer
			if tc.wantErr {
				if err == nil {
					t.Fatal("the plan succeeded; want an error")
				}
				newPlanView(false, &text, &text, false).Error(err)
				newPlanView(true, &js, &js, false).Error(err)
				checkGolden(t, "plan/"+tc.name+".txt", text.Bytes())
				checkGolden(t, "plan/"+tc.name+".json", js.Bytes())
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := newPlanView(false, &text, &errs, tc.color).Plan(p); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, "plan/"+tc.name+".txt", text.Bytes())
			if tc.color {
				return
			}
			if err := newPlanView(true, &js, &errs, false).Plan(p); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, "plan/"+tc.name+".json", js.Bytes())

			// A saved plan renders the same after a round trip.
			b, err := reconcile.EncodePlan(p)
			if err != nil {
				t.Fatal(err)
			}
			back, err := reconcile.DecodePlan(b)
			if err != nil {
				t.Fatal(err)
			}
			var text2, js2 bytes.Buffer
			_ = newPlanView(false, &text2, &errs, false).Plan(back)
			_ = newPlanView(true, &js2, &errs, false).Plan(back)
			if text2.String() != text.String() || js2.String() != js.String() {
				t.Errorf("a saved plan renders differently:\n%s\n---\n%s", text2.String(), js2.String())
			}
		})
	}
}

// holdLease records a lease of one slot of database_pool, as a daemon
// granting it would.
func holdLease(t *testing.T, lb *local.Backend) {
	t.Helper()
	rec := pools.LeaseRecord{LeaseID: "lease-held", Pool: "database_pool", TaskID: "job", Slots: 1, GrantedAt: time.Now()}
	if err := lb.PoolStore().PutLease(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
}

// TestApplyGoldenPartialFailure renders an apply where one queue cannot be
// created: its class is skipped, everything independent applies, and the
// closing table says what did and did not happen.
func TestApplyGoldenPartialFailure(t *testing.T) {
	var out bytes.Buffer
	av := &applyView{out: &out}
	_, res, err := applyPartialFailure(t, av.Progress)
	av.Result(res, err)
	(&humanView{stdout: &out, stderr: &out}).Error(err)
	checkGolden(t, "apply/partial_failure.txt", out.Bytes())
}

// applyPartialFailure plans goldenFull on a fresh backend and applies it
// with CreateQueue of golden-rp-small failing, reporting progress with
// every elapsed time 0s and no "Still" events, so the output does not
// depend on how fast the machine is.
func applyPartialFailure(t *testing.T, progress func(reconcile.Event)) (*reconcile.Plan, *reconcile.ApplyResult, error) {
	t.Helper()
	ctx := context.Background()
	cfg := goldenConfig(t, t.TempDir(), goldenFull)
	_, live := openGolden(t, cfg)
	f := &faults{rule: func(_ int, call string) bool { return call == "CreateQueue golden-rp-small" }}
	live = f.wrap(live)
	p, err := reconcile.MakePlan(ctx, cfg, live, reconcile.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	timeless := func(e reconcile.Event) {
		if e.Kind == reconcile.EventStill {
			return
		}
		e.Elapsed = 0
		progress(e)
	}
	res, err := reconcile.Apply(ctx, p, live, reconcile.ApplyOptions{Who: "golden@test", Parallelism: 1, Progress: timeless})
	if err == nil {
		t.Fatal("apply with a failing queue succeeded")
	}
	return p, res, err
}
