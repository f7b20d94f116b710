package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestApplyGoldenPartialFailureJSON is TestApplyGoldenPartialFailure as
// apply -json streams it.
func TestApplyGoldenPartialFailureJSON(t *testing.T) {
	var out bytes.Buffer
	js := &jsonStream{out: &out, now: frozenClock{}.Now}
	p, res, err := applyPartialFailure(t, js.Progress)
	var plan bytes.Buffer
	if err := (&jsonStream{out: &plan, now: frozenClock{}.Now}).Plan(p); err != nil {
		t.Fatal(err)
	}
	js.Result(res, err)
	js.Error(err)
	checkGolden(t, "apply/partial_failure.jsonl", append(plan.Bytes(), out.Bytes()...))
}

// frozenClock stands still, so timestamps in golden output never change.
type frozenClock struct{}

func (frozenClock) Now() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }

// jsonLines parses a JSON-lines stream, failing on any line that is not
// one JSON object with the common fields.
func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var msgs []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON line: %q: %v", line, err)
		}
		for _, k := range []string{"@level", "@message", "@timestamp", "type"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("line lacks %q: %q", k, line)
			}
		}
		msgs = append(msgs, m)
	}
	return msgs
}

func types(msgs []map[string]any) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m["type"].(string))
	}
	return out
}

func TestApplyJSON(t *testing.T) {
	_, file := inProcessConfig(t)

	// No way to ask for "yes": refused before anything is read.
	code, out, errs := runT(t, "apply", "-json", file)
	msgs := jsonLines(t, out)
	if code != 1 || errs != "" || !slices.Equal(types(msgs), []string{"version", "diagnostic"}) ||
		!strings.Contains(msgs[1]["@message"].(string), "add -auto-approve") {
		t.Fatalf("-json without -auto-approve: %d %q %q", code, out, errs)
	}

	code, out, errs = runT(t, "apply", "-json", "-auto-approve", file)
	if code != 0 || errs != "" {
		t.Fatalf("apply -json: %d %q %q", code, out, errs)
	}
	msgs = jsonLines(t, out)
	got := types(msgs)
	if got[0] != "version" || got[len(got)-1] != "change_summary" {
		t.Fatalf("stream order: %q", got)
	}
	count := map[string]int{}
	for _, typ := range got {
		count[typ]++
	}
	// queue.medium, runner_class.medium, pool.database_pool, pool.default_pool.
	if count["planned_change"] != 4 || count["apply_start"] != 4 || count["apply_complete"] != 4 || count["change_summary"] != 2 {
		t.Fatalf("counts %v in %q", count, got)
	}
	last := msgs[len(msgs)-1]["changes"].(map[string]any)
	if last["add"] != 4.0 || last["operation"] != "apply" {
		t.Errorf("closing summary %v", last)
	}

	// Applied: the plan part is empty, the summary says nothing changed.
	code, out, _ = runT(t, "apply", "-json", "-auto-approve", file)
	if got := types(jsonLines(t, out)); code != 0 || !slices.Equal(got, []string{"version", "change_summary", "change_summary"}) {
		t.Fatalf("second apply -json: %d %q", code, got)
	}

	// A configuration error is streamed with its range, not printed as text.
	bad := write(t, filepath.Join(t.TempDir(), "bad.hcl"), badConfig)
	code, out, errs = runT(t, "apply", "-json", "-auto-approve", bad)
	msgs = jsonLines(t, out)
	if code != 1 || errs != "" || len(msgs) != 3 {
		t.Fatalf("bad config: %d %q %q", code, out, errs)
	}
	d := msgs[1]["diagnostic"].(map[string]any)
	r := d["range"].(map[string]any)
	if d["summary"] != `Invalid value for "slots"` || r["filename"] != bad || r["start"].(map[string]any)["line"] != 2.0 {
		t.Errorf("diagnostic %v", d)
	}
}

// TestUnreachableBackendHint: an error from a server that cannot be
// reached says what to check, in text and in JSON.
func TestUnreachableBackendHint(t *testing.T) {
	err := fmt.Errorf("refresh tables: %w", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")})
	var text bytes.Buffer
	(&humanView{stdout: &text, stderr: &text}).Error(err)
	if !strings.Contains(text.String(), "connection refused\n\nrpd could not reach the backend's server: check the network") {
		t.Errorf("text: %q", text.String())
	}
	var js bytes.Buffer
	(&jsonStream{out: &js, now: frozenClock{}.Now}).Error(err)
	d := jsonLines(t, js.String())[0]["diagnostic"].(map[string]any)
	if !strings.HasPrefix(d["detail"].(string), "rpd could not reach") {
		t.Errorf("json: %v", d)
	}
	if hint(errors.New("other")) != "" {
		t.Error("a hint for an unrelated error")
	}
}
