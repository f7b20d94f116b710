package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/aws"
	"github.com/rpdhq/rpd/backend/local"
	"github.com/rpdhq/rpd/internal/awstest"
	rpdopen "github.com/rpdhq/rpd/internal/open"
	"github.com/rpdhq/rpd/reconcile"
	"github.com/rpdhq/rpd/spec"
)

// e2eAdmin is what a test does to a backend behind rpd's back.
type e2eAdmin interface {
	backend.QueueAdmin
	backend.StateStore
	backend.Locker
}

// e2eBackend runs the end-to-end scenarios on one backend kind.
type e2eBackend struct {
	name string
	// header is the rpd block of a configuration for stack.
	header func(stack string) string
	// env is the environment the binary runs with.
	env []string
	// open opens the backend of w for stack, as the binary does.
	open func(t *testing.T, w *workdir, stack string) e2eAdmin
	// live is open's backend as reconcile.Live, for library-level faults.
	live func(t *testing.T, w *workdir, stack string) reconcile.Live
}

var stackSeq atomic.Int64

// uniqueStack names a stack no other test uses (the emulators are shared).
func uniqueStack() string {
	return fmt.Sprintf("e2e%d-%d", os.Getpid()%10000, stackSeq.Add(1))
}

func localE2E() e2eBackend {
	open := func(t *testing.T, w *workdir, stack string) *local.Backend {
		t.Helper()
		b, err := local.Open(context.Background(), filepath.Join(w.dir, backend.DefaultLocalPath), local.Options{Stack: stack})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	return e2eBackend{
		name: "local",
		header: func(stack string) string {
			return fmt.Sprintf("rpd {\n  stack = %q\n  backend \"local\" {}\n}\n", stack)
		},
		open: func(t *testing.T, w *workdir, stack string) e2eAdmin { return open(t, w, stack) },
		live: func(t *testing.T, w *workdir, stack string) reconcile.Live {
			return rpdopen.Local(open(t, w, stack)).Live()
		},
	}
}

func awsE2E(t *testing.T) e2eBackend {
	ep := awstest.Start(t)
	prefixes := map[string]string{}
	var mu sync.Mutex
	prefix := func(stack string) string {
		mu.Lock()
		defer mu.Unlock()
		if p, ok := prefixes[stack]; ok {
			return p
		}
		p := backend.DefaultTablePrefix(stack)
		prefixes[stack] = p
		return p
	}
	open := func(t *testing.T, stack string) *aws.Backend {
		t.Helper()
		b, err := aws.Open(context.Background(), ep.Options(stack, prefix(stack)))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return e2eBackend{
		name: "aws",
		header: func(stack string) string {
			return fmt.Sprintf("rpd {\n  stack = %q\n  backend \"aws\" {\n    region       = %q\n    table_prefix = %q\n  }\n}\n", stack, awstest.Region, prefix(stack))
		},
		env: ep.Env(),
		open: func(t *testing.T, w *workdir, stack string) e2eAdmin {
			return open(t, stack)
		},
		live: func(t *testing.T, w *workdir, stack string) reconcile.Live {
			return rpdopen.AWS(open(t, stack)).Live()
		},
	}
}

const e2eBody = `
runner_class "medium" {
  cpu = 2
  mem = "4GiB"
}

runner_class "small" {
  cpu = 1
  mem = "2GiB"
}

pool "database_pool" {
  slots = 3
}
`

// forEachBackend runs scenario on the local backend and on the emulators.
func forEachBackend(t *testing.T, scenario func(t *testing.T, be e2eBackend)) {
	t.Run("local", func(t *testing.T) { scenario(t, localE2E()) })
	t.Run("aws", func(t *testing.T) { scenario(t, awsE2E(t)) })
}

// setup returns a workdir with main.hcl declaring e2eBody for a new stack.
func setup(t *testing.T, be e2eBackend) (*workdir, string) {
	stack := uniqueStack()
	w := newWorkdir(t, be.env...)
	w.write("main.hcl", be.header(stack)+e2eBody)
	return w, stack
}

func TestE2EWorkflow(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be e2eBackend) {
		w, stack := setup(t, be)
		r := w.must(2, "plan", "-detailed-exitcode", "-no-color")
		want := "Plan: 6 to add, 0 to change, 0 to destroy."
		if be.name == "aws" {
			want = "Plan: 9 to add, 0 to change, 0 to destroy." // and the three tables
		}
		contains(t, r, "stdout", want)
		if be.name == "local" {
			if _, err := os.Stat(filepath.Join(w.dir, ".rpd")); err == nil {
				t.Fatal("plan created the local database")
			}
		}

		r = w.must(0, "apply", "-auto-approve", "-no-color")
		contains(t, r, "stdout", "queue.medium: Creating...")
		contains(t, r, "stdout", "queue.medium: Creation complete after")
		contains(t, r, "stdout", "Apply complete! Resources: "+strings.TrimSuffix(strings.TrimPrefix(want, "Plan: "), " to add, 0 to change, 0 to destroy.")+" added, 0 changed, 0 destroyed.")

		r = w.must(0, "plan", "-detailed-exitcode", "-no-color")
		contains(t, r, "stdout", "No changes. Your infrastructure matches the configuration.")

		// Edit a pool's size: an in-place update, exit 2.
		w.write("main.hcl", be.header(stack)+strings.Replace(e2eBody, "slots = 3", "slots = 5", 1))
		r = w.must(2, "plan", "-detailed-exitcode", "-no-color")
		contains(t, r, "stdout", "~ pool \"database_pool\" {")
		contains(t, r, "stdout", "~ slots = 3 -> 5")
		contains(t, r, "stdout", "Plan: 0 to add, 1 to change, 0 to destroy.")
		r = w.must(0, "plan", "-json")
		var doc jsonPlan
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
			t.Fatalf("plan -json: %v\n%s", err, r.stdout)
		}
		if doc.Stack != stack || doc.Summary != (reconcile.Summary{Change: 1}) || !doc.Changes {
			t.Fatalf("plan -json: %+v", doc)
		}
		w.must(0, "apply", "-auto-approve", "-no-color")

		// Remove a class: its queue and settings are destroyed.
		w.write("main.hcl", be.header(stack)+strings.NewReplacer("runner_class \"small\" {\n  cpu = 1\n  mem = \"2GiB\"\n}\n", "", "slots = 3", "slots = 5").Replace(e2eBody))
		r = w.must(2, "plan", "-detailed-exitcode", "-no-color")
		contains(t, r, "stdout", "- queue \"small\" {")
		contains(t, r, "stdout", "Plan: 0 to add, 0 to change, 2 to destroy.")
		r = w.must(0, "apply", "-auto-approve", "-no-color")
		contains(t, r, "stdout", "queue.small: Destruction complete after")
		admin := be.open(t, w, stack)
		if _, err := admin.DescribeQueue(context.Background(), stack+"-rp-small"); err == nil {
			t.Fatal("the removed class's queue still exists")
		}
		w.must(0, "plan", "-detailed-exitcode")
	})
}

func TestE2EUnmanagedQueue(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be e2eBackend) {
		w, stack := setup(t, be)
		admin := be.open(t, w, stack)
		if err := admin.CreateQueue(context.Background(), stack+"-rp-medium", backend.QueueAttributes{VisibilityTimeout: 30 * time.Second, Retention: time.Hour}); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"plan", "-no-color"}, {"apply", "-auto-approve", "-no-color"}} {
			r := w.must(1, args...)
			contains(t, r, "stderr", "queue "+stack+"-rp-medium exists but is not managed by rpd stack "+stack)
		}
		if _, err := admin.DescribeQueue(context.Background(), stack+"-rp-small"); err == nil {
			t.Fatal("apply changed something despite the unmanaged queue")
		}
		info, err := admin.DescribeQueue(context.Background(), stack+"-rp-medium")
		if err != nil || info.Attributes.Tags[backend.StackTag] != "" {
			t.Fatalf("the unmanaged queue was touched: %+v %v", info, err)
		}
	})
}

func TestE2ELock(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be e2eBackend) {
		w, stack := setup(t, be)
		w.must(0, "apply", "-auto-approve", "-no-color") // creates the tables on aws
		w.write("main.hcl", be.header(stack)+strings.Replace(e2eBody, "slots = 3", "slots = 4", 1))
		admin := be.open(t, w, stack)
		ctx := context.Background()
		held, err := admin.Lock(ctx, backend.LockInfo{Who: "carol@elsewhere", Operation: "apply"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}

		r := w.must(1, "apply", "-auto-approve", "-no-color")
		contains(t, r, "stderr", "state is locked by carol@elsewhere")
		contains(t, r, "stderr", "rpd force-unlock "+held.ID)

		// With -lock-timeout the apply waits for the holder.
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		c, stdout, _ := w.cmd(cctx, "apply", "-auto-approve", "-no-color", "-lock-timeout", "30s")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond)
		if err := admin.Unlock(ctx, held.ID); err != nil {
			t.Fatal(err)
		}
		if err := c.Wait(); err != nil {
			t.Fatalf("apply waiting for the lock: %v\n%s", err, stdout)
		}
		if !strings.Contains(stdout.String(), "Apply complete! Resources: 0 added, 1 changed, 0 destroyed.") {
			t.Fatalf("apply after the wait:\n%s", stdout)
		}

		// A stuck lock is removed with force-unlock.
		held, err = admin.Lock(ctx, backend.LockInfo{Who: "dave@gone", Operation: "apply"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		r = w.must(1, "force-unlock", held.ID)
		contains(t, r, "stderr", "not a terminal: re-run with -force")
		// A wrong ID is checked first, with or without -force or a
		// terminal, and answered with the right one in one sentence.
		for _, args := range [][]string{{"force-unlock", "no-such-lock"}, {"force-unlock", "-force", "no-such-lock"}} {
			r = w.must(1, args...)
			contains(t, r, "stderr", "lock ID no-such-lock is not the lock on stack "+stack+"'s state, which is held under ID "+held.ID+" by dave@gone")
			contains(t, r, "stderr", "run rpd force-unlock "+held.ID)
			if strings.Count(r.stderr, "force-unlock") != 1 || strings.Contains(r.stderr, "terminal") {
				t.Errorf("%v: want one clear sentence:\n%s", args, r.stderr)
			}
		}
		w.must(0, "force-unlock", "-force", held.ID)
		r = w.must(1, "force-unlock", "-force", held.ID)
		contains(t, r, "stderr", "the state of stack "+stack+" is not locked")
		w.must(0, "apply", "-auto-approve")
	})
}

func TestE2EConcurrentApplies(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be e2eBackend) {
		w, _ := setup(t, be)
		w.must(0, "apply", "-auto-approve", "-no-color")
		// Two applies at once: with -lock-timeout one waits for the other;
		// both succeed and the second finds nothing left to do.
		var wg sync.WaitGroup
		results := make([]result, 2)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = w.rpd("apply", "-auto-approve", "-no-color", "-lock-timeout", "30s")
			}()
		}
		wg.Wait()
		for _, r := range results {
			if r.code != 0 {
				t.Fatalf("concurrent apply failed: %s", r)
			}
		}
		// Without -lock-timeout, the loser fails with the holder's info.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		held := be.open(t, w, stackOf(t, w))
		info, err := held.Lock(ctx, backend.LockInfo{Who: "erin@ci-9", Operation: "apply"}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		defer held.Unlock(ctx, info.ID)
		r := w.must(1, "apply", "-auto-approve", "-no-color")
		contains(t, r, "stderr", "state is locked by erin@ci-9 (operation \"apply\", lock ID "+info.ID)
	})
}

// stackOf reads the stack back from the workdir's main.hcl.
func stackOf(t *testing.T, w *workdir) string {
	b, err := os.ReadFile(filepath.Join(w.dir, "main.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`stack = "([^"]+)"`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no stack in main.hcl")
	}
	return string(m[1])
}

func TestE2ESavedPlan(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be e2eBackend) {
		w, stack := setup(t, be)
		r := w.must(0, "plan", "-no-color", "-out", "first.plan")
		contains(t, r, "stdout", `rpd apply "first.plan"`)

		r = w.must(0, "show", "-no-color", "first.plan")
		contains(t, r, "stdout", "+ queue \"medium\" {")
		r = w.must(0, "show", "-json", "first.plan")
		var doc jsonPlan
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc.Stack != stack || doc.Summary.Add == 0 {
			t.Fatalf("show -json: %v %+v", err, doc)
		}

		// Applying a saved plan needs no confirmation and does exactly it.
		r = w.must(0, "apply", "-no-color", "first.plan")
		contains(t, r, "stdout", "Apply complete!")

		// A plan made before another apply is stale.
		w.write("main.hcl", be.header(stack)+strings.Replace(e2eBody, "slots = 3", "slots = 7", 1))
		w.must(0, "plan", "-out", "stale.plan")
		w.write("main.hcl", be.header(stack)+strings.Replace(e2eBody, "slots = 3", "slots = 8", 1))
		w.must(0, "apply", "-auto-approve")
		r = w.must(1, "apply", "-no-color", "stale.plan")
		contains(t, r, "stderr", "Saved plan is stale")
		r = w.must(0, "plan", "-no-color")
		contains(t, r, "stdout", "No changes.") // slots = 8 applied, 7 never was
		// Applying the first plan again is stale too.
		w.must(1, "apply", "first.plan")

		if be.name == "local" {
			// From a directory without the plan's (relative) database:
			// refused, and no database is created there.
			elsewhere := newWorkdir(t, be.env...)
			r = elsewhere.must(1, "apply", "-no-color", filepath.Join(w.dir, "stale.plan"))
			contains(t, r, "stderr", "which does not exist here; nothing was applied")
			if _, err := os.Stat(filepath.Join(elsewhere.dir, backend.DefaultLocalPath)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("applying a plan elsewhere created a database: %v", err)
			}
		}
	})
}

func TestE2EBadInput(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be e2eBackend) {
		w, stack := setup(t, be)
		w.must(0, "apply", "-auto-approve")
		w.write("main.hcl", be.header(stack)+strings.Replace(e2eBody, "slots = 3", "slots = 9", 1))
		w.must(0, "plan", "-out", "good.plan")
		version := func() int64 {
			_, v, err := be.open(t, w, stack).ReadState(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		v0 := version()

		// A plan file from another stack.
		other := newWorkdir(t, be.env...)
		otherStack := uniqueStack()
		other.write("main.hcl", be.header(otherStack)+e2eBody)
		good, err := os.ReadFile(filepath.Join(w.dir, "good.plan"))
		if err != nil {
			t.Fatal(err)
		}
		other.write("foreign.plan", string(good))
		r := other.must(1, "apply", "foreign.plan")
		contains(t, r, "stderr", fmt.Sprintf("is for stack %q, but the configuration in this directory is stack %q", stack, otherStack))

		// Corrupted plan files: truncated, edited, not JSON, empty.
		edited := strings.Replace(string(good), `"slots": 9`, `"slots": 90`, 1)
		if edited == string(good) {
			t.Fatal("the saved plan does not hold the pool's slots")
		}
		for name, content := range map[string]string{
			"truncated.plan": string(good[:len(good)/2]),
			"edited.plan":    edited,
			"garbage.plan":   "\x00\x01not a plan",
			"empty.plan":     "",
		} {
			w.write(name, content)
			r := w.must(1, "apply", name)
			contains(t, r, "stderr", "invalid saved plan")
			r = w.must(1, "show", name)
			contains(t, r, "stderr", name)
		}
		r = w.must(1, "apply", "missing.plan")
		contains(t, r, "stderr", "missing.plan")

		// A target that matches nothing.
		r = w.must(1, "plan", "-target", "pool.nope")
		contains(t, r, "stderr", "-target pool.nope: target matches no resource")
		r = w.must(1, "apply", "-auto-approve", "-target", "pool.nope")
		contains(t, r, "stderr", "target matches no resource")
		r = w.must(1, "plan", "-target", "bucket.x")
		contains(t, r, "stderr", "unknown type \"bucket\"")
		// A saved plan cannot take -var or -target.
		r = w.must(1, "apply", "-target", "pool.database_pool", "good.plan")
		contains(t, r, "stderr", "cannot be used with a saved plan")
		// No terminal and no -auto-approve.
		r = w.must(1, "apply", "-no-color")
		contains(t, r, "stderr", "standard input is not a terminal: re-run with -auto-approve")

		if v := version(); v != v0 {
			t.Fatalf("bad input changed the state: version %d -> %d", v0, v)
		}
		// The good plan still applies.
		w.must(0, "apply", "good.plan")
	})
}

// TestE2EInterruptedApplyConverges interrupts an apply at every backend
// call in turn (a fault injected at the library level, after which the
// apply goes no further, like a killed process), then runs the real
// binary: its apply converges and a plan has no changes.
func TestE2EInterruptedApplyConverges(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be e2eBackend) {
		ctx := context.Background()
		// Count the calls of a full apply of an edited configuration.
		probe := func(w *workdir, stack string, rule func(n int, call string) bool) (*faults, error) {
			f := &faults{rule: rule}
			live := f.wrap(be.live(t, w, stack))
			cfg := loadE2E(t, w)
			p, err := reconcile.MakePlan(ctx, cfg, live, reconcile.PlanOptions{})
			if err != nil {
				return f, err
			}
			_, err = reconcile.Apply(ctx, p, live, reconcile.ApplyOptions{Who: "fault@test", Parallelism: 1})
			return f, err
		}
		edit := func(w *workdir, stack string) {
			// Replace small's queue, delete medium, add large, resize the pool.
			body := strings.Replace(e2eBody, "runner_class \"medium\" {\n  cpu = 2\n  mem = \"4GiB\"\n}\n", "runner_class \"large\" {\n  cpu = 8\n  mem = \"16GiB\"\n}\n", 1)
			body = strings.Replace(body, "mem = \"2GiB\"\n", "mem = \"2GiB\"\n  queue {\n    name = \""+stack+"-small-v2\"\n  }\n", 1)
			body = strings.Replace(body, "slots = 3", "slots = 6", 1)
			w.write("main.hcl", be.header(stack)+body)
		}
		w, stack := setup(t, be)
		w.must(0, "apply", "-auto-approve")
		edit(w, stack)
		f, err := probe(w, stack, nil)
		if err != nil {
			t.Fatalf("fault-free probe: %v", err)
		}
		steps := len(f.calls)
		if steps < 10 {
			t.Fatalf("only %d calls: %q", steps, f.calls)
		}
		for k := 1; k <= steps; k++ {
			w, stack := setup(t, be)
			w.must(0, "apply", "-auto-approve")
			edit(w, stack)
			f, err := probe(w, stack, func(n int, call string) bool { return n >= k && !strings.HasPrefix(call, "Unlock") })
			if strings.HasPrefix(f.calls[k-1], "Unlock") {
				continue // never failed: see the rule
			}
			if err == nil {
				t.Fatalf("step %d (%s): the interrupted apply reported success", k, f.calls[k-1])
			}
			// A process killed while holding the lock leaves it held until
			// its lease runs out; force-unlock is the documented way out.
			if held, lerr := be.open(t, w, stack).Lock(ctx, backend.LockInfo{Who: "probe"}, time.Second); lerr == nil {
				_ = be.open(t, w, stack).Unlock(ctx, held.ID)
			}
			r := w.rpd("apply", "-auto-approve", "-no-color", "-allow-destroy-nonempty")
			if r.code != 0 {
				t.Fatalf("step %d (%s): re-run apply: %s", k, f.calls[k-1], r)
			}
			if r := w.rpd("plan", "-detailed-exitcode", "-no-color"); r.code != 0 {
				t.Fatalf("step %d (%s): not converged: %s", k, f.calls[k-1], r)
			}
			queues, err := be.open(t, w, stack).ListQueues(ctx, stack+"-")
			if err != nil {
				t.Fatal(err)
			}
			want := []string{stack + "-rp-large", stack + "-small-v2"}
			if !slices.Equal(queues, want) {
				t.Fatalf("step %d (%s): queues %q, want %q", k, f.calls[k-1], queues, want)
			}
		}
	})
}

// loadE2E loads the workdir's configuration as the binary would there.
func loadE2E(t *testing.T, w *workdir) *spec.Config {
	t.Helper()
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir(w.dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(cwd)
	cfg, diags := spec.Load(".", spec.Vars{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if cfg.Backend.Type == "local" {
		cfg.Backend.Path = filepath.Join(w.dir, cfg.Backend.Path)
	}
	return cfg
}

// TestE2EInterruptWhileWaitingForLock: Ctrl-C while apply waits for the
// lock ends it at once, having changed nothing.
func TestE2EInterruptWhileWaitingForLock(t *testing.T) {
	be := localE2E()
	w, stack := setup(t, be)
	admin := be.open(t, w, stack)
	ctx := context.Background()
	held, err := admin.Lock(ctx, backend.LockInfo{Who: "frank@busy", Operation: "apply"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	c, _, stderr := w.cmd(cctx, "apply", "-auto-approve", "-no-color", "-lock-timeout", "50s")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	start := time.Now()
	if err := c.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err = c.Wait()
	if err == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("apply after Ctrl-C: %v after %s\n%s", err, time.Since(start), stderr)
	}
	if !strings.Contains(stderr.String(), "acquire the state lock") {
		t.Fatalf("stderr: %s", stderr)
	}
	if _, err := admin.DescribeQueue(ctx, stack+"-rp-medium"); err == nil {
		t.Fatal("an interrupted apply created a queue")
	}
	if err := admin.Unlock(ctx, held.ID); err != nil {
		t.Fatalf("the holder's lock was disturbed: %v", err)
	}
}

// TestE2ESecondApplyFailsOnTheFirstsLock: while one apply runs, another
// without -lock-timeout fails at once, naming the first as the holder.
func TestE2ESecondApplyFailsOnTheFirstsLock(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be e2eBackend) {
		stack := uniqueStack()
		w := newWorkdir(t, be.env...)
		n := 2500
		if be.name == "aws" {
			n = 300
		}
		var body strings.Builder
		for i := range n {
			fmt.Fprintf(&body, "runner_class \"c%04d\" {\n  cpu = 1\n  mem = \"1GiB\"\n}\n", i)
		}
		w.write("main.hcl", be.header(stack)+body.String())
		if be.name == "aws" {
			// Create the tables first, so the first apply locks before it
			// starts creating queues.
			w.write("main.hcl", be.header(stack))
			w.must(0, "apply", "-auto-approve")
			w.write("main.hcl", be.header(stack)+body.String())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		first, _, firstErr := w.cmd(ctx, "apply", "-auto-approve", "-no-color")
		pr, pw := io.Pipe()
		first.Stdout = pw
		if err := first.Start(); err != nil {
			t.Fatal(err)
		}
		started := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(pr)
			once := sync.Once{}
			for sc.Scan() {
				if strings.Contains(sc.Text(), ": Creating...") {
					once.Do(func() { close(started) })
				}
			}
		}()
		select {
		case <-started:
		case <-time.After(time.Minute):
			t.Fatal("the first apply never started creating")
		}
		// Pause the first apply while it holds the lock, so the second one
		// runs against a held lock however fast the first would finish.
		// A pause inside one of its SQLite write transactions makes the
		// second answer "database is locked" instead: let the first run on
		// a moment and pause it again (bounded).
		var second result
		for attempt := 0; ; attempt++ {
			if err := first.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			second = w.rpd("apply", "-auto-approve", "-no-color")
			if err := first.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(second.stderr, "SQLITE_BUSY") || attempt == 20 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		err := first.Wait()
		pw.Close()
		if err != nil {
			t.Fatalf("first apply: %v\n%s", err, firstErr)
		}
		if second.code != 1 || !strings.Contains(second.stderr, "state is locked by ") || !strings.Contains(second.stderr, `(operation "apply", lock ID `) {
			t.Fatalf("second apply while the first ran: %s", second)
		}
		w.must(0, "plan", "-detailed-exitcode")
	})
}
