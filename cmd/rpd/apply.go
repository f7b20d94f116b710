package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/internal/open"
	"github.com/rpdhq/rpd/reconcile"
	"github.com/rpdhq/rpd/spec"
)

const applyHelp = `
Makes live state match the configuration in DIR (every *.hcl file) or FILE,
default the current directory: plans as rpd plan does, shows the plan, asks
for "yes" on a terminal, then applies it. Given a saved plan (rpd plan -out
PLANFILE) it applies exactly that plan without asking, or refuses it when
live state changed since.

Apply takes the stack's state lock (waiting up to -lock-timeout for another
holder), creates and updates queues, writes the runtime configuration, then
deletes what is no longer declared. A failed change does not stop
independent ones; running apply again after any failure or interruption
converges. The first Ctrl-C stops after the calls in flight and records what
was done; a second one aborts at once. With -json, progress is streamed as
one JSON object per line (docs/plan.md).

Exit status: 0 when everything applied, 1 otherwise.
`

const destroyHelp = `
Destroys everything the stack configured in DIR or FILE (default the
current directory) manages: every runner class's queue (with the idle
runners it holds), every runtime resource including default_pool, and the
grants a daemon recorded (pool leases, budget permits, ceiling claims). The
runtime document is left empty, with its lineage kept, as Terraform leaves
an empty state; on aws the stack's tables stay (they hold the lock and the
state). The configuration only names the stack and its backend: what it
declares does not matter.

Destroy plans as rpd plan -destroy does, shows the plan, asks for "yes" on
a terminal (-auto-approve skips the question), then applies it with apply's
lock, progress and Ctrl-C handling. The guards apply: a queue that holds
idle runners or a pool whose slots are held is refused unless given
-allow-destroy-nonempty (or unless allow_destroy = true was applied on its
block).

Exit status: 0 when everything was destroyed, 1 otherwise.
`

func runApply(ctx context.Context, e *env, args []string) int {
	return applyOrDestroy(ctx, e, args, false)
}

func runDestroy(ctx context.Context, e *env, args []string) int {
	return applyOrDestroy(ctx, e, args, true)
}

// applyArgs are the arguments of rpd apply, or of rpd destroy.
type applyArgs struct {
	name        string // "apply" or "destroy"
	plan        planFlags
	autoApprove bool
	lockTimeout time.Duration
	json        bool
	// path is the configuration directory or file, or a saved plan.
	path string
}

// parseApply parses the arguments of rpd apply, or with destroy of rpd
// destroy; a usage error is printed, with the exit code to return.
func parseApply(e *env, args []string, destroy bool) (*applyArgs, int, bool) {
	a := &applyArgs{name: "apply"}
	usage, help := "[options] [DIR|FILE|PLANFILE]", applyHelp
	jsonNeeds := "-auto-approve or a saved plan"
	if destroy {
		a.name, usage, help, jsonNeeds = "destroy", "[options] [DIR|FILE]", destroyHelp, "-auto-approve"
	}
	fs := newFlagSet(a.name, usage, help)
	a.plan.register(fs, destroy)
	a.plan.destroy = destroy
	fs.BoolVar(&a.autoApprove, "auto-approve", false, "skip the confirmation: "+a.name+" without asking")
	fs.DurationVar(&a.lockTimeout, "lock-timeout", 0, "how long to wait for the state lock held by someone else (such as 30s)")
	fs.BoolVar(&a.json, "json", false, "stream machine-readable progress, one JSON object per line (needs "+jsonNeeds+")")
	if code, ok := parseFlags(e, fs, args); !ok {
		return nil, code, false
	}
	path, code, ok := configPath(e, fs)
	if !ok {
		return nil, code, false
	}
	a.path = path
	return a, 0, true
}

// check refuses arguments that parse but cannot work together.
func (a *applyArgs) check() error {
	destroy := a.plan.destroy
	if a.json && !a.autoApprove && (destroy || !isPlanFile(a.path)) {
		if destroy {
			return errors.New("-json cannot ask for confirmation: add -auto-approve, or save a destroy plan (rpd plan -destroy -out FILE) and apply that")
		}
		return errors.New("-json cannot ask for confirmation: add -auto-approve, or apply a saved plan (rpd plan -out FILE)")
	}
	if _, err := a.plan.options(nil); err != nil {
		return err
	}
	if a.lockTimeout < 0 {
		return fmt.Errorf("-lock-timeout=%s: use zero or more", a.lockTimeout)
	}
	if destroy && isPlanFile(a.path) {
		return fmt.Errorf("rpd destroy takes a configuration, not a saved plan (%s): to destroy from a saved plan, make it with rpd plan -destroy -out FILE and run rpd apply FILE", a.path)
	}
	return nil
}

// applyViews are where an apply reports: the plan and errors, the
// progress and the result (human text, or one JSON stream for both).
type applyViews struct {
	plan   planView
	result applyReporter
	color  bool
}

func (a *applyArgs) views(e *env) applyViews {
	color := e.color(e.stdout, a.plan.cf.noColor)
	if a.json {
		js := &jsonStream{out: e.stdout, now: time.Now, destroy: a.plan.destroy}
		js.Version()
		a.plan.cf.diagnostics = js.Diagnostics
		return applyViews{plan: js, result: js}
	}
	return applyViews{
		plan:   &humanView{stdout: e.stdout, stderr: e.stderr, c: colorizer(color)},
		result: &applyView{out: e.stdout, c: colorizer(color), destroy: a.plan.destroy},
		color:  color,
	}
}

func (a *applyArgs) lockOptions() reconcile.LockOptions {
	return reconcile.LockOptions{Who: reconcile.DefaultWho(), Operation: a.name, Timeout: a.lockTimeout}
}

// applyOrDestroy is rpd apply, or with destroy, rpd destroy: the same
// plan, confirmation, lock and progress, on a destroy plan.
func applyOrDestroy(ctx context.Context, e *env, args []string, destroy bool) int {
	a, code, ok := parseApply(e, args, destroy)
	if !ok {
		return code
	}
	v := a.views(e)
	if err := a.check(); err != nil {
		v.plan.Error(err)
		return 1
	}
	plan, b, held, code, ok := a.planned(ctx, e, v)
	if !ok {
		return code
	}
	defer b.Close()
	return a.execute(ctx, e, v, plan, b, held)
}

// planned returns the plan to apply with its backend open (and, for a
// configuration, the state lock held, the plan shown and confirmed): the
// saved plan, or one made now. On failure it has reported and closed all.
func (a *applyArgs) planned(ctx context.Context, e *env, v applyViews) (*reconcile.Plan, *open.Backend, *reconcile.HeldLock, int, bool) {
	fail := func(b *open.Backend, held *reconcile.HeldLock, err error) (*reconcile.Plan, *open.Backend, *reconcile.HeldLock, int, bool) {
		if held != nil {
			if rerr := releaseLock(ctx, held); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
		if b != nil {
			b.Close()
		}
		v.plan.Error(err)
		return nil, nil, nil, 1, false
	}
	if isPlanFile(a.path) {
		p, err := a.plan.planFileApplicable(e, a.path)
		if err != nil {
			return fail(nil, nil, err)
		}
		b, err := open.Open(ctx, p.Stack, p.Backend, open.Options{})
		if err != nil {
			return fail(nil, nil, err)
		}
		if err := refuseWatchLeader(ctx, a.name, p.Stack, b); err != nil {
			return fail(b, nil, err)
		}
		return p, b, nil, 0, true
	}
	cfg, code := a.plan.cf.load(e, a.path)
	if cfg == nil {
		return nil, nil, nil, code, false
	}
	opts, _ := a.plan.options(cfg)
	b, err := open.Open(ctx, cfg.Stack, opts.Backend, open.Options{})
	if err != nil {
		return fail(nil, nil, err)
	}
	if err := refuseWatchLeader(ctx, a.name, cfg.Stack, b); err != nil {
		return fail(b, nil, err)
	}
	// Lock before planning, as terraform apply does, so the plan shown
	// cannot go stale while it waits for "yes". Where the lock's table
	// does not exist yet (a first apply on aws), Apply creates the tables
	// and locks after the confirmation.
	var held *reconcile.HeldLock
	if lockable(ctx, b.Live()) {
		if held, err = reconcile.LockState(ctx, b.Live(), a.lockOptions()); err != nil {
			return fail(b, nil, err)
		}
	}
	plan, err := reconcile.MakePlan(ctx, cfg, b.Live(), opts)
	if err != nil {
		return fail(b, held, err)
	}
	if err := v.plan.Plan(plan); err != nil {
		return fail(b, held, err)
	}
	if plan.HasChanges() && !a.autoApprove {
		if err := confirm(ctx, e, v.color, a.plan.destroy); err != nil {
			return fail(b, held, err)
		}
	}
	return plan, b, held, 0, true
}

// execute applies plan under the lock held (or taken now), reporting
// progress and the result, and releases the lock.
func (a *applyArgs) execute(ctx context.Context, e *env, v applyViews, plan *reconcile.Plan, b *open.Backend, held *reconcile.HeldLock) int {
	if plan.Destroy { // a saved destroy plan reports as rpd destroy does
		switch r := v.result.(type) {
		case *applyView:
			r.destroy = true
		case *jsonStream:
			r.destroy = true
		}
	}
	if plan.Destroy && !plan.HasChanges() {
		// Nothing to destroy, possibly nothing ever created: on aws the
		// lock's table may not exist, and there is nothing to lock for.
		var err error
		if held != nil {
			err = releaseLock(ctx, held)
		}
		v.result.Result(&reconcile.ApplyResult{}, err)
		if err != nil {
			v.plan.Error(err)
			return 1
		}
		return 0
	}
	workCtx, stop, unhook := interruptible(ctx, e)
	defer unhook()
	if plan.HasChanges() && !a.json {
		fmt.Fprintln(e.stdout)
	}
	lo := a.lockOptions()
	res, err := reconcile.Apply(workCtx, plan, b.Live(), reconcile.ApplyOptions{
		Who:                  lo.Who,
		Operation:            lo.Operation,
		LockTimeout:          lo.Timeout,
		Lock:                 held,
		Parallelism:          a.plan.parallelism,
		AllowDestroyNonEmpty: a.plan.allowNonEmpty,
		Progress:             v.result.Progress,
		Stop:                 stop,
	})
	if held != nil {
		if rerr := releaseLock(ctx, held); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	v.result.Result(res, err)
	if err != nil {
		v.plan.Error(err)
		return 1
	}
	return 0
}

// refuseWatchLeader refuses to apply to a stack that a live rpd watch
// daemon leads: it applies its own files on every change, so what apply
// wrote would be undone, or silently not served. rpd serve stacks follow
// what apply writes, and are applied to as before.
func refuseWatchLeader(ctx context.Context, command, stack string, b *open.Backend) error {
	if b.Leader == nil {
		return nil
	}
	l, err := b.Leader.ReadLeader(ctx)
	if errors.Is(err, backend.ErrTableMissing) {
		return nil // nothing ever ran on this stack
	}
	if err != nil {
		return fmt.Errorf("read the leader of stack %s: %w", stack, err)
	}
	if l.Mode != "watch" || !l.Live(time.Now()) {
		return nil
	}
	fix := "edit the files it watches, or stop it; rpd apply is for stacks served by rpd serve"
	if command == "destroy" {
		fix = "stop every rpd watch of the stack first (it would re-create what destroy removes at its next reload), then run rpd destroy again"
	}
	return fmt.Errorf("stack %s is served by rpd watch at %s (holder %s, since %s): %s",
		stack, l.Address, l.Holder, l.AcquiredAt.Local().Format(time.RFC3339), fix)
}

// releaseLock unlocks held even when ctx was cancelled (Ctrl-C), giving the
// backend 10 s: a lock left behind frees itself when its lease runs out.
func releaseLock(ctx context.Context, held *reconcile.HeldLock) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return held.Release(rctx)
}

// lockable reports whether the backend's lock can be taken now: always,
// except on aws before the first apply created the tables.
func lockable(ctx context.Context, live reconcile.Live) bool {
	if live.Tables == nil {
		return true
	}
	tables, err := live.Tables.Tables(ctx)
	if err != nil {
		return true // let LockState report the problem
	}
	for _, t := range tables {
		if !t.Exists {
			return false
		}
	}
	return true
}

// isPlanFile tells a saved plan from a configuration: a configuration is a
// directory or a .hcl file.
func isPlanFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && filepath.Ext(path) != ".hcl"
}

// planFileApplicable reads a saved plan and refuses it when it cannot be
// meant for here: variables given (they were fixed when planning), or the
// configuration in the current directory is another stack's.
func (f *planFlags) planFileApplicable(e *env, path string) (*reconcile.Plan, error) {
	if len(f.cf.vars) > 0 || len(f.cf.varFiles) > 0 || len(f.targets) > 0 || f.refreshOnly {
		return nil, errors.New("-var, -var-file, -target and -refresh-only cannot be used with a saved plan: they were fixed when it was made; run rpd plan again with them")
	}
	p, err := readPlanFile(path)
	if err != nil {
		return nil, err
	}
	if here := stackHere(e); here != "" && here != p.Stack {
		return nil, fmt.Errorf("the saved plan %s is for stack %q, but the configuration in this directory is stack %q; nothing was applied — apply it from stack %q's directory, or make a plan for this one with rpd plan -out", path, p.Stack, here, p.Stack)
	}
	if b := p.Backend.WithDefaults(p.Stack); b.Type == "local" && p.StateVersion > 0 {
		db := b.Path
		if _, err := os.Stat(db); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("the saved plan %s was made against the local backend %s, which does not exist here; nothing was applied — apply it from the directory where it was made", path, db)
		}
	}
	return p, nil
}

// stackHere is the stack of the configuration in the current directory, or
// "" when there is none that loads.
func stackHere(e *env) string {
	matches, _ := filepath.Glob("*.hcl")
	if len(matches) == 0 {
		return ""
	}
	cfg, diags := spec.Load(".", spec.Vars{Env: e.environ})
	if diags.HasErrors() || cfg == nil {
		return ""
	}
	return cfg.Stack
}

// confirm asks for "yes" on a terminal and refuses without one; destroy
// asks Terraform's destroy question.
func confirm(ctx context.Context, e *env, color, destroy bool) error {
	if !stdinIsTerminal(e) {
		if destroy {
			return errors.New("destroy needs confirmation, but standard input is not a terminal: re-run with -auto-approve to destroy without asking")
		}
		return errors.New("apply needs confirmation, but standard input is not a terminal: re-run with -auto-approve to apply without asking, or save a plan with rpd plan -out FILE and apply that file")
	}
	c := colorizer(color)
	if destroy {
		fmt.Fprintf(e.stdout, "\n%s\n  rpd will destroy everything this stack manages, as shown above.\n  There is no undo. Only 'yes' will be accepted to confirm.\n\n  %s ", c.bold("Do you really want to destroy all resources?"), c.bold("Enter a value:"))
	} else {
		fmt.Fprintf(e.stdout, "\n%s\n  rpd will perform the actions described above.\n  Only 'yes' will be accepted to approve.\n\n  %s ", c.bold("Do you want to perform these actions?"), c.bold("Enter a value:"))
	}
	line, err := readAnswer(ctx, e.stdin)
	if err != nil {
		return err
	}
	if line != "yes" {
		if destroy {
			return errors.New("Destroy cancelled.")
		}
		return errors.New("Apply cancelled.")
	}
	return nil
}

// stdinIsTerminal reports whether a question can be asked on stdin.
func stdinIsTerminal(e *env) bool {
	w, isWriter := e.stdin.(io.Writer)
	return isWriter && e.isTerminal != nil && e.isTerminal(w)
}

// readAnswer reads one line from in, trimmed. Ctrl-C (ctx ending) cancels
// the question at once; the read itself cannot be interrupted, so it is
// left behind, and the process exits soon after.
func readAnswer(ctx context.Context, in io.Reader) (string, error) {
	type answer struct {
		line string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		line, err := bufio.NewReader(in).ReadString('\n')
		got <- answer{line, err}
	}()
	select {
	case <-ctx.Done():
		return "", fmt.Errorf("interrupted while waiting for an answer; nothing was changed: %w", context.Cause(ctx))
	case a := <-got:
		if a.err != nil && a.line == "" {
			return "", fmt.Errorf("read the answer: %w", a.err)
		}
		return strings.TrimSpace(a.line), nil
	}
}

// interruptible gives apply Terraform's Ctrl-C behaviour: the first
// interrupt (or ctx ending) closes stop, so apply starts nothing new and
// records what it did; a second interrupt cancels the returned context,
// aborting calls in flight, so apply returns at once. Unlike Terraform,
// which exits without unlocking, rpd still releases the state lock (for at
// most 10 s) so that the next command does not find it held.
func interruptible(ctx context.Context, e *env) (context.Context, <-chan struct{}, func()) {
	work, abort := context.WithCancel(context.WithoutCancel(ctx))
	stop := make(chan struct{})
	var once sync.Once
	graceful := func() {
		once.Do(func() {
			fmt.Fprintln(e.stderr, "\nInterrupt received. rpd is finishing the changes in progress, then stops cleanly and records what was done.\nPress Ctrl-C again to exit at once.")
			close(stop)
		})
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		n := 0
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				graceful()
				ctx = context.Background() // seen; wait for signals only
			case <-sigs:
				n++
				graceful()
				if n >= 2 {
					fmt.Fprintln(e.stderr, "Two interrupts received. Exiting at once: the changes in progress are cancelled; run the command again to converge.")
					abort()
					return
				}
			}
		}
	}()
	return work, stop, func() {
		signal.Stop(sigs)
		close(done)
		wg.Wait()
		abort()
	}
}
