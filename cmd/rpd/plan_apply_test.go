package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rpdhq/rpd/reconcile"
)

// inProcessConfig writes a configuration whose local backend lives in the
// test's temp dir, so commands run in-process need no chdir.
func inProcessConfig(t *testing.T) (dir, file string) {
	t.Helper()
	dir = t.TempDir()
	file = write(t, filepath.Join(dir, "main.hcl"), `rpd {
  stack = "inproc"
  backend "local" {
    path = "`+filepath.ToSlash(filepath.Join(dir, "state.db"))+`"
  }
}

runner_class "medium" {
  cpu = 2
  mem = "4GiB"
}

pool "database_pool" {
  slots = 3
}
`)
	return dir, file
}

// terminalStdin is a stdin that the fake isTerminal below calls a terminal.
type terminalStdin struct {
	io.Reader
	io.Writer
}

func terminalEnv(answer string) *env {
	in := terminalStdin{strings.NewReader(answer), io.Discard}
	return &env{
		stdin:      in,
		isTerminal: func(w io.Writer) bool { _, ok := w.(terminalStdin); return ok },
	}
}

func TestApplyAsksForYes(t *testing.T) {
	_, file := inProcessConfig(t)

	code, out, errs := runEnvT(t, terminalEnv("no\n"), "apply", "-no-color", file)
	if code != 1 || !strings.Contains(out, "Only 'yes' will be accepted to approve.") || !strings.Contains(errs, "Apply cancelled.") {
		t.Fatalf("answer no: exit %d\n%s\n%s", code, out, errs)
	}
	if strings.Contains(out, "Creating...") {
		t.Fatal("applied without a yes")
	}

	code, _, errs = runEnvT(t, &env{}, "apply", "-no-color", file)
	if code != 1 || !strings.Contains(errs, "standard input is not a terminal: re-run with -auto-approve") {
		t.Fatalf("no terminal: exit %d\n%s", code, errs)
	}

	code, out, errs = runEnvT(t, terminalEnv("yes\n"), "apply", "-no-color", file)
	if code != 0 || !strings.Contains(out, "Apply complete! Resources: 4 added, 0 changed, 0 destroyed.") {
		t.Fatalf("answer yes: exit %d\n%s\n%s", code, out, errs)
	}

	// Nothing to do: no question asked.
	code, out, _ = runEnvT(t, terminalEnv(""), "apply", "-no-color", file)
	if code != 0 || strings.Contains(out, "Enter a value") || !strings.Contains(out, "No changes.") {
		t.Fatalf("no changes: exit %d\n%s", code, out)
	}
}

func TestPlanOutAndShow(t *testing.T) {
	dir, file := inProcessConfig(t)
	planFile := filepath.Join(dir, "p.plan")
	code, out, errs := runT(t, "plan", "-no-color", "-detailed-exitcode", "-out", planFile, file)
	if code != 2 || !strings.Contains(out, "Saved the plan to: "+planFile) {
		t.Fatalf("plan -out: exit %d\n%s\n%s", code, out, errs)
	}
	st, err := os.Stat(planFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("plan file: %v %v", st, err)
	}
	b, _ := os.ReadFile(planFile)
	p, err := reconcile.DecodePlan(b)
	if err != nil || p.Stack != "inproc" || p.Summary().Add != 4 {
		t.Fatalf("saved plan: %v %+v", err, p)
	}
	code, showOut, _ := runT(t, "show", "-no-color", planFile)
	planText := out[:strings.Index(out, "\nSaved the plan")]
	if code != 0 || showOut != planText {
		t.Fatalf("show differs from plan:\n%s\n---\n%s", showOut, planText)
	}
	code, js, _ := runT(t, "show", "-json", planFile)
	var doc jsonPlan
	if code != 0 || json.Unmarshal([]byte(js), &doc) != nil || doc.FormatVersion != "1.0" || len(doc.ResourceChanges) != 4 {
		t.Fatalf("show -json: exit %d\n%s", code, js)
	}

	for _, args := range [][]string{{"show"}, {"show", planFile, planFile}} {
		if code, _, errs := runT(t, args...); code != 1 || !strings.Contains(errs, "exactly one saved plan file") {
			t.Errorf("%q: exit %d %s", args, code, errs)
		}
	}
	code, out, errs = runT(t, "show", "-json", filepath.Join(dir, "nope.plan"))
	var e struct{ Error struct{ Message string } }
	if code != 1 || errs != "" || json.Unmarshal([]byte(out), &e) != nil || !strings.Contains(e.Error.Message, "nope.plan") {
		t.Fatalf("show -json of a missing file: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, _, errs := runT(t, "show", file); code != 1 || !strings.Contains(errs, "invalid saved plan") {
		t.Fatalf("show of an HCL file: exit %d %s", code, errs)
	}
}

func TestPlanFlagErrors(t *testing.T) {
	_, file := inProcessConfig(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "-parallelism", "0", file}, "-parallelism=0: use 1 or more"},
		{[]string{"plan", "-refresh-only", "-target", "pool.database_pool", file}, "cannot be combined"},
		{[]string{"plan", "-target", "nodot", file}, `invalid resource address "nodot"`},
		{[]string{"apply", "-lock-timeout", "-1s", file}, "-lock-timeout=-1s"},
		{[]string{"plan", file, file}, "expected one configuration directory or file"},
		{[]string{"apply", file, "-auto-approve"}, "options go before it: rpd apply -auto-approve " + file},
		{[]string{"force-unlock"}, "needs the lock ID"},
	} {
		code, _, errs := runT(t, tc.args...)
		if code != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%q: exit %d, stderr %q, want %q", tc.args, code, errs, tc.want)
		}
	}
}

func TestPlanColour(t *testing.T) {
	_, file := inProcessConfig(t)
	e := &env{isTerminal: func(io.Writer) bool { return true }}
	_, out, _ := runEnvT(t, e, "plan", file)
	if !strings.Contains(out, "\x1b[32m  +\x1b[0m queue") {
		t.Fatalf("no colour on a terminal:\n%q", out)
	}
	e = &env{isTerminal: func(io.Writer) bool { return true }}
	_, out, _ = runEnvT(t, e, "plan", "-no-color", file)
	if strings.Contains(out, "\x1b[") {
		t.Fatal("-no-color left colour")
	}
	e = &env{isTerminal: func(io.Writer) bool { return true }, environ: []string{"NO_COLOR=1"}}
	_, out, _ = runEnvT(t, e, "plan", file)
	if strings.Contains(out, "\x1b[") {
		t.Fatal("NO_COLOR left colour")
	}
}

func TestApplyViewProgressLines(t *testing.T) {
	var b bytes.Buffer
	v := &applyView{out: &b}
	q := reconcile.Address{Type: reconcile.TypeQueue, Name: "medium"}
	p := reconcile.Address{Type: reconcile.TypePool, Name: "db"}
	for _, e := range []reconcile.Event{
		{Address: q, Action: reconcile.Create, Kind: reconcile.EventStart},
		{Address: q, Action: reconcile.Create, Kind: reconcile.EventStill, Elapsed: 10*time.Second + 200*time.Millisecond},
		{Address: q, Action: reconcile.Create, Kind: reconcile.EventDone, Elapsed: 1100 * time.Millisecond},
		{Address: p, Action: reconcile.Update, Kind: reconcile.EventDone, Elapsed: 0},
		{Address: p, Action: reconcile.Delete, Kind: reconcile.EventStill, Elapsed: 70 * time.Second},
		{Address: q, Action: reconcile.DeleteThenCreate, Kind: reconcile.EventFailed, Elapsed: 2 * time.Second, Err: errors.New("boom")},
		{Address: p, Action: reconcile.Delete, Kind: reconcile.EventSkipped, Err: errors.New("apply was interrupted")},
	} {
		v.Progress(e)
	}
	want := `queue.medium: Creating...
queue.medium: Still creating... [10s elapsed]
queue.medium: Creation complete after 1s
pool.db: Modifications complete after 0s
pool.db: Still destroying... [1m10s elapsed]
queue.medium: Replacement failed after 2s
pool.db: Skipped: apply was interrupted
`
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestInterruptible: the first interrupt (or the command's context ending)
// stops gracefully, the second aborts.
func TestInterruptible(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var errs bytes.Buffer
	work, stop, release := interruptible(ctx, &env{stderr: &errs})
	defer release()
	cancel()
	select {
	case <-stop:
	case <-time.After(5 * time.Second):
		t.Fatal("cancelling the command's context did not stop gracefully")
	}
	if work.Err() != nil {
		t.Fatal("the first interrupt aborted the work")
	}
	// Two real interrupts: the second aborts.
	for range 2 {
		if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-work.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a second interrupt did not abort")
	}
	if !strings.Contains(errs.String(), "Interrupt received.") || !strings.Contains(errs.String(), "Exiting at once") {
		t.Fatalf("messages: %q", errs.String())
	}
}
