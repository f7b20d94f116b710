package spec

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// expectation is one "# ERROR: <summary substring>" (or "# WARNING: ...")
// comment of a fixture: a diagnostic of that severity whose summary contains
// the text must start on that line of that file.
type expectation struct {
	file    string
	line    int
	sev     hcl.DiagnosticSeverity
	summary string
}

func (e expectation) String() string {
	sev := "ERROR"
	if e.sev == hcl.DiagWarning {
		sev = "WARNING"
	}
	return fmt.Sprintf("%s:%d: %s %q", e.file, e.line, sev, e.summary)
}

var expectRE = regexp.MustCompile(`#\s*(ERROR|WARNING):\s*(.+?)\s*$`)

func readExpectations(t *testing.T, srcs map[string][]byte) []expectation {
	t.Helper()
	var out []expectation
	for name, src := range srcs {
		sc := bufio.NewScanner(bytes.NewReader(src))
		for line := 1; sc.Scan(); line++ {
			m := expectRE.FindStringSubmatch(sc.Text())
			if m == nil {
				continue
			}
			sev := hcl.DiagError
			if m[1] == "WARNING" {
				sev = hcl.DiagWarning
			}
			out = append(out, expectation{file: name, line: line, sev: sev, summary: m[2]})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

func (e expectation) matches(d *hcl.Diagnostic) bool {
	return d.Severity == e.sev && d.Subject != nil && d.Subject.Filename == e.file &&
		d.Subject.Start.Line == e.line && strings.Contains(d.Summary, e.summary)
}

// TestInvalidFixtures loads every configuration under testdata/invalid (a
// file, or a directory of files loaded together) and checks that it
// produces exactly the diagnostics its comments announce, on their lines.
func TestInvalidFixtures(t *testing.T) {
	entries, err := os.ReadDir("testdata/invalid")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < 30 {
		t.Errorf("only %d invalid fixtures; want at least 30", len(entries))
	}
	for _, e := range entries {
		t.Run(e.Name(), func(t *testing.T) {
			srcs := map[string][]byte{}
			p := filepath.Join("testdata/invalid", e.Name())
			if e.IsDir() {
				files, _ := filepath.Glob(filepath.Join(p, "*.hcl"))
				for _, f := range files {
					srcs[f] = mustRead(t, f)
				}
			} else {
				srcs[p] = mustRead(t, p)
			}
			want := readExpectations(t, srcs)
			if len(want) == 0 {
				t.Fatal("fixture announces no # ERROR: comment")
			}
			cfg, diags := NewLoader().LoadSources(srcs, Vars{})
			if cfg != nil {
				t.Errorf("LoadSources returned a Config despite errors")
			}
			for _, w := range want {
				found := false
				for _, d := range diags {
					found = found || w.matches(d)
				}
				if !found {
					t.Errorf("missing diagnostic %s", w)
				}
			}
			for _, d := range diags {
				ok := false
				for _, w := range want {
					ok = ok || w.matches(d)
				}
				if !ok {
					t.Errorf("unexpected diagnostic: %s", describe(d))
				}
			}
		})
	}
}

func describe(d *hcl.Diagnostic) string {
	where := "(no location)"
	if d.Subject != nil {
		where = fmt.Sprintf("%s:%d", d.Subject.Filename, d.Subject.Start.Line)
	}
	return fmt.Sprintf("%s %q: %s", where, d.Summary, d.Detail)
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
