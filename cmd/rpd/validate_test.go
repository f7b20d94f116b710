package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// TestDiagnosticLayout pins the exact text of Terraform's diagnostic
// layout: plain without colour, framed by "╷ │ ╵" with colour.
func TestDiagnosticLayout(t *testing.T) {
	src := []byte("pool \"p\" {\n  slots = -1\n}\n")
	f, diags := hclsyntax.ParseConfig(src, "main.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	files := map[string]*hcl.File{"main.hcl": f}
	subj := hcl.Range{Filename: "main.hcl", Start: hcl.Pos{Line: 2, Column: 11, Byte: 21}, End: hcl.Pos{Line: 2, Column: 13, Byte: 23}}
	d := &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid value", Detail: "slots must be at least 1; got -1.", Subject: &subj}

	plain := formatDiagnostic(d, files, false, 0)
	want := "\nError: Invalid value\n\n" +
		"  on main.hcl line 2, in pool \"p\":\n" +
		"   2:   slots = -1\n\n" +
		"slots must be at least 1; got -1.\n"
	if plain != want {
		t.Errorf("plain:\n%q\nwant\n%q", plain, want)
	}

	red := func(s string) string { return "\x1b[31m" + s + "\x1b[0m" }
	col := formatDiagnostic(d, files, true, 0)
	want = red("╷") + "\n" +
		red("│") + " \x1b[1m\x1b[31mError: \x1b[0m\x1b[0m\x1b[1mInvalid value\x1b[0m\n" +
		red("│") + "\n" +
		red("│") + "   on main.hcl line 2, in pool \"p\":\n" +
		red("│") + "    2:   slots = \x1b[4m-1\x1b[0m\n" +
		red("│") + "\n" +
		red("│") + " slots must be at least 1; got -1.\n" +
		red("╵") + "\n"
	if col != want {
		t.Errorf("colour:\n%q\nwant\n%q", col, want)
	}

	// A context over several lines shows them all; the detail wraps at
	// the width.
	block := hcl.Range{Filename: "main.hcl", Start: hcl.Pos{Line: 1, Column: 1, Byte: 0}, End: hcl.Pos{Line: 3, Column: 2, Byte: 25}}
	w := &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Odd", Detail: "one two three four five six", Subject: &subj, Context: &block}
	got := formatDiagnostic(w, files, false, 15)
	want = "\nWarning: Odd\n\n" +
		"  on main.hcl line 2, in pool \"p\":\n" +
		"   1: pool \"p\" {\n   2:   slots = -1\n   3: }\n\n" +
		"one two three\nfour five six\n"
	if got != want {
		t.Errorf("context and wrap:\n%q\nwant\n%q", got, want)
	}

	// No source at hand, no subject at all, a subject past the end: no panic, still readable.
	lost := hcl.Range{Filename: "gone.hcl", Start: hcl.Pos{Line: 4, Column: 1}}
	if got := formatDiagnostic(&hcl.Diagnostic{Summary: "S", Subject: &lost}, files, false, 0); !strings.Contains(got, "  on gone.hcl line 4:\n  (source code not available)\n") {
		t.Errorf("missing source: %q", got)
	}
	if got := formatDiagnostic(&hcl.Diagnostic{Summary: "S", Detail: "D"}, files, false, 0); got != "\nError: S\n\nD\n" {
		t.Errorf("no subject: %q", got)
	}
	past := hcl.Range{Filename: "main.hcl", Start: hcl.Pos{Line: 9, Column: 1, Byte: 900}, End: hcl.Pos{Line: 9, Column: 2, Byte: 901}}
	if got := formatDiagnostic(&hcl.Diagnostic{Summary: "S", Subject: &past}, files, true, 0); !strings.Contains(got, "on main.hcl line 9") {
		t.Errorf("subject past the end: %q", got)
	}
}

// TestValidateWarnings: as Terraform, warnings go to stdout before the
// success line, which says there were some.
func TestValidateWarnings(t *testing.T) {
	dir := t.TempDir()
	cfg := write(t, filepath.Join(dir, "cfg", "main.hcl"), "pool \"p\" {\n  slots = 2\n}\n")
	vars := write(t, filepath.Join(dir, "extra.vars"), "zz = 1\n")
	code, out, errs := runT(t, "validate", "-var-file", vars, cfg)
	want := "\nWarning: Value for undeclared variable\n\n" +
		"  on " + vars + " line 1:\n   1: zz = 1\n\n" +
		"The variable file sets \"zz\", but the configuration declares no variable of that name; the value is ignored.\n" +
		"\nSuccess! The configuration is valid, but there were some validation warnings as shown above.\n"
	if code != 0 || errs != "" || out != want {
		t.Fatalf("exit %d stderr %q stdout\n%q\nwant\n%q", code, errs, out, want)
	}
}

// TestValidateJSONRanges runs rpd validate -json on every single-file
// invalid fixture of spec/testdata: each "# ERROR: summary" comment has a
// diagnostic starting on its line, and every range is consistent with the
// file: start before end, and each byte offset at its line and column.
func TestValidateJSONRanges(t *testing.T) {
	fixtures, err := filepath.Glob("../../spec/testdata/invalid/*.hcl")
	if err != nil || len(fixtures) < 25 {
		t.Fatalf("fixtures: %d %v", len(fixtures), err)
	}
	marker := regexp.MustCompile(`#\s*ERROR:\s*(.+?)\s*$`)
	for _, f := range fixtures {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			code, out, _ := runT(t, "validate", "-json", f)
			var res jsonResult
			if err := json.Unmarshal([]byte(out), &res); err != nil || code != 1 || res.Valid {
				t.Fatalf("exit %d, %v: %s", code, err, out)
			}
			lineStart := []int{0, 0} // byte offset of each line, from line 1
			for i, b := range src {
				if b == '\n' {
					lineStart = append(lineStart, i+1)
				}
			}
			for _, d := range res.Diagnostics {
				r := d.Range
				if r == nil {
					continue
				}
				if r.Filename != f {
					t.Errorf("%q: filename %q", d.Summary, r.Filename)
				}
				for _, p := range []jsonPos{r.Start, r.End} {
					if p.Line < 1 || p.Line >= len(lineStart) || p.Byte > len(src) || lineStart[p.Line]+p.Column-1 != p.Byte {
						// Columns count characters; every fixture line with a
						// diagnostic is ASCII, so they are bytes too.
						t.Errorf("%q: position %+v does not match the file", d.Summary, p)
					}
				}
				if r.End.Byte < r.Start.Byte {
					t.Errorf("%q: range ends before it starts: %+v", d.Summary, r)
				}
			}
			for i, line := range strings.Split(string(src), "\n") {
				m := marker.FindStringSubmatch(line)
				if m == nil {
					continue
				}
				found := false
				for _, d := range res.Diagnostics {
					if d.Range != nil && d.Range.Start.Line == i+1 && strings.Contains(d.Summary, m[1]) {
						found = true
					}
				}
				if !found {
					t.Errorf("line %d: no diagnostic %q starting there in %s", i+1, m[1], out)
				}
			}
		})
	}
}
