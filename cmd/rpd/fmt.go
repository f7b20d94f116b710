package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclwrite"

	"github.com/rpdhq/rpd/spec"
)

const fmtHelp = `
Rewrites configuration files to the canonical format and style. With no
arguments it formats the *.hcl files of the current directory; each
argument is a directory (its *.hcl files), a file, or "-" for standard
input (formatted to standard output).

Files with syntax errors are reported and left alone.

Exit status: 0 on success; 1 on errors (syntax errors, unreadable files);
3 with -check when some file is not formatted.
`

// exitFmtCheck is Terraform's exit code for "fmt -check found unformatted files".
const exitFmtCheck = 3

type fmtOptions struct {
	list, write, diff, check, recursive, noColor bool
}

func runFmt(_ context.Context, e *env, args []string) int {
	var o fmtOptions
	fs := newFlagSet("fmt", "[options] [DIR|FILE|-]...", fmtHelp)
	fs.BoolVar(&o.list, "list", true, "list the files whose formatting differs")
	fs.BoolVar(&o.write, "write", true, "rewrite the files in place (false with -check)")
	fs.BoolVar(&o.diff, "diff", false, "print the differences as a unified diff")
	fs.BoolVar(&o.check, "check", false, "check only: change nothing, exit 3 when a file is not formatted")
	fs.BoolVar(&o.recursive, "recursive", false, "also process subdirectories (hidden ones excluded)")
	fs.BoolVar(&o.noColor, "no-color", false, "disable colour in the output")
	if code, ok := parseFlags(e, fs, args); !ok {
		return code
	}
	if o.check {
		o.write = false
	}
	paths := fs.Args()
	if len(paths) == 0 {
		paths = []string{"."}
	}

	parser := hclparse.NewParser()
	var diags hcl.Diagnostics
	changed, failed := false, false
	for _, p := range paths {
		if p == "-" {
			src, err := io.ReadAll(e.stdin)
			if err != nil {
				fmt.Fprintf(e.stderr, "rpd fmt: reading standard input: %v\n", err)
				failed = true
				continue
			}
			out, ds := formatSource(parser, src, "<stdin>")
			diags = append(diags, ds...)
			if ds.HasErrors() {
				continue
			}
			if !bytes.Equal(src, out) {
				changed = true
			}
			switch {
			case o.diff:
				writeDiff(e.stdout, "<stdin>", src, out)
			case !o.check:
				e.stdout.Write(out)
			}
			continue
		}
		files, err := fmtTargets(p, o.recursive)
		if err != nil {
			fmt.Fprintf(e.stderr, "rpd fmt: %v\n", err)
			failed = true
			continue
		}
		for _, f := range files {
			c, ds, err := o.formatFile(e, parser, f)
			diags = append(diags, ds...)
			if err != nil {
				fmt.Fprintf(e.stderr, "rpd fmt: %v\n", err)
				failed = true
			}
			changed = changed || c
		}
	}
	if len(diags) > 0 {
		writeDiagnostics(e.stderr, parser.Files(), diags, e.color(e.stderr, o.noColor), e.width(e.stderr))
	}
	switch {
	case failed || diags.HasErrors():
		return 1
	case o.check && changed:
		return exitFmtCheck
	}
	return 0
}

// formatFile formats one file as o says and reports whether it differed.
func (o fmtOptions) formatFile(e *env, parser *hclparse.Parser, name string) (bool, hcl.Diagnostics, error) {
	src, err := os.ReadFile(name)
	if err != nil {
		return false, nil, err
	}
	out, diags := formatSource(parser, src, name)
	if diags.HasErrors() || bytes.Equal(src, out) {
		return false, diags, nil
	}
	if o.list {
		fmt.Fprintln(e.stdout, name)
	}
	if o.write {
		info, err := os.Stat(name)
		if err != nil {
			return true, diags, err
		}
		if err := os.WriteFile(name, out, info.Mode().Perm()); err != nil {
			return true, diags, fmt.Errorf("writing %s: %w", name, err)
		}
	}
	if o.diff {
		writeDiff(e.stdout, name, src, out)
	}
	return true, diags, nil
}

// formatSource checks src's syntax and returns it in canonical format.
func formatSource(parser *hclparse.Parser, src []byte, name string) ([]byte, hcl.Diagnostics) {
	if d := spec.CheckSource(name, src); d != nil {
		return nil, hcl.Diagnostics{d}
	}
	if _, diags := parser.ParseHCL(src, name); diags.HasErrors() {
		return nil, diags
	}
	return hclwrite.Format(src), nil
}

// fmtTargets lists the files to format for one argument: the file itself,
// or a directory's *.hcl files (and its subdirectories' when recursive,
// skipping hidden ones), sorted.
func fmtTargets(p string, recursive bool) ([]string, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("%w; give a directory or an .hcl file", err)
	}
	if !info.IsDir() {
		return []string{p}, nil
	}
	var out []string
	err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != p && (!recursive || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".hcl") && !strings.HasPrefix(d.Name(), ".") && d.Type().IsRegular() {
			out = append(out, path)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

// writeDiff prints a unified diff (3 lines of context) from a to b.
func writeDiff(w io.Writer, name string, a, b []byte) {
	al, bl := splitLines(a), splitLines(b)
	ops := diffLines(al, bl)
	name = strings.TrimPrefix(filepath.ToSlash(name), "/")
	fmt.Fprintf(w, "--- old/%s\n+++ new/%s\n", name, name)
	const ctx = 3
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		// A hunk: from ctx lines before this change to ctx lines after the
		// last change that is within 2*ctx of the previous one.
		start := max(0, i-ctx)
		end := i
		for j := i; j < len(ops); j++ {
			if ops[j].kind != ' ' {
				end = j
			} else if j-end > 2*ctx {
				break
			}
		}
		stop := min(len(ops), end+ctx+1)
		aStart, bStart, aN, bN := ops[start].a, ops[start].b, 0, 0
		for _, op := range ops[start:stop] {
			if op.kind != '+' {
				aN++
			}
			if op.kind != '-' {
				bN++
			}
		}
		fmt.Fprintf(w, "@@ -%s +%s @@\n", hunkRange(aStart, aN), hunkRange(bStart, bN))
		for _, op := range ops[start:stop] {
			line := op.text
			fmt.Fprintf(w, "%c%s", op.kind, line)
			if !strings.HasSuffix(line, "\n") {
				fmt.Fprintf(w, "\n\\ No newline at end of file\n")
			}
		}
		i = stop
	}
}

func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if n == 1 {
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

func splitLines(b []byte) []string {
	s := string(b)
	var out []string
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// diffOp is one line of an edit script: ' ' kept, '-' removed, '+' added;
// a and b are the 0-based line numbers in the old and new text where the
// op sits.
type diffOp struct {
	kind rune
	text string
	a, b int
}

// maxDiffCells bounds the LCS table; larger inputs diff as one replacement.
const maxDiffCells = 4 << 20

// diffLines returns an edit script from a to b (longest common subsequence,
// common prefix and suffix trimmed first).
func diffLines(a, b []string) []diffOp {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	var ops []diffOp
	for i := 0; i < pre; i++ {
		ops = append(ops, diffOp{' ', a[i], i, i})
	}
	ai, bi := pre, pre
	emit := func(kind rune, text string) {
		ops = append(ops, diffOp{kind, text, ai, bi})
		if kind != '+' {
			ai++
		}
		if kind != '-' {
			bi++
		}
	}
	if (len(ma)+1)*(len(mb)+1) > maxDiffCells {
		for _, l := range ma {
			emit('-', l)
		}
		for _, l := range mb {
			emit('+', l)
		}
	} else {
		// lcs[i][j] is the LCS length of ma[i:] and mb[j:].
		w := len(mb) + 1
		lcs := make([]int32, (len(ma)+1)*w)
		for i := len(ma) - 1; i >= 0; i-- {
			for j := len(mb) - 1; j >= 0; j-- {
				if ma[i] == mb[j] {
					lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
				} else {
					lcs[i*w+j] = max(lcs[(i+1)*w+j], lcs[i*w+j+1])
				}
			}
		}
		i, j := 0, 0
		for i < len(ma) || j < len(mb) {
			switch {
			case i < len(ma) && j < len(mb) && ma[i] == mb[j]:
				emit(' ', ma[i])
				i++
				j++
			case i < len(ma) && (j == len(mb) || lcs[(i+1)*w+j] >= lcs[i*w+j+1]):
				emit('-', ma[i])
				i++
			default:
				emit('+', mb[j])
				j++
			}
		}
	}
	for k := len(a) - suf; k < len(a); k++ {
		emit(' ', a[k])
	}
	return ops
}
