package buildinfo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCheckoutHead(t *testing.T) {
	const (
		a = "0123456789abcdef0123456789abcdef01234567"
		b = "89abcdef0123456789abcdef0123456789abcdef"
	)
	tests := []struct {
		name  string
		setup func(root string) string // returns the checkout to read
		want  string
	}{
		{"loose ref", func(root string) string {
			write(t, filepath.Join(root, "co/.git/HEAD"), "ref: refs/heads/main\n")
			write(t, filepath.Join(root, "co/.git/refs/heads/main"), a+"\n")
			return filepath.Join(root, "co")
		}, a},
		{"packed ref", func(root string) string {
			write(t, filepath.Join(root, "co/.git/HEAD"), "ref: refs/heads/main\n")
			write(t, filepath.Join(root, "co/.git/packed-refs"), "# pack-refs with: peeled\n"+b+" refs/heads/other\n"+a+" refs/heads/main\n")
			return filepath.Join(root, "co")
		}, a},
		{"detached", func(root string) string {
			write(t, filepath.Join(root, "co/.git/HEAD"), b+"\n")
			return filepath.Join(root, "co")
		}, b},
		{"worktree", func(root string) string {
			write(t, filepath.Join(root, "main/.git/worktrees/wt/HEAD"), "ref: refs/heads/day2\n")
			write(t, filepath.Join(root, "main/.git/worktrees/wt/commondir"), "../..\n")
			write(t, filepath.Join(root, "main/.git/refs/heads/day2"), b+"\n")
			write(t, filepath.Join(root, "wt/.git"), "gitdir: "+filepath.Join(root, "main/.git/worktrees/wt")+"\n")
			return filepath.Join(root, "wt")
		}, b},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := checkoutHead(tt.setup(t.TempDir()))
			if err != nil || got != tt.want {
				t.Errorf("checkoutHead = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	if _, err := checkoutHead(t.TempDir()); err == nil {
		t.Error("checkoutHead of a directory without .git succeeded")
	}
	if _, err := checkoutHead(""); err == nil {
		t.Error("checkoutHead of a -trimpath build succeeded")
	}
}

func TestInfoString(t *testing.T) {
	tests := []struct {
		in   Info
		want string
	}{
		{Info{Version: "dev"}, "dev"},
		{Info{Version: "v1.2.3", Revision: strings.Repeat("a", 40)}, "v1.2.3 (aaaaaaaaaaaa)"},
		{Info{Version: "dev", Revision: strings.Repeat("b", 40), Modified: true}, "dev (bbbbbbbbbbbb, modified)"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("%+v.String() = %q; want %q", tt.in, got, tt.want)
		}
	}
}
