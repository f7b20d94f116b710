package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/rpdhq/rpd/internal/open"
	"github.com/rpdhq/rpd/reconcile"
	"github.com/rpdhq/rpd/spec"
)

const planHelp = `
Shows what rpd apply would change: refreshes live state from the backend
(read-only: a plan never creates anything) and compares it with the
configuration in DIR (every *.hcl file) or FILE, default the current
directory.

Symbols: + create, ~ update in place, - destroy, -/+ destroy and then create
a replacement. Changes made outside rpd since its last apply are listed
separately as drift.

With -destroy, the plan removes everything the stack manages, whatever
the configuration declares (it still names the stack and the backend): see
rpd destroy.

A change that would discard idle runners (deleting or replacing a queue
that holds some) or strand holders (deleting a pool whose slots are held)
is refused: the plan fails and names it. -allow-destroy-nonempty lets such
changes through, and a plan saved with it applies them.

Exit status: 0 on success, 1 on error; with -detailed-exitcode, 0 when
there are no changes, 1 on error, 2 when there are changes.
`

// planFlags are the flags plan and apply share.
type planFlags struct {
	cf            configFlags
	targets       listFlag
	refreshOnly   bool
	destroy       bool
	allowNonEmpty bool
	parallelism   int
}

// register registers the flags on fs; destroy (the rpd destroy command)
// leaves out -refresh-only, which a destroy cannot be.
func (f *planFlags) register(fs *flag.FlagSet, destroy bool) {
	f.cf.register(fs)
	fs.Var(&f.targets, "target", "limit the plan to the resource ADDR (such as pool.database_pool or runner_class.medium) and what it depends on; repeatable")
	if !destroy {
		fs.BoolVar(&f.refreshOnly, "refresh-only", false, "plan only to record drift as the applied state, changing no live object")
	}
	fs.BoolVar(&f.allowNonEmpty, "allow-destroy-nonempty", false, "allow deleting or replacing queues that still hold idle runners (they are lost) and deleting pools whose slots are held")
	fs.IntVar(&f.parallelism, "parallelism", reconcile.DefaultParallelism, "at most N concurrent backend calls")
}

// options checks the flags and converts them to reconcile's.
func (f *planFlags) options(cfg *spec.Config) (reconcile.PlanOptions, error) {
	if f.parallelism < 1 {
		return reconcile.PlanOptions{}, fmt.Errorf("-parallelism=%d: use 1 or more", f.parallelism)
	}
	opts := reconcile.PlanOptions{Parallelism: f.parallelism, RefreshOnly: f.refreshOnly, Destroy: f.destroy, AllowDestroyNonEmpty: f.allowNonEmpty}
	if cfg != nil {
		opts.Backend = reconcile.BackendConfigOf(cfg.Backend)
	}
	for _, t := range f.targets {
		a, err := reconcile.ParseAddress(t)
		if err != nil {
			return opts, fmt.Errorf("-target: %w", err)
		}
		opts.Targets = append(opts.Targets, a)
	}
	if f.refreshOnly && len(opts.Targets) > 0 {
		return opts, errors.New("-refresh-only and -target cannot be combined: a refresh-only plan records every managed object")
	}
	if f.refreshOnly && f.destroy {
		return opts, errors.New("-refresh-only and -destroy cannot be combined: a destroy plan changes live objects")
	}
	return opts, nil
}

func runPlan(ctx context.Context, e *env, args []string) int {
	var f planFlags
	fs := newFlagSet("plan", "[options] [DIR|FILE]", planHelp)
	f.register(fs, false)
	fs.BoolVar(&f.destroy, "destroy", false, "plan to destroy everything the stack manages (see rpd destroy)")
	out := fs.String("out", "", "save the plan to FILE (JSON) for rpd apply FILE and rpd show FILE")
	asJSON := fs.Bool("json", false, "print the plan as one JSON document (see docs/plan.md)")
	detailed := fs.Bool("detailed-exitcode", false, "exit 0 for no changes, 1 for errors, 2 for changes")
	if code, ok := parseFlags(e, fs, args); !ok {
		return code
	}
	path, code, ok := configPath(e, fs)
	if !ok {
		return code
	}
	view := newPlanView(*asJSON, e.stdout, e.stderr, e.color(e.stdout, f.cf.noColor))
	if _, err := f.options(nil); err != nil {
		view.Error(err)
		return 1
	}
	if jv, ok := view.(*jsonView); ok {
		f.cf.diagnostics = jv.Diagnostics
	}
	cfg, code := f.cf.load(e, path)
	if cfg == nil {
		return code
	}
	opts, _ := f.options(cfg)
	b, err := open.Open(ctx, cfg.Stack, opts.Backend, open.Options{ReadOnly: true})
	if err != nil {
		view.Error(err)
		return 1
	}
	defer b.Close()
	p, err := reconcile.MakePlan(ctx, cfg, b.Live(), opts)
	if err != nil {
		view.Error(err)
		return 1
	}
	if err := view.Plan(p); err != nil {
		view.Error(err)
		return 1
	}
	if *out != "" {
		if err := writePlanFile(*out, p); err != nil {
			view.Error(err)
			return 1
		}
		view.Saved(*out)
	}
	if *detailed && p.HasChanges() {
		return 2
	}
	return 0
}

func writePlanFile(path string, p *reconcile.Plan) error {
	b, err := reconcile.EncodePlan(p)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("save the plan: %w", err)
	}
	return nil
}

// readPlanFile reads a saved plan; errors name the file and say what to do.
func readPlanFile(path string) (*reconcile.Plan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the saved plan: %w; give the file written by rpd plan -out FILE", err)
	}
	p, err := reconcile.DecodePlan(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}
