package main

import (
	"bufio"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend/local"
	"github.com/rpdhq/rpd/runtime/pools"
)

// openInProcess opens the local backend of inProcessConfig's directory.
func openInProcess(t *testing.T, dir string) *local.Backend {
	t.Helper()
	lb, err := local.Open(context.Background(), filepath.Join(dir, "state.db"), local.Options{Stack: "inproc"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lb.Close() })
	return lb
}

func TestDestroy(t *testing.T) {
	dir, file := inProcessConfig(t)
	if code, out, errs := runT(t, "apply", "-auto-approve", "-no-color", file); code != 0 {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, errs)
	}
	lb := openInProcess(t, dir)
	ctx := context.Background()
	rec := pools.LeaseRecord{LeaseID: "l-1", Pool: "default_pool", TaskID: "job", Slots: 1, GrantedAt: time.Now()}
	if err := lb.PoolStore().PutLease(ctx, rec); err != nil {
		t.Fatal(err)
	}

	// The plan shows every resource, default_pool included; the held slot
	// is refused, whatever the exit code path.
	code, out, errs := runT(t, "plan", "-destroy", "-no-color", file)
	if code != 1 || !strings.Contains(errs, "pool.default_pool: 1 slot held") || !strings.Contains(errs, "-allow-destroy-nonempty") {
		t.Fatalf("plan -destroy with a held slot: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = runT(t, "plan", "-destroy", "-allow-destroy-nonempty", "-detailed-exitcode", "-no-color", file)
	for _, want := range []string{"- pool \"default_pool\"", "- queue \"medium\"", "Plan: 0 to add, 0 to change, 4 to destroy.", "the 1 lease record a daemon recorded"} {
		if code != 2 || !strings.Contains(out, want) {
			t.Fatalf("plan -destroy lacks %q: exit %d\n%s\n%s", want, code, out, errs)
		}
	}

	// Confirmation like apply's: refused without a terminal, asked on one.
	code, _, errs = runEnvT(t, &env{}, "destroy", "-allow-destroy-nonempty", "-no-color", file)
	if code != 1 || !strings.Contains(errs, "destroy needs confirmation") || !strings.Contains(errs, "-auto-approve") {
		t.Fatalf("destroy without a terminal: exit %d\n%s", code, errs)
	}
	code, out, errs = runEnvT(t, terminalEnv("no\n"), "destroy", "-allow-destroy-nonempty", "-no-color", file)
	if code != 1 || !strings.Contains(out, "Do you really want to destroy all resources?") || !strings.Contains(errs, "Destroy cancelled.") {
		t.Fatalf("answer no: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = runEnvT(t, terminalEnv("yes\n"), "destroy", "-allow-destroy-nonempty", "-no-color", file)
	if code != 0 || !strings.Contains(out, "Destroy complete! Resources: 4 destroyed, 1 lease record removed.") {
		t.Fatalf("answer yes: exit %d\n%s\n%s", code, out, errs)
	}
	if recs, err := lb.PoolStore().LoadLeases(ctx); err != nil || len(recs) != 0 {
		t.Fatalf("lease records after destroy: %v, %v", recs, err)
	}
	if names, err := lb.ListQueues(ctx, ""); err != nil || len(names) != 0 {
		t.Fatalf("queues after destroy: %v, %v", names, err)
	}

	// Destroyed: nothing left to destroy, and a plan creates it all again.
	code, out, _ = runT(t, "destroy", "-auto-approve", "-no-color", file)
	if code != 0 || !strings.Contains(out, "No objects need to be destroyed.") {
		t.Fatalf("destroy twice: exit %d\n%s", code, out)
	}
	if code, out, _ = runT(t, "plan", "-detailed-exitcode", "-no-color", file); code != 2 || !strings.Contains(out, "4 to add") {
		t.Fatalf("plan after destroy: exit %d\n%s", code, out)
	}
}

func TestDestroyJSONAndMisuse(t *testing.T) {
	dir, file := inProcessConfig(t)
	if code, _, errs := runT(t, "apply", "-auto-approve", file); code != 0 {
		t.Fatalf("apply: %s", errs)
	}
	code, out, errs := runT(t, "destroy", "-json", file)
	if code != 1 || errs != "" || !strings.Contains(out, "-auto-approve") {
		t.Fatalf("destroy -json without -auto-approve: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = runT(t, "destroy", "-json", "-auto-approve", file)
	if code != 0 || errs != "" {
		t.Fatalf("destroy -json: exit %d\n%s\n%s", code, out, errs)
	}
	var last map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		last = nil
		if err := json.Unmarshal(sc.Bytes(), &last); err != nil {
			t.Fatalf("not a JSON line: %q", sc.Text())
		}
	}
	changes, _ := last["changes"].(map[string]any)
	if last["type"] != "change_summary" || changes["operation"] != "destroy" || changes["remove"] != float64(4) {
		t.Fatalf("last line = %v", last)
	}

	planFile := filepath.Join(dir, "p.plan")
	write(t, planFile, "{}")
	if code, _, errs := runT(t, "destroy", planFile); code != 1 || !strings.Contains(errs, "rpd plan -destroy -out FILE") {
		t.Fatalf("destroy of a saved plan: exit %d\n%s", code, errs)
	}
	if code, _, errs := runT(t, "plan", "-destroy", "-refresh-only", file); code != 1 || !strings.Contains(errs, "cannot be combined") {
		t.Fatalf("plan -destroy -refresh-only: exit %d\n%s", code, errs)
	}
	if code, _, errs := runT(t, "destroy", "-refresh-only", file); code != 1 || !strings.Contains(errs, "flag provided but not defined: -refresh-only") {
		t.Fatalf("destroy -refresh-only: exit %d\n%s", code, errs)
	}
}

// A saved destroy plan applies with rpd apply, and carries
// -allow-destroy-nonempty.
func TestSavedDestroyPlan(t *testing.T) {
	dir, file := inProcessConfig(t)
	if code, _, errs := runT(t, "apply", "-auto-approve", file); code != 0 {
		t.Fatalf("apply: %s", errs)
	}
	lb := openInProcess(t, dir)
	if err := lb.Queue("inproc-rp-medium").Send(context.Background(), `{"instanceId":"i-1"}`, 0); err != nil {
		t.Fatal(err)
	}
	planFile := filepath.Join(dir, "destroy.plan")
	if code, _, errs := runT(t, "plan", "-destroy", "-out", planFile, file); code != 1 || !strings.Contains(errs, "holds 1 idle runner") {
		t.Fatalf("plan -destroy of a non-empty queue: exit %d\n%s", code, errs)
	}
	if code, _, errs := runT(t, "plan", "-destroy", "-allow-destroy-nonempty", "-out", planFile, file); code != 0 {
		t.Fatalf("plan -destroy -allow-destroy-nonempty: exit %d\n%s", code, errs)
	}
	code, out, errs := runT(t, "apply", "-no-color", planFile)
	if code != 0 || !strings.Contains(out, "Destroy complete! Resources: 4 destroyed.") {
		t.Fatalf("apply of the destroy plan: exit %d\n%s\n%s", code, out, errs)
	}
}
