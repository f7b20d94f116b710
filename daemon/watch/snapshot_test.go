package watch

import (
	"os"
	"path/filepath"
	"testing"
)

func TestTakeHashesNamesAndContents(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.hcl"), "ab")
	write(t, filepath.Join(dir, "b.hcl"), "c")
	write(t, filepath.Join(dir, "notes.md"), "ignored")
	write(t, filepath.Join(dir, ".x.hcl"), "ignored")
	if err := os.Mkdir(filepath.Join(dir, "sub.hcl"), 0o755); err != nil {
		t.Fatal(err)
	}
	s1, err := Take(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(s1.Files), 2; got != want {
		t.Fatalf("files = %v, want 2 (a.hcl, b.hcl)", s1.Files)
	}
	same, _ := Take(dir)
	if same.Hash != s1.Hash {
		t.Fatal("two snapshots of an unchanged directory differ")
	}
	write(t, filepath.Join(dir, "notes.md"), "changed")
	if s, _ := Take(dir); s.Hash != s1.Hash {
		t.Fatal("a non-configuration file changed the hash")
	}
	// Moving bytes between files must change the hash: "ab"+"c" vs "a"+"bc".
	write(t, filepath.Join(dir, "a.hcl"), "a")
	write(t, filepath.Join(dir, "b.hcl"), "bc")
	if s, _ := Take(dir); s.Hash == s1.Hash {
		t.Fatal("moving content between files kept the hash")
	}
	// Renaming a file changes the hash.
	write(t, filepath.Join(dir, "a.hcl"), "ab")
	write(t, filepath.Join(dir, "b.hcl"), "c")
	if err := os.Rename(filepath.Join(dir, "b.hcl"), filepath.Join(dir, "c.hcl")); err != nil {
		t.Fatal(err)
	}
	if s, _ := Take(dir); s.Hash == s1.Hash {
		t.Fatal("renaming a file kept the hash")
	}
}

func TestTakeErrors(t *testing.T) {
	if _, err := Take(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("Take of a missing path succeeded")
	}
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, "dangling.hcl")); err != nil {
		t.Fatal(err)
	}
	if _, err := Take(dir); err == nil {
		t.Fatal("Take with a dangling *.hcl symlink succeeded")
	}
}

func TestIsTempName(t *testing.T) {
	for _, tc := range []struct {
		name       string
		temp, conf bool
	}{
		{"a.hcl", false, true},
		{".a.hcl.swp", true, false},
		{"a.hcl.swp", true, false},
		{"a.hcl~", true, false},
		{"#a.hcl#", true, false},
		{"a.hcl.tmp", true, false},
		{".hidden.hcl", true, false},
		{"4913", true, false},
		{"a.tf", false, false},
	} {
		if got := IsTempName(tc.name); got != tc.temp {
			t.Errorf("IsTempName(%q) = %v, want %v", tc.name, got, tc.temp)
		}
		if got := IsConfigName(tc.name); got != tc.conf {
			t.Errorf("IsConfigName(%q) = %v, want %v", tc.name, got, tc.conf)
		}
	}
}
