// Package deploy_test checks the files under deploy/ against the daemon
// they deploy: the alert rules and the dashboard name only series the
// daemon exports, the rules pass promtool (Debian's prometheus package)
// with their unit tests, and the manifests say what docs/operations.md
// promises (pinned image, no API token, probe timeouts, a dynamic user).
package deploy_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/client"
	"github.com/rpdhq/rpd/daemon"
)

// exported runs a daemon with a pool and a budget, makes a grant and
// returns the names of the series its /metrics serves.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	dir, state := t.TempDir(), t.TempDir()
	conf := "rpd {\n  stack = \"deploy\"\n  backend \"local\" { path = \"" + filepath.Join(state, "state.db") + "\" }\n}\n" +
		"pool \"db\" {\n  slots = 1\n}\nbudget \"scanner\" {\n  scan_ring = \"1MiB\"\n  delta_cache = \"1MiB\"\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d, err := daemon.New(ctx, daemon.Options{Mode: daemon.ModeWatch, Path: dir, Listen: "127.0.0.1:0", ManualReload: true})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	c, err := client.New(d.Addr(), client.WithRetry(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(ctx, "db", api.AcquireRequest{}); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for range 2 { // the first scrape's own request shows in the second
		resp, err := http.Get("http://" + d.Addr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(b), "\n") {
			if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
				names[strings.Fields(f)[0]] = true
			}
		}
	}
	return names
}

var seriesRE = regexp.MustCompile(`\brpd_[a-z_]+`)

// referenced returns the rpd_ series names in text, histogram suffixes
// removed.
func referenced(text string) []string {
	var out []string
	for _, n := range seriesRE.FindAllString(text, -1) {
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(n, suf); ok && (suf != "_count" || !strings.HasSuffix(base, "_total")) {
				n = base
				break
			}
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func TestRulesAndDashboardNameExportedSeries(t *testing.T) {
	names := exported(t)
	rules, err := os.ReadFile("prometheus/rpd-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	dash, err := os.ReadFile("grafana/rpd-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dash, &d); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	var exprs strings.Builder
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs.WriteString(tg.Expr + "\n")
		}
	}
	for file, text := range map[string]string{"prometheus/rpd-alerts.yml": string(rules), "grafana/rpd-dashboard.json": exprs.String()} {
		refs := referenced(text)
		if len(refs) == 0 {
			t.Errorf("%s names no rpd series", file)
		}
		for _, n := range refs {
			if !names[n] {
				t.Errorf("%s names %s, which the daemon does not export", file, n)
			}
		}
	}
}

// promtool checks the rules and runs their unit tests; CI installs it
// (Debian's prometheus package), elsewhere the test skips without it.
func TestPromtool(t *testing.T) {
	if _, err := exec.LookPath("promtool"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool is not on PATH; CI installs Debian's prometheus package for it")
		}
		t.Skip("promtool is not on PATH (apt-get install prometheus)")
	}
	for _, args := range [][]string{{"check", "rules", "rpd-alerts.yml"}, {"test", "rules", "rpd-alerts_test.yml"}} {
		cmd := exec.Command("promtool", args...)
		cmd.Dir = "prometheus"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// The deploy files keep the properties an SRE reads them for; each line
// is one the issue found missing.
func TestManifestsSayWhatTheDocsPromise(t *testing.T) {
	for _, tc := range []struct {
		file    string
		want    []string
		notWant []string
	}{
		{"Dockerfile", []string{"--chown=65532:65532", "VOLUME [\"/var/lib/rpd\"]", "buildinfo.version=${VERSION}", "buildinfo.revision=${REVISION}", "USER 65532:65532"}, nil},
		{"../.dockerignore", []string{".git", "**/node_modules", "**/.rpd", "*.db"}, nil},
		{"kubernetes/rpd.yaml", []string{"serviceAccountName: rpd", "automountServiceAccountToken: false", "topologySpreadConstraints:", "timeoutSeconds:", "kind: ServiceAccount"}, []string{":latest"}},
		{"systemd/rpd.service", []string{"DynamicUser=yes", "StateDirectory=rpd", "LimitRTPRIO=1"}, []string{"User=rpd"}},
	} {
		b, err := os.ReadFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s lacks %q", tc.file, w)
			}
		}
		for _, w := range tc.notWant {
			if strings.Contains(string(b), w) {
				t.Errorf("%s has %q", tc.file, w)
			}
		}
	}
}
