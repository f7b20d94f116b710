package buildinfo

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
)

// Set with -ldflags -X at release time (see the package comment); never
// written by the program.
var (
	version  = ""
	revision = ""
)

// Where Info.Revision came from.
const (
	SourceLinker    = "ldflags"  // -X ...buildinfo.revision
	SourceVCS       = "vcs"      // the toolchain's -buildvcs stamping
	SourceCheckout  = "checkout" // read from the source checkout at run time (unstamped build)
	DevVersion      = "dev"
	shortRevisionLn = 12
)

// Info describes the running binary.
type Info struct {
	// Version is the release (v1.2.3), else the module version, else
	// "dev".
	Version string `json:"version"`
	// Revision is the full VCS commit, "" when unknown.
	Revision string `json:"revision,omitempty"`
	// RevisionSource says where Revision came from (Source* constants).
	RevisionSource string `json:"revision_source,omitempty"`
	// Modified is true when the build had uncommitted changes (VCS
	// stamping only).
	Modified  bool   `json:"modified,omitempty"`
	Time      string `json:"time,omitempty"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
	Module    string `json:"module,omitempty"`
}

// String is the one-line version: "v1.2.3 (abc123def456)", "dev
// (abc123def456, modified)", "dev".
func (i Info) String() string {
	var extra []string
	if i.Revision != "" {
		extra = append(extra, Short(i.Revision))
	}
	if i.Modified {
		extra = append(extra, "modified")
	}
	if len(extra) == 0 {
		return i.Version
	}
	return fmt.Sprintf("%s (%s)", i.Version, strings.Join(extra, ", "))
}

// Short abbreviates a revision to 12 characters.
func Short(rev string) string {
	if len(rev) > shortRevisionLn {
		return rev[:shortRevisionLn]
	}
	return rev
}

// Read returns the running binary's Info. It is computed once.
var Read = sync.OnceValue(read)

func read() Info {
	i := Info{Version: version, Revision: revision, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if i.Revision != "" {
		i.RevisionSource = SourceLinker
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		i.Module = bi.Main.Path
		if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
		if i.Revision == "" {
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					i.Revision, i.RevisionSource = s.Value, SourceVCS
				case "vcs.time":
					i.Time = s.Value
				case "vcs.modified":
					i.Modified = s.Value == "true"
				}
			}
		}
	}
	if i.Version == "" {
		i.Version = DevVersion
	}
	if i.Revision == "" {
		if rev, err := checkoutHead(sourceRoot()); err == nil {
			i.Revision, i.RevisionSource = rev, SourceCheckout
		}
	}
	return i
}

// sourceRoot is the module root this file was compiled from: an absolute
// path unless the build used -trimpath, in which case it is "" (a release
// build does not look at the disk).
func sourceRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return ""
	}
	return filepath.Dir(filepath.Dir(filepath.Dir(file))) // internal/buildinfo/buildinfo.go
}

// errNoCheckout: the source directory is not (or no longer) a git checkout.
var errNoCheckout = errors.New("not a git checkout")

// checkoutHead reads the commit HEAD names in the git checkout at root
// without running git: .git is a directory, or (a worktree) a file
// "gitdir: PATH"; HEAD is a commit or "ref: refs/heads/NAME", resolved in
// the loose refs, then packed-refs, of the git directory or of its common
// directory (worktrees share the main checkout's refs).
func checkoutHead(root string) (string, error) {
	if root == "" {
		return "", errNoCheckout
	}
	gitDir := filepath.Join(root, ".git")
	fi, err := os.Stat(gitDir)
	if err != nil {
		return "", errNoCheckout
	}
	if !fi.IsDir() {
		b, err := os.ReadFile(gitDir)
		if err != nil {
			return "", fmt.Errorf("read %s: %w", gitDir, err)
		}
		p, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
		if !ok {
			return "", errNoCheckout
		}
		gitDir = strings.TrimSpace(p)
		if !filepath.IsAbs(gitDir) {
			gitDir = filepath.Join(root, gitDir)
		}
	}
	common := gitDir
	if b, err := os.ReadFile(filepath.Join(gitDir, "commondir")); err == nil {
		common = strings.TrimSpace(string(b))
		if !filepath.IsAbs(common) {
			common = filepath.Join(gitDir, common)
		}
	}
	head, err := os.ReadFile(filepath.Join(gitDir, "HEAD"))
	if err != nil {
		return "", fmt.Errorf("read HEAD: %w", err)
	}
	ref, isRef := strings.CutPrefix(strings.TrimSpace(string(head)), "ref:")
	if !isRef {
		return validRevision(strings.TrimSpace(string(head)))
	}
	ref = strings.TrimSpace(ref)
	for _, dir := range []string{gitDir, common} {
		if b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(ref))); err == nil {
			return validRevision(strings.TrimSpace(string(b)))
		}
	}
	packed, err := os.ReadFile(filepath.Join(common, "packed-refs"))
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", ref, err)
	}
	for line := range bytes.Lines(packed) {
		if rev, name, ok := strings.Cut(strings.TrimSpace(string(line)), " "); ok && name == ref {
			return validRevision(rev)
		}
	}
	return "", fmt.Errorf("resolve %s: not in the loose or packed refs", ref)
}

func validRevision(s string) (string, error) {
	if len(s) != 40 && len(s) != 64 {
		return "", fmt.Errorf("%q is not a commit hash", s)
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", fmt.Errorf("%q is not a commit hash", s)
		}
	}
	return s, nil
}
