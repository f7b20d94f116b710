package main

import (
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
