package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	ugly   = "pool \"q\" {\nslots=3\n  description   =  \"x\"\n}\n"
	pretty = "pool \"q\" {\n  slots       = 3\n  description = \"x\"\n}\n"
)

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFmtCheck(t *testing.T) {
	dir := t.TempDir()
	u := write(t, filepath.Join(dir, "ugly.hcl"), ugly)
	p := write(t, filepath.Join(dir, "pretty.hcl"), pretty)
	code, out, errs := runT(t, "fmt", "-check", dir)
	if code != 3 || out != u+"\n" || errs != "" {
		t.Errorf("fmt -check: code %d stdout %q stderr %q", code, out, errs)
	}
	if read(t, u) != ugly {
		t.Error("-check rewrote the file")
	}
	if code, out, _ := runT(t, "fmt", "-check", p); code != 0 || out != "" {
		t.Errorf("formatted file: %d %q", code, out)
	}
}

func TestFmtWrite(t *testing.T) {
	dir := t.TempDir()
	u := write(t, filepath.Join(dir, "ugly.hcl"), ugly)
	sub := write(t, filepath.Join(dir, "sub", "also.hcl"), ugly)
	hidden := write(t, filepath.Join(dir, ".git", "x.hcl"), ugly)
	other := write(t, filepath.Join(dir, "notes.txt"), ugly)
	code, out, _ := runT(t, "fmt", dir)
	if code != 0 || out != u+"\n" || read(t, u) != pretty || read(t, sub) != ugly {
		t.Errorf("fmt DIR: %d %q, sub rewritten=%v", code, out, read(t, sub) != ugly)
	}
	code, out, _ = runT(t, "fmt", "-recursive", dir)
	if code != 0 || out != sub+"\n" || read(t, sub) != pretty || read(t, hidden) != ugly || read(t, other) != ugly {
		t.Errorf("fmt -recursive: %d %q", code, out)
	}
	code, out, _ = runT(t, "fmt", dir)
	if code != 0 || out != "" {
		t.Errorf("second fmt changed something: %d %q", code, out)
	}
	// An explicitly named file is formatted whatever its extension.
	if code, _, _ := runT(t, "fmt", "-list=false", other); code != 0 || read(t, other) != pretty {
		t.Errorf("fmt FILE: %d", code)
	}
}

func TestFmtDiff(t *testing.T) {
	u := write(t, filepath.Join(t.TempDir(), "ugly.hcl"), "# keep\n"+ugly)
	code, out, _ := runT(t, "fmt", "-check", "-diff", "-list=false", u)
	name := strings.TrimPrefix(filepath.ToSlash(u), "/")
	want := "--- old/" + name + "\n+++ new/" + name + "\n" +
		"@@ -1,5 +1,5 @@\n # keep\n pool \"q\" {\n-slots=3\n-  description   =  \"x\"\n+  slots       = 3\n+  description = \"x\"\n }\n"
	if code != 3 || out != want {
		t.Errorf("diff: code %d\n got %q\nwant %q", code, out, want)
	}
}

func TestFmtStdin(t *testing.T) {
	code, out, _ := runEnvT(t, &env{stdin: strings.NewReader(ugly)}, "fmt", "-")
	if code != 0 || out != pretty {
		t.Errorf("fmt -: %d %q", code, out)
	}
	code, out, _ = runEnvT(t, &env{stdin: strings.NewReader(ugly)}, "fmt", "-check", "-")
	if code != 3 || out != "" {
		t.Errorf("fmt -check -: %d %q", code, out)
	}
}

func TestFmtErrors(t *testing.T) {
	dir := t.TempDir()
	broken := write(t, filepath.Join(dir, "broken.hcl"), "pool \"p\" {\n  slots = = 1\n}\n")
	code, out, errs := runT(t, "fmt", dir)
	if code != 1 || out != "" || !strings.Contains(errs, broken+" line 2") || read(t, broken) != "pool \"p\" {\n  slots = = 1\n}\n" {
		t.Errorf("syntax error: %d %q %q", code, out, errs)
	}
	deep := write(t, filepath.Join(t.TempDir(), "deep.hcl"), "x = "+strings.Repeat("[", 100000)+"\n")
	if code, _, errs := runT(t, "fmt", deep); code != 1 || !strings.Contains(errs, "Nesting too deep") {
		t.Errorf("deep nesting: %d %q", code, errs)
	}
	if code, _, errs := runT(t, "fmt", filepath.Join(dir, "missing.hcl")); code != 1 || !strings.Contains(errs, "no such file") {
		t.Errorf("missing: %d %q", code, errs)
	}
	ro := write(t, filepath.Join(t.TempDir(), "ro.hcl"), ugly)
	if err := os.Chmod(filepath.Dir(ro), 0o555); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ro, 0o444); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Dir(ro), 0o755) })
	if os.Geteuid() != 0 { // root writes read-only files anyway
		if code, _, errs := runT(t, "fmt", ro); code != 1 || !strings.Contains(errs, "writing") {
			t.Errorf("read-only: %d %q", code, errs)
		}
	}
}
