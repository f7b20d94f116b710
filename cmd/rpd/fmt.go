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

	"github.com/aymanbagabas/go-udiff"
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
	name = strings.TrimPrefix(filepath.ToSlash(name), "/")
	_, _ = io.WriteString(w, udiff.Unified("old/"+name, "new/"+name, string(a), string(b)))
}
