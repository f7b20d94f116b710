package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestJSONErrorsAreJSON: every -json command prints only one JSON document
// on stdout when it fails, and nothing on stderr; configuration errors
// carry validate -json's diagnostics with their ranges.
func TestJSONErrorsAreJSON(t *testing.T) {
	dir := t.TempDir()
	bad := write(t, filepath.Join(dir, "bad", "main.hcl"), "pool \"p\" {\n  slots = 2\n}\npool \"q\" {\n  slots = \n")
	_, good := inProcessConfig(t)
	for _, tc := range []struct {
		args []string
		want string // in error.message
	}{
		{[]string{"plan", "-json", filepath.Dir(bad)}, "the configuration is not valid: 1 error"},
		{[]string{"plan", "-json", "-target", "nope", good}, "-target"},
		{[]string{"plan", "-json", "-targte", "pool.p", good}, "Did you mean -target?"},
		{[]string{"plan", "-json", good, "extra"}, "expected one configuration directory or file"},
		{[]string{"show", "-json", filepath.Join(dir, "missing.plan")}, "missing.plan"},
		{[]string{"validate", "-json", good, "extra"}, "expected one configuration directory or file"},
		{[]string{"status", "-json", "-addr", "127.0.0.1:1"}, "rpd status:"},
		{[]string{"version", "-json", "extra"}, `unexpected argument "extra"`},
		{[]string{"destroy", "-json", "-auto-approve", filepath.Dir(bad)}, ""},
		{[]string{"apply", "-json", "-nope", good}, "flag provided but not defined: -nope"},
		{[]string{"state", "show", "-json", "-config", good, "nope"}, "rpd state show:"},
		{[]string{"state", "list", "-json", "-config", filepath.Dir(bad)}, "the configuration is not valid"},
	} {
		code, out, errs := runT(t, tc.args...)
		if code != 1 || errs != "" {
			t.Errorf("%v: exit %d, stderr %q; want 1 and nothing on stderr", tc.args, code, errs)
			continue
		}
		if tc.args[0] == "destroy" { // a stream: one JSON object per line
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if !json.Valid([]byte(line)) {
					t.Errorf("%v: not a JSON line: %q", tc.args, line)
				}
			}
			if !strings.Contains(out, `"range"`) {
				t.Errorf("%v: the diagnostic lacks its range: %s", tc.args, out)
			}
			continue
		}
		var doc jsonError
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Errorf("%v: stdout is not one JSON document (%v): %q", tc.args, err, out)
			continue
		}
		if !strings.Contains(doc.Error.Message, tc.want) || len(doc.Diagnostics) == 0 || doc.Diagnostics[0].Severity != "error" {
			t.Errorf("%v: error document %+v, want a message with %q and an error diagnostic", tc.args, doc, tc.want)
		}
	}

	// The configuration's diagnostic has validate -json's shape and range.
	_, out, _ := runT(t, "plan", "-json", filepath.Dir(bad))
	var doc jsonError
	_ = json.Unmarshal([]byte(out), &doc)
	d := doc.Diagnostics[0]
	if d.Range == nil || d.Range.Filename != bad || d.Range.Start.Line != 5 {
		t.Errorf("diagnostic = %+v, want a range in %s line 5", d, bad)
	}
}

func TestFlagSuggestion(t *testing.T) {
	_, file := inProcessConfig(t)
	for flag, want := range map[string]string{"-targte": "Did you mean -target?", "-auto-aprove": "Did you mean -auto-approve?", "-lock-timout=1s": "Did you mean -lock-timeout?"} {
		code, _, errs := runT(t, "apply", flag, file)
		if code != 1 || !strings.Contains(errs, "flag provided but not defined") || !strings.Contains(errs, want) {
			t.Errorf("apply %s: exit %d\n%s", flag, code, errs)
		}
	}
	if _, _, errs := runT(t, "apply", "-zzzzzzzz", file); strings.Contains(errs, "Did you mean") {
		t.Errorf("a flag like no other got a suggestion:\n%s", errs)
	}
}

func TestChdir(t *testing.T) {
	orig, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(orig) // restores the working directory when the test ends
	dir := t.TempDir()
	write(t, filepath.Join(dir, "conf", "main.hcl"), "pool \"p\" {\n  slots = 2\n}\n")
	for _, args := range [][]string{{"-chdir=" + filepath.Join(dir, "conf"), "validate"}, {"-chdir", filepath.Join(dir, "conf"), "validate"}} {
		if err := os.Chdir(orig); err != nil {
			t.Fatal(err)
		}
		if code, out, errs := runT(t, args...); code != 0 || !strings.Contains(out, "Success!") {
			t.Errorf("%v: exit %d\n%s\n%s", args, code, out, errs)
		}
	}
	// The local backend's file is created under DIR.
	if err := os.Chdir(orig); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runT(t, "-chdir="+filepath.Join(dir, "conf"), "apply", "-auto-approve"); code != 0 {
		t.Fatalf("apply under -chdir: %s", errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "conf", ".rpd", "state.db")); err != nil {
		t.Errorf("state database not under the -chdir directory: %v", err)
	}
	for _, args := range [][]string{{"-chdir=" + filepath.Join(dir, "nope"), "validate"}, {"-chdir"}} {
		if code, _, errs := runT(t, args...); code != 1 || !strings.Contains(errs, "-chdir") {
			t.Errorf("%v: exit %d %q", args, code, errs)
		}
	}
}

// TestDocsListEveryFlag parses every command's -h and fails when one of
// its flags is documented neither in the README's command table (the row
// of that command) nor in docs/cli.md (the section of that command).
func TestDocsListEveryFlag(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cli, err := os.ReadFile(filepath.Join("..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	optionLine := regexp.MustCompile(`^  -([a-z][a-z0-9-]*)`)
	for _, c := range commands {
		_, help, _ := runT(t, c.name, "-h")
		_, opts, found := strings.Cut(help, "\nOptions:\n")
		if !found {
			continue // a command without flags
		}
		var docs strings.Builder
		for _, row := range strings.Split(string(readme), "\n") {
			if strings.HasPrefix(row, "| `rpd "+c.name+" ") || strings.HasPrefix(row, "| `rpd "+c.name+"`") {
				docs.WriteString(row + "\n")
			}
		}
		for _, section := range strings.Split(string(cli), "\n### ")[1:] {
			header, _, _ := strings.Cut(section, "\n")
			if strings.Contains(header, "`rpd "+c.name+" ") || strings.Contains(header, "`rpd "+c.name+"`") {
				docs.WriteString(section)
			}
		}
		if docs.Len() == 0 {
			t.Errorf("rpd %s is documented neither in the README's command table nor in docs/cli.md", c.name)
			continue
		}
		n := 0
		for _, line := range strings.Split(opts, "\n") {
			m := optionLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			n++
			documented := regexp.MustCompile(`(^|[^\w-])-` + regexp.QuoteMeta(m[1]) + `([^\w-]|$)`)
			if !documented.MatchString(docs.String()) {
				t.Errorf("rpd %s -%s is in the binary's help but not in README.md's row or docs/cli.md's section of rpd %s", c.name, m[1], c.name)
			}
		}
		if n == 0 {
			t.Errorf("rpd %s -h: no flag parsed from its Options:\n%s", c.name, opts)
		}
	}
}
