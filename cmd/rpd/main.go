package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/agext/levenshtein"
	"github.com/mattn/go-isatty"
)

// command is one subcommand. run receives the arguments after the command
// name and returns the process exit code; it must print its usage and
// return 0 when given -h (newFlagSet and parseFlags do that), because
// "rpd help" collects every command's flags that way.
type command struct {
	name     string
	synopsis string
	run      func(ctx context.Context, e *env, args []string) int
}

// commands is the command table, in the order "rpd help" lists them. Adding
// a command is one entry here plus a file with its run function.
var commands = []command{
	{"validate", "Check whether the configuration is valid", runValidate},
	{"fmt", "Rewrite configuration files to the canonical format", runFmt},
	{"plan", "Show changes required by the current configuration", runPlan},
	{"apply", "Create or update live state to match the configuration", runApply},
	{"destroy", "Destroy everything the stack manages", runDestroy},
	{"show", "Show a saved plan", runShow},
	{"state", "List or show what was applied to the stack's state", runState},
	{"force-unlock", "Release a stuck lock on the stack's state", runForceUnlock},
	{"backup", "Write a backup of the stack's backend while daemons run", runBackup},
	{"restore", "Restore a backup into an empty backend (local or aws)", runRestore},
	{"watch", "Run the daemon on a configuration directory, reloading on every change", runWatch},
	{"serve", "Run the daemon on the runtime document in the state store", runServe},
	{"run", "Run a command while holding slots of a pool of the daemon", runRun},
	{"status", "Show a running daemon's status, pools, budgets and ceilings", runStatus},
	{"version", "Show the rpd version", runVersion},
}

// env is everything a command may touch of the outside world, so tests can
// run commands in-process.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// environ is the process environment as "K=V" (os.Environ()).
	environ []string
	// isTerminal reports whether w is a terminal (colour, wrapping).
	isTerminal func(w io.Writer) bool
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runEnv(ctx, &env{
		stdin:      os.Stdin,
		stdout:     os.Stdout,
		stderr:     os.Stderr,
		environ:    os.Environ(),
		isTerminal: fileIsTerminal,
	}, os.Args[1:])
	stop()
	os.Exit(code)
}

// run runs the rpd command line args (without the program name) with the
// given output streams, an empty environment and no terminal, and returns the
// exit code.
func run(args []string, stdout, stderr io.Writer) int {
	return runEnv(context.Background(), &env{
		stdin:      strings.NewReader(""),
		stdout:     stdout,
		stderr:     stderr,
		isTerminal: func(io.Writer) bool { return false },
	}, args)
}

// runEnv dispatches args to a command, after the global option
// -chdir=DIR, which switches to DIR first, as Terraform's does: every path
// the command reads or writes (configuration, saved plans, the local
// backend's .rpd/state.db) is then relative to DIR.
func runEnv(ctx context.Context, e *env, args []string) int {
	args, code, ok := chdir(e, args)
	if !ok {
		return code
	}
	if len(args) == 0 {
		printHelp(ctx, e, e.stderr, false)
		return 1
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		return runHelp(ctx, e, rest)
	case "-v", "-version", "--version":
		return runVersion(ctx, e, nil)
	}
	if c, ok := lookup(name); ok {
		return c.run(ctx, e, rest)
	}
	fmt.Fprintf(e.stderr, "rpd: unknown command %q. Run \"rpd help\" for the list of commands.\n", name)
	if s := suggest(name); s != "" {
		fmt.Fprintf(e.stderr, "Did you mean %q?\n", s)
	}
	return 1
}

// chdir handles a leading -chdir=DIR (or -chdir DIR, --chdir) and returns
// the remaining arguments.
func chdir(e *env, args []string) ([]string, int, bool) {
	if len(args) == 0 {
		return args, 0, true
	}
	opt, dir, hasValue := strings.Cut(strings.TrimPrefix(args[0], "-"), "=")
	if opt != "-chdir" && opt != "chdir" {
		return args, 0, true
	}
	rest := args[1:]
	if !hasValue {
		if len(rest) == 0 {
			fmt.Fprintln(e.stderr, "rpd: -chdir needs a directory: rpd -chdir=DIR COMMAND [options]")
			return nil, 1, false
		}
		dir, rest = rest[0], rest[1:]
	}
	if err := os.Chdir(dir); err != nil {
		fmt.Fprintf(e.stderr, "rpd: -chdir=%s: %v; give an existing directory\n", dir, err)
		return nil, 1, false
	}
	return rest, 0, true
}

func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// suggest returns the command whose name shares the longest prefix with
// name (at least two characters), or "".
func suggest(name string) string {
	best, bestLen := "", 1
	names := make([]string, 0, len(commands))
	for _, c := range commands {
		names = append(names, c.name)
	}
	sort.Strings(names)
	for _, n := range names {
		l := 0
		for l < len(n) && l < len(name) && n[l] == name[l] {
			l++
		}
		if l > bestLen {
			best, bestLen = n, l
		}
	}
	return best
}

func fileIsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// getenv looks name up in e.environ.
func (e *env) getenv(name string) (string, bool) {
	for i := len(e.environ) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(e.environ[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// color reports whether output to w may be coloured: w is a terminal,
// NO_COLOR is unset and the command was not given -no-color.
func (e *env) color(w io.Writer, noColor bool) bool {
	if noColor {
		return false
	}
	if _, ok := e.getenv("NO_COLOR"); ok {
		return false
	}
	return e.isTerminal != nil && e.isTerminal(w)
}

// newFlagSet returns the flag set of a command. usage is the rest of the
// usage line after "rpd NAME" (such as "[options] [DIR|FILE]") and help the
// paragraphs printed under it.
func newFlagSet(name, usage, help string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: rpd %s %s\n\n", name, usage)
		fmt.Fprintf(w, "%s\n", indent(strings.TrimSpace(help), "  "))
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintf(w, "\nOptions:\n\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses args into fs. When it returns ok=false the command must
// return code at once: 0 after -h (usage printed on stdout), 1 after a bad
// flag (error and usage on stderr; with -json, the error document on
// stdout instead). A mistyped flag gets a suggestion.
func parseFlags(e *env, fs *flag.FlagSet, args []string) (code int, ok bool) {
	err := fs.Parse(args)
	if err == nil {
		return 0, true
	}
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(e.stdout)
		fs.Usage()
		return 0, false
	}
	msg := err.Error()
	if name, found := strings.CutPrefix(msg, "flag provided but not defined: -"); found {
		if s := suggestFlag(fs, name); s != "" {
			msg += fmt.Sprintf("\nDid you mean -%s?", s)
		}
	}
	if wantsJSON(fs, args) {
		writeJSONError(e.stdout, fmt.Sprintf("rpd %s: %s; run rpd %s -h for its options", fs.Name(), msg, fs.Name()), nil)
		return 1, false
	}
	fmt.Fprintf(e.stderr, "rpd %s: %s\n\n", fs.Name(), msg)
	fs.SetOutput(e.stderr)
	fs.Usage()
	return 1, false
}

// wantsJSON reports whether the command was asked for -json output, even
// when parsing stopped before the -json among args.
func wantsJSON(fs *flag.FlagSet, args []string) bool {
	f := fs.Lookup("json")
	if f == nil {
		return false
	}
	if f.Value.String() == "true" {
		return true
	}
	for _, a := range args {
		switch a {
		case "-json", "--json", "-json=true", "--json=true":
			return true
		case "--":
			return false
		}
	}
	return false
}

// suggestFlag returns the flag of fs closest to the mistyped name (at most
// a third of its letters different), or "".
func suggestFlag(fs *flag.FlagSet, name string) string {
	name, _, _ = strings.Cut(name, "=")
	best, bestDist := "", len(name)/3+1
	fs.VisitAll(func(f *flag.Flag) {
		if d := levenshtein.Distance(name, f.Name, nil); d < bestDist {
			best, bestDist = f.Name, d
		}
	})
	return best
}

func indent(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n")
}
