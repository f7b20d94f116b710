package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/mitchellh/go-wordwrap"

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
	// diagnostics, when set, receives load's diagnostics instead of
	// stderr (apply -json streams them).
	diagnostics func(hcl.Diagnostics)
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
		hint := "give one"
		for _, a := range fs.Args()[1:] {
			if strings.HasPrefix(a, "-") {
				hint = fmt.Sprintf("options go before it: rpd %s %s %s", fs.Name(), strings.Join(fs.Args()[1:], " "), fs.Arg(0))
				break
			}
		}
		msg := fmt.Sprintf("rpd %s: expected one configuration directory or file, got %d arguments: %s; %s", fs.Name(), fs.NArg(), strings.Join(fs.Args(), " "), hint)
		if wantsJSON(fs, nil) {
			writeJSONError(e.stdout, msg, nil)
		} else {
			fmt.Fprintln(e.stderr, msg)
		}
		return "", 1, false
	}
}

// load loads the configuration at path (a directory of *.hcl files or one
// file) and prints its diagnostics, warnings included, on stderr. It returns
// the configuration, or nil and the exit code (1) when it has errors.
func (c *configFlags) load(e *env, path string) (*spec.Config, int) {
	l := spec.NewLoader()
	cfg, diags := l.Load(path, c.specVars(e))
	c.printer(e)(l.Files(), diags)
	if diags.HasErrors() {
		return nil, 1
	}
	return cfg, 0
}

// printer returns what load does with diagnostics: pass them to
// c.diagnostics when set, else print them on stderr. The daemon, which
// loads the configuration itself, reports through it.
func (c *configFlags) printer(e *env) func(map[string]*hcl.File, hcl.Diagnostics) {
	return func(files map[string]*hcl.File, diags hcl.Diagnostics) {
		switch {
		case len(diags) == 0:
		case c.diagnostics != nil:
			c.diagnostics(diags)
		default:
			writeDiagnostics(e.stderr, files, diags, e.color(e.stderr, c.noColor), e.width(e.stderr))
		}
	}
}

// width is the wrapping width of text written to w: 78 on a terminal, none
// otherwise.
func (e *env) width(w io.Writer) uint {
	if e.isTerminal != nil && e.isTerminal(w) {
		return 78
	}
	return 0
}

// writeDiagnostics prints diags in Terraform's layout. Without colour it
// is Terraform's plain form:
//
//	(blank line)
//	Error: summary
//	(blank line)
//	  on FILE line N, in BLOCK:
//	   N: source line
//	(blank line)
//	detail
//
// With colour, the same text framed by a red (yellow for warnings) rule
// "╷ │ ╵" in the left margin, the summary in bold and the offending range
// of the snippet underlined.
func writeDiagnostics(w io.Writer, files map[string]*hcl.File, diags hcl.Diagnostics, color bool, width uint) {
	sorted := append(hcl.Diagnostics(nil), diags...)
	spec.SortDiagnostics(sorted)
	for _, d := range sorted {
		_, _ = io.WriteString(w, formatDiagnostic(d, files, colorizer(color), int(width)))
	}
}

// formatDiagnostic renders one diagnostic; see writeDiagnostics.
func formatDiagnostic(d *hcl.Diagnostic, files map[string]*hcl.File, c colorizer, width int) string {
	var b strings.Builder
	label, paint := "Error: ", c.red
	if d.Severity == hcl.DiagWarning {
		label, paint = "Warning: ", c.yellow
	}
	rule := 0 // width of the left rule
	if c {
		rule = 2
		b.WriteString(c.bold(paint(label)) + c.bold(d.Summary) + "\n\n")
	} else {
		b.WriteString("\n" + label + d.Summary + "\n\n")
	}
	writeSnippet(&b, d, files, c)
	if d.Detail != "" {
		for _, line := range strings.Split(d.Detail, "\n") {
			if width-rule-1 > 0 && !strings.HasPrefix(line, " ") {
				line = wordwrap.WrapString(line, uint(width-rule-1))
			}
			b.WriteString(line + "\n")
		}
	}
	if !c {
		return b.String()
	}
	var framed strings.Builder
	framed.WriteString(paint("╷") + "\n")
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if line == "" {
			framed.WriteString(paint("│") + "\n")
		} else {
			framed.WriteString(paint("│") + " " + line + "\n")
		}
	}
	framed.WriteString(paint("╵") + "\n")
	return framed.String()
}

// writeSnippet writes "  on FILE line N, in BLOCK:" and the numbered
// source lines of the diagnostic's subject (and context), then a blank
// line; nothing when the diagnostic has no subject.
func writeSnippet(b *strings.Builder, d *hcl.Diagnostic, files map[string]*hcl.File, c colorizer) {
	if d.Subject == nil {
		return
	}
	subj := *d.Subject
	f := files[subj.Filename]
	if f == nil || f.Bytes == nil {
		fmt.Fprintf(b, "  on %s line %d:\n  (source code not available)\n\n", subj.Filename, subj.Start.Line)
		return
	}
	src := f.Bytes
	in := ""
	if nav, ok := f.Nav.(interface{ ContextString(offset int) string }); ok {
		if s := nav.ContextString(subj.Start.Byte); s != "" {
			in = ", in " + s
		}
	}
	fmt.Fprintf(b, "  on %s line %d%s:\n", subj.Filename, subj.Start.Line, in)
	shown := subj
	if d.Context != nil && d.Context.Filename == subj.Filename {
		shown = hcl.RangeOver(shown, *d.Context)
	}
	// Widen to whole lines, within the file.
	start := min(max(shown.Start.Byte, 0), len(src))
	end := min(max(shown.End.Byte, start), len(src))
	for start > 0 && src[start-1] != '\n' {
		start--
	}
	switch i := bytes.IndexByte(src[end:], '\n'); {
	case end > start && src[end-1] == '\n': // a range ending just past a newline
		end--
	case i >= 0:
		end += i
	default:
		end = len(src)
	}
	code := string(src[start:end])
	hs := min(max(subj.Start.Byte-start, 0), len(code))
	he := min(max(subj.End.Byte-start, hs), len(code))
	if c && he > hs {
		code = code[:hs] + "\x1b[4m" + code[hs:he] + "\x1b[0m" + code[he:]
	}
	first := shown.Start.Line
	if first < 1 {
		first = 1
	}
	for i, line := range strings.Split(strings.TrimRight(code, "\r"), "\n") {
		fmt.Fprintf(b, "%4d: %s\n", first+i, strings.TrimRight(line, "\r"))
	}
	b.WriteByte('\n')
}
