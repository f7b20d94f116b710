package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rpdhq/rpd/internal/open"
	"github.com/rpdhq/rpd/reconcile"
	"github.com/rpdhq/rpd/spec"
)

const stateHelp = `
Reads what rpd apply (or rpd watch) last applied to the stack's state store,
the way terraform state does. It only reads: no lock is taken and nothing
is changed.

Subcommands:

  rpd state list [options] [DIR|FILE] [ADDRESS...]   list the applied
                                                      resources, or those
                                                      matching the ADDRESSes
  rpd state show [options] [DIR|FILE] ADDRESS        show one resource's
                                                      attributes

The configuration DIR or FILE (as for every other command; or -config;
default: the current directory) says which backend and stack to read; a
directory without *.hcl files means the defaults, the local backend
.rpd/state.db and stack "default".
`

const stateListHelp = `
Lists the resources recorded in the stack's state, one address per line,
in dependency order. An ADDRESS argument keeps the resources it names:
TYPE (every pool, with "pool") or TYPE.NAME.
`

const stateShowHelp = `
Shows the attributes of one resource as rpd last applied it, in the
rendering rpd plan uses. Exit status 1 when the state holds no such
resource.
`

func runState(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 {
		fmt.Fprintf(e.stderr, "Usage: rpd state list|show [options] ...\n\n%s\n", indent(strings.TrimSpace(stateHelp), "  "))
		return 1
	}
	switch args[0] {
	case "list":
		return runStateList(ctx, e, args[1:])
	case "show":
		return runStateShow(ctx, e, args[1:])
	case "-h", "-help", "--help", "help":
		// The options are those of both subcommands.
		var f stateFlags
		fs := newFlagSet("state", "list|show [options] ...", stateHelp)
		f.register(fs)
		fs.SetOutput(e.stdout)
		fs.Usage()
		return 0
	}
	fmt.Fprintf(e.stderr, "rpd state: unknown subcommand %q; use rpd state list or rpd state show ADDRESS\n", args[0])
	return 1
}

// stateFlags are the flags list and show share.
type stateFlags struct {
	cf     configFlags
	config string
	asJSON bool
}

func (f *stateFlags) register(fs *flag.FlagSet) {
	f.cf.register(fs)
	fs.StringVar(&f.config, "config", ".", "the configuration DIR or FILE naming the backend and stack")
	fs.BoolVar(&f.asJSON, "json", false, "print JSON (see docs/plan.md, \"rpd state\")")
}

// fail reports a failure of the subcommand cmd ("state list"): with
// -json, as the error document on stdout; else on stderr. It returns 1.
func (f *stateFlags) fail(e *env, cmd string, err error) int {
	if f.asJSON {
		writeJSONError(e.stdout, "rpd "+cmd+": "+err.Error(), nil)
	} else {
		fmt.Fprintf(e.stderr, "rpd %s: %v\n", cmd, err)
	}
	return 1
}

// read loads the configuration and reads the applied state.
func (f *stateFlags) read(ctx context.Context, e *env) (*reconcile.RuntimeDoc, int64, bool) {
	if f.asJSON {
		f.cf.diagnostics = (&jsonView{stdout: e.stdout}).Diagnostics
	}
	cfg := f.loadConfig(e)
	if cfg == nil {
		return nil, 0, false
	}
	b, err := open.Open(ctx, cfg.Stack, reconcile.BackendConfigOf(cfg.Backend), open.Options{ReadOnly: true})
	if err != nil {
		f.fail(e, "state", err)
		return nil, 0, false
	}
	defer b.Close()
	doc, version, err := reconcile.ReadApplied(ctx, b.State, cfg.Stack)
	if err != nil {
		f.fail(e, "state", fmt.Errorf("%s: %w", b.Where, err))
		return nil, 0, false
	}
	return doc, version, true
}

// configArg takes the configuration DIR or FILE from the first argument,
// as every other command takes it, when that argument names an existing
// file or directory and is no resource address; it returns the other
// arguments (the addresses).
func (f *stateFlags) configArg(args []string) ([]string, error) {
	if len(args) == 0 || isAddressArg(args[0]) {
		return args, nil
	}
	if _, err := os.Stat(args[0]); err != nil {
		return args, nil // an unknown address: the caller says so
	}
	if f.config != "." {
		return nil, fmt.Errorf("the configuration is given twice, as -config %s and as %s; give one", f.config, args[0])
	}
	f.config = args[0]
	return args[1:], nil
}

// isAddressArg reports whether s is a resource address (TYPE.NAME) or a
// resource type (TYPE).
func isAddressArg(s string) bool {
	if _, err := reconcile.ParseAddress(s); err == nil {
		return true
	}
	_, err := reconcile.ParseAddress(s + ".x")
	return err == nil
}

// loadConfig loads -config; the default directory without *.hcl files is
// the default configuration.
func (f *stateFlags) loadConfig(e *env) *spec.Config {
	if f.config == "." && !hasHCL(".") {
		cfg, diags := spec.NewLoader().LoadSources(map[string][]byte{"(defaults)": nil}, f.cf.specVars(e))
		if diags.HasErrors() {
			f.fail(e, "state", diags)
			return nil
		}
		return cfg
	}
	cfg, _ := f.cf.load(e, f.config)
	return cfg
}

func hasHCL(dir string) bool {
	m, err := filepath.Glob(filepath.Join(dir, "*.hcl"))
	if err != nil || len(m) > 0 {
		return true // let the loader report a bad pattern or load the files
	}
	_, err = os.Stat(dir)
	return errors.Is(err, fs.ErrNotExist) // a missing directory: the loader says so
}

// jsonState is rpd state list -json.
type jsonState struct {
	FormatVersion string                      `json:"format_version"`
	Stack         string                      `json:"stack"`
	Lineage       string                      `json:"lineage"`
	StateVersion  int64                       `json:"state_version"`
	Resources     []reconcile.AppliedResource `json:"resources"`
}

func runStateList(ctx context.Context, e *env, args []string) int {
	var f stateFlags
	fs := newFlagSet("state list", "[options] [DIR|FILE] [ADDRESS...]", stateListHelp)
	f.register(fs)
	if code, ok := parseFlags(e, fs, args); !ok {
		return code
	}
	for _, a := range fs.Args() {
		if strings.HasPrefix(a, "-") {
			return f.fail(e, "state list", fmt.Errorf("options go before the addresses: rpd state list %s ...", a))
		}
	}
	filters, err := f.configArg(fs.Args())
	if err != nil {
		return f.fail(e, "state list", err)
	}
	doc, version, ok := f.read(ctx, e)
	if !ok {
		return 1
	}
	var res []reconcile.AppliedResource
	for _, r := range doc.Applied() {
		if matchesAny(r.Address, filters) {
			res = append(res, r)
		}
	}
	if f.asJSON {
		return writeJSONTo(e, "state list", jsonState{FormatVersion: "1.0", Stack: doc.Stack, Lineage: doc.Lineage, StateVersion: version, Resources: orEmpty(res)})
	}
	if len(res) == 0 && len(filters) == 0 {
		fmt.Fprintf(e.stderr, "The state of stack %q is empty: nothing has been applied yet (rpd apply, or rpd watch).\n", doc.Stack)
		return 0
	}
	for _, r := range res {
		fmt.Fprintln(e.stdout, r.Address)
	}
	return 0
}

// matchesAny reports whether a is named by one of the filters (TYPE or
// TYPE.NAME); no filters match everything.
func matchesAny(a reconcile.Address, filters []string) bool {
	if len(filters) == 0 {
		return true
	}
	for _, f := range filters {
		if f == string(a.Type) || f == a.String() {
			return true
		}
	}
	return false
}

func runStateShow(ctx context.Context, e *env, args []string) int {
	var f stateFlags
	fs := newFlagSet("state show", "[options] [DIR|FILE] ADDRESS", stateShowHelp)
	f.register(fs)
	if code, ok := parseFlags(e, fs, args); !ok {
		return code
	}
	rest, err := f.configArg(fs.Args())
	if err != nil {
		return f.fail(e, "state show", err)
	}
	if len(rest) != 1 {
		return f.fail(e, "state show", fmt.Errorf("give exactly one resource address, such as pool.default_pool (rpd state list shows them); got %d arguments", len(rest)))
	}
	addr, err := reconcile.ParseAddress(rest[0])
	if err != nil {
		return f.fail(e, "state show", err)
	}
	doc, _, ok := f.read(ctx, e)
	if !ok {
		return 1
	}
	for _, r := range doc.Applied() {
		if r.Address != addr {
			continue
		}
		if f.asJSON {
			return writeJSONTo(e, "state show", r)
		}
		c := colorizer(e.color(e.stdout, f.cf.noColor))
		fmt.Fprintf(e.stdout, "%s\n", c.bold("# "+r.Address.String()+":"))
		fmt.Fprintf(e.stdout, "%s %q {\n", r.Address.Type, r.Address.Name)
		keys := slices.Sorted(maps.Keys(r.Values))
		w := keyWidth(keys)
		for _, k := range keys {
			fmt.Fprintf(e.stdout, "    %-*s = %s\n", w, k, formatValue(r.Values[k]))
		}
		fmt.Fprintln(e.stdout, "}")
		return 0
	}
	return f.fail(e, "state show", fmt.Errorf("no resource %s in the state of stack %q; rpd state list shows what was applied", addr, doc.Stack))
}

func writeJSONTo(e *env, cmd string, v any) int {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		fmt.Fprintf(e.stderr, "rpd %s: encode JSON: %v\n", cmd, err)
		return 1
	}
	fmt.Fprintf(e.stdout, "%s\n", b)
	return 0
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
