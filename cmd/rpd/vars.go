package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/rpdhq/rpd/spec"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ", ") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// configFlags are the flags of every command that loads a configuration.
// A command registers them on its flag set, then calls load:
//
//	var cf configFlags
//	fs := newFlagSet("plan", "[options] [DIR|FILE]", "...")
//	cf.register(fs)
//	if code, ok := parseFlags(e, fs, args); !ok { return code }
//	path, code, ok := configPath(e, fs)
//	if !ok { return code }
//	cfg, code := cf.load(e, path)
//	if cfg == nil { return code }
type configFlags struct {
	vars     listFlag
	varFiles listFlag
	noColor  bool
}

func (c *configFlags) register(fs *flag.FlagSet) {
	fs.Var(&c.vars, "var", "set a variable: -var 'NAME=VALUE' (repeatable; overrides -var-file and "+spec.EnvPrefix+"NAME)")
	fs.Var(&c.varFiles, "var-file", "read variables from an HCL file of NAME = VALUE lines (repeatable; later files override earlier ones)")
	c.registerColor(fs)
}

func (c *configFlags) registerColor(fs *flag.FlagSet) {
	fs.BoolVar(&c.noColor, "no-color", false, "disable colour in the output")
}

// specVars gathers the variable values of the flags and the environment.
func (c *configFlags) specVars(e *env) spec.Vars {
	return spec.Vars{Env: e.environ, Files: c.varFiles, Flags: c.vars}
}

// configPath returns the command's one optional positional argument, the
// configuration directory or file, "." when absent.
func configPath(e *env, fs *flag.FlagSet) (string, int, bool) {
	switch fs.NArg() {
	case 0:
		return ".", 0, true
	case 1:
		return fs.Arg(0), 0, true
	default:
		fmt.Fprintf(e.stderr, "rpd %s: expected one configuration directory or file, got %d arguments: %s\n", fs.Name(), fs.NArg(), strings.Join(fs.Args(), " "))
		return "", 1, false
	}
}

// load loads the configuration at path (a directory of *.hcl files or one
// file) and prints its diagnostics, warnings included, on stderr. It returns
// the configuration, or nil and the exit code (1) when it has errors.
func (c *configFlags) load(e *env, path string) (*spec.Config, int) {
	l := spec.NewLoader()
	cfg, diags := l.Load(path, c.specVars(e))
	if len(diags) > 0 {
		writeDiagnostics(e.stderr, l.Files(), diags, e.color(e.stderr, c.noColor), e.width(e.stderr))
	}
	if diags.HasErrors() {
		return nil, 1
	}
	return cfg, 0
}

// width is the wrapping width of text written to w: 78 on a terminal, none
// otherwise.
func (e *env) width(w io.Writer) uint {
	if e.isTerminal != nil && e.isTerminal(w) {
		return 78
	}
	return 0
}

// writeDiagnostics prints diags the way Terraform does: "Error: summary",
// then "  on FILE line N, in BLOCK:", the source snippet and the detail.
func writeDiagnostics(w io.Writer, files map[string]*hcl.File, diags hcl.Diagnostics, color bool, width uint) {
	sorted := append(hcl.Diagnostics(nil), diags...)
	spec.SortDiagnostics(sorted)
	tw := hcl.NewDiagnosticTextWriter(w, files, width, color)
	for _, d := range sorted {
		_ = tw.WriteDiagnostic(d)
	}
}
