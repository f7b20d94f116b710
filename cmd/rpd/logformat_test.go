package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// -log-format json keeps its promise even when the daemon cannot start:
// every line on stderr, configuration diagnostics included, is one JSON
// object.
func TestDaemonJSONLogsOnABadConfiguration(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "main.hcl"), "pool \"p\" {\n  slots = -1\n}\n")
	code, _, errs := runT(t, "watch", "-log-format", "json", "-listen", "127.0.0.1:0", dir)
	if code != 1 {
		t.Fatalf("rpd watch on a bad configuration: exit %d; want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	found := false
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("stderr line %q is not JSON: %v\n%s", l, err, errs)
		}
		if rec["level"] == "ERROR" && rec["msg"] == "configuration error" && strings.Contains(rec["pos"].(string), "main.hcl:2") {
			found = true
		}
	}
	if !found {
		t.Errorf("no JSON record of the configuration error at main.hcl:2:\n%s", errs)
	}
	if code, _, errs := runT(t, "watch", "-log-format", "xml", dir); code != 1 || !strings.Contains(errs, "-log-format \"xml\"") {
		t.Errorf("-log-format xml: exit %d %q", code, errs)
	}
}

// A daemon asked to stop while it starts (SIGTERM during the start-up
// apply, or while restarting as a standby after a step-down) stops
// cleanly: exit 0, no "Error:" claiming its configuration was rejected.
func TestDaemonStoppedWhileStartingExitsZero(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "main.hcl"), "rpd {\n  backend \"local\" {\n    path = \""+filepath.Join(dir, "state.db")+"\"\n  }\n}\npool \"p\" {\n  slots = 1\n}\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	code := runEnv(ctx, &env{stdout: &out, stderr: &errb, stdin: strings.NewReader("")}, []string{"watch", "-listen", "127.0.0.1:0", dir})
	if code != 0 || strings.Contains(errb.String(), "Error:") {
		t.Fatalf("rpd watch stopped while starting: exit %d; want 0 and no error\n%s", code, errb.String())
	}
	write(t, filepath.Join(dir, "main.hcl"), "pool \"p\" {\n  slots = -1\n}\n")
	if code := runEnv(ctx, &env{stdout: &out, stderr: &errb, stdin: strings.NewReader("")}, []string{"watch", "-listen", "127.0.0.1:0", dir}); code != 1 {
		t.Errorf("a bad configuration is a failure even while stopping: exit %d; want 1", code)
	}
}
