package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

func TestStateListAndShow(t *testing.T) {
	_, file := inProcessConfig(t)

	// Before any apply the state is empty, and says so.
	code, out, errs := runT(t, "state", "list", "-config", file)
	if code != 0 || out != "" || !strings.Contains(errs, "empty") {
		t.Fatalf("state list before apply = %d %q %q, want an empty state", code, out, errs)
	}
	if code, _, errs := runT(t, "apply", "-auto-approve", "-no-color", file); code != 0 {
		t.Fatalf("apply: %s", errs)
	}

	code, out, errs = runT(t, "state", "list", "-config", file)
	want := "queue.medium\nrunner_class.medium\npool.database_pool\npool.default_pool\n"
	if code != 0 || out != want {
		t.Fatalf("state list = %d %q (%s), want %q", code, out, errs, want)
	}
	if code, out, _ := runT(t, "state", "list", "-config", file, "pool", "queue.medium"); code != 0 || out != "queue.medium\npool.database_pool\npool.default_pool\n" {
		t.Errorf("state list pool queue.medium = %d %q", code, out)
	}
	// The configuration as the first argument, as every other command takes it.
	if code, out, errs := runT(t, "state", "list", file, "pool"); code != 0 || out != "pool.database_pool\npool.default_pool\n" {
		t.Errorf("state list FILE pool = %d %q %q", code, out, errs)
	}
	if code, out, errs := runT(t, "state", "show", "-no-color", file, "pool.database_pool"); code != 0 || !strings.Contains(out, "# pool.database_pool:") {
		t.Errorf("state show FILE pool.database_pool = %d %q %q", code, out, errs)
	}
	if code, _, errs := runT(t, "state", "list", "-config", file, file); code != 1 || !strings.Contains(errs, "given twice") {
		t.Errorf("state list -config FILE FILE = %d %q", code, errs)
	}

	code, out, errs = runT(t, "state", "show", "-config", file, "-no-color", "pool.database_pool")
	if code != 0 || !strings.Contains(out, "# pool.database_pool:\npool \"database_pool\" {\n") || !strings.Contains(out, "    slots         = 3\n") || !strings.HasSuffix(out, "}\n") {
		t.Fatalf("state show = %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, `lease_ttl     = "0s"`) {
		t.Errorf("state show renders durations unlike plan:\n%s", out)
	}

	code, out, _ = runT(t, "state", "list", "-json", "-config", file)
	var doc struct {
		Stack        string `json:"stack"`
		StateVersion int64  `json:"state_version"`
		Resources    []struct {
			Address string         `json:"address"`
			Values  map[string]any `json:"values"`
		} `json:"resources"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 {
		t.Fatalf("state list -json = %d %s: %v", code, out, err)
	}
	if doc.Stack != "inproc" || doc.StateVersion < 1 || len(doc.Resources) != 4 || doc.Resources[2].Address != "pool.database_pool" || doc.Resources[2].Values["slots"] != 3.0 {
		t.Errorf("state list -json = %+v", doc)
	}
	code, out, _ = runT(t, "state", "show", "-json", "-config", file, "runner_class.medium")
	if code != 0 || !strings.Contains(out, `"address": "runner_class.medium"`) || !strings.Contains(out, `"mem": "4GiB"`) {
		t.Errorf("state show -json = %d %s", code, out)
	}

	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"state", "show", "-config", file, "pool.nope"}, "no resource pool.nope"},
		{[]string{"state", "show", "-config", file, "nope"}, "invalid resource address"},
		{[]string{"state", "show", "-config", file}, "exactly one resource address"},
		{[]string{"state", "list", "-config", file + ".missing"}, "missing"},
		{[]string{"state", "frob"}, "unknown subcommand"},
		{[]string{"state"}, "Usage: rpd state"},
		{[]string{"state", "list", "pool", "-json"}, "options go before"},
	} {
		code, _, errs := runT(t, tc.args...)
		if code != 1 || !strings.Contains(errs, tc.msg) {
			t.Errorf("rpd %s = %d %q, want 1 and %q", strings.Join(tc.args, " "), code, errs, tc.msg)
		}
	}
	if code, out, _ := runT(t, "state", "-h"); code != 0 || !strings.Contains(out, "rpd state show") {
		t.Errorf("state -h = %d %q", code, out)
	}
}

// In a directory without *.hcl files, rpd state reads the default local
// backend, as rpd watch DIR run from that directory writes it.
func TestStateListDefaultsInAnEmptyDirectory(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	code, out, errs := runT(t, "state", "list")
	if code != 0 || out != "" || !strings.Contains(errs, `stack "default" is empty`) {
		t.Fatalf("state list in an empty directory = %d %q %q", code, out, errs)
	}
	if _, err := os.Stat(".rpd"); err == nil {
		t.Error("state list created the local backend: it must only read")
	}
}
