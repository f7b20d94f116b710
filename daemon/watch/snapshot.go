package watch

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Snapshot is the content of a configuration at one instant.
type Snapshot struct {
	// Files maps each *.hcl file's path (the directory joined with its
	// name, as diagnostics will show it) to its content.
	Files map[string][]byte
	// Hash is the hex SHA-256 of the sorted file names and contents; two
	// snapshots with equal hashes hold the same configuration.
	Hash string
}

// Take reads the configuration at path: every *.hcl file directly in it
// when it is a directory (dotfiles excluded, symlinks followed), else the
// single file. A file that disappears while it is read makes Take fail; the
// caller retries on the next trigger.
func Take(path string) (Snapshot, error) {
	info, err := os.Stat(path)
	if err != nil {
		return Snapshot{}, fmt.Errorf("read configuration %s: %w", path, err)
	}
	var names []string
	if info.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return Snapshot{}, fmt.Errorf("read configuration directory %s: %w", path, err)
		}
		for _, e := range entries {
			if IsConfigName(e.Name()) && !e.IsDir() {
				names = append(names, filepath.Join(path, e.Name()))
			}
		}
	} else {
		names = []string{path}
	}
	sort.Strings(names)
	files := make(map[string][]byte, len(names))
	h := sha256.New()
	var n [8]byte
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			return Snapshot{}, fmt.Errorf("read configuration file %s: %w", name, err)
		}
		files[name] = b
		base := filepath.Base(name)
		binary.BigEndian.PutUint64(n[:], uint64(len(base)))
		h.Write(n[:])
		h.Write([]byte(base))
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	return Snapshot{Files: files, Hash: hex.EncodeToString(h.Sum(nil))}, nil
}

// IsConfigName reports whether a directory entry named name is part of a
// configuration: a *.hcl file that is not a dotfile.
func IsConfigName(name string) bool {
	return strings.HasSuffix(name, ".hcl") && !strings.HasPrefix(name, ".") && !IsTempName(name)
}

// IsTempName reports whether name looks like an editor's or a tool's
// temporary file: dotfiles (".foo.hcl.swp", ".#foo.hcl"), vim's swap files
// and write test ("4913"), backups ("foo.hcl~"), Emacs autosaves
// ("#foo.hcl#") and "*.tmp".
func IsTempName(name string) bool {
	switch {
	case strings.HasPrefix(name, "."),
		strings.HasSuffix(name, "~"),
		strings.HasSuffix(name, ".swp"), strings.HasSuffix(name, ".swx"), strings.HasSuffix(name, ".swo"),
		strings.HasSuffix(name, ".tmp"),
		strings.HasPrefix(name, "#") && strings.HasSuffix(name, "#"),
		name == "4913":
		return true
	}
	return false
}
