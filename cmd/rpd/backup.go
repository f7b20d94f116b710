package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/rpdhq/rpd/backend/snapshot"
	"github.com/rpdhq/rpd/internal/buildinfo"
	"github.com/rpdhq/rpd/internal/open"
	"github.com/rpdhq/rpd/reconcile"
	"github.com/rpdhq/rpd/spec"
)

const backupHelp = `
Writes a backup of the stack's backend to FILE: the state document (what
was applied, and the runtime document the daemons follow), every pool
lease, budget permit and VM-ceiling claim under its ID with its holder,
and the runner inventory (the instance records of the configured runner
classes). The configuration in DIR or FILE (default: the current
directory) says which backend and stack.

It runs while daemons serve the stack: it takes no lock, writes nothing to
the backend, and retries until no apply or failover happened during the
read. Queues and their messages, the leader lease and the state lock are
not in a backup: rpd apply (or rpd watch) recreates the queues, and a
daemon publishes a message for every idle instance that has none.

Restore it with rpd restore, into the same kind of backend or the other
(docs/operations.md: moving a stack from the local backend to aws).
`

const restoreHelp = `
Restores a backup written by rpd backup into the backend of the
configuration in DIR or FILE (default: the current directory): the state
document, every grant under its ID, and the instance records. Then start
the daemons (rpd watch or rpd serve): the leader counts the restored
grants, whose holders keep heartbeating them under the same IDs, and rpd
apply (watch applies at start) creates the queues of a new backend.

The backend must be empty: rpd restore refuses one that holds a state
document or grants, whose stack a daemon leads, or a backup of another
stack name, unless -force (records of the same ID are then replaced, others
kept). On the aws backend it creates the tables first.
`

// loadForFile parses the flags of rpd backup or restore (cmd), requires
// the file flag, and loads the configuration; a nil config means the
// command ends with code.
func loadForFile(e *env, fs *flag.FlagSet, cf *configFlags, args []string, cmd, fileFlag string, file *string) (*spec.Config, int) {
	if code, ok := parseFlags(e, fs, args); !ok {
		return nil, code
	}
	if *file == "" {
		fmt.Fprintf(e.stderr, "rpd %s: %s FILE is required\n", cmd, fileFlag)
		return nil, 1
	}
	path, code, ok := configPath(e, fs)
	if !ok {
		return nil, code
	}
	return cf.load(e, path)
}

func runBackup(ctx context.Context, e *env, args []string) int {
	var cf configFlags
	fs := newFlagSet("backup", "-out FILE [options] [DIR|FILE]", backupHelp)
	cf.register(fs)
	out := fs.String("out", "", "the backup file to write (required; replaced atomically)")
	cfg, code := loadForFile(e, fs, &cf, args, "backup", "-out", out)
	if cfg == nil {
		return code
	}
	b, err := open.Open(ctx, cfg.Stack, reconcile.BackendConfigOf(cfg.Backend), open.Options{ReadOnly: true})
	if err != nil {
		fmt.Fprintf(e.stderr, "rpd backup: open the %s backend: %v\n", cfg.Backend.Type, err)
		return 1
	}
	defer b.Close()
	if !b.Exists || b.Leader == nil {
		fmt.Fprintf(e.stderr, "rpd backup: %s: nothing to back up (run rpd apply or rpd watch first)\n", b.Where)
		return 1
	}
	classes, err := classNames(ctx, cfg, b)
	if err != nil {
		fmt.Fprintf(e.stderr, "rpd backup: %s: %v\n", b.Where, err)
		return 1
	}
	snap, err := snapshot.Take(ctx, stores(b), cfg.Stack, classes)
	if err != nil {
		fmt.Fprintf(e.stderr, "rpd backup: %s: %v\n", b.Where, err)
		return 1
	}
	snap.From, snap.RPDVersion = b.Where, buildinfo.Read().String()
	if err := writeFileAtomic(*out, func(f *os.File) error { return snapshot.Write(f, snap) }); err != nil {
		fmt.Fprintf(e.stderr, "rpd backup: %v\n", err)
		return 1
	}
	fmt.Fprintf(e.stdout, "Backed up stack %q from %s to %s: state version %d, %d pool lease(s), %d permit(s) and claim(s), %d instance(s).\n",
		cfg.Stack, b.Where, *out, snap.StateVersion, len(snap.PoolLeases), len(snap.Grants), len(snap.Instances))
	return 0
}

func runRestore(ctx context.Context, e *env, args []string) int {
	var cf configFlags
	fs := newFlagSet("restore", "-in FILE [options] [DIR|FILE]", restoreHelp)
	cf.register(fs)
	in := fs.String("in", "", "the backup file to restore (required)")
	force := fs.Bool("force", false, "restore into a backend in use, or of another stack name (replaces records of the same ID)")
	cfg, code := loadForFile(e, fs, &cf, args, "restore", "-in", in)
	if cfg == nil {
		return code
	}
	f, err := os.Open(*in)
	if err != nil {
		fmt.Fprintf(e.stderr, "rpd restore: %v\n", err)
		return 1
	}
	snap, err := snapshot.Read(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(e.stderr, "rpd restore: %s: %v\n", *in, err)
		return 1
	}
	b, err := open.Open(ctx, cfg.Stack, reconcile.BackendConfigOf(cfg.Backend), open.Options{})
	if err != nil {
		fmt.Fprintf(e.stderr, "rpd restore: open the %s backend: %v\n", cfg.Backend.Type, err)
		return 1
	}
	defer b.Close()
	if b.Tables != nil {
		if err := b.Tables.EnsureTables(ctx); err != nil {
			fmt.Fprintf(e.stderr, "rpd restore: create the tables of %s: %v\n", b.Where, err)
			return 1
		}
	}
	if err := snapshot.Restore(ctx, stores(b), cfg.Stack, snap, snapshot.RestoreOptions{Force: *force}); err != nil {
		var ne *snapshot.NotEmptyError
		if errors.As(err, &ne) {
			fmt.Fprintf(e.stderr, "rpd restore: %s: %v (-force)\n", b.Where, err)
		} else {
			fmt.Fprintf(e.stderr, "rpd restore: %s: %v\n", b.Where, err)
		}
		return 1
	}
	fmt.Fprintf(e.stdout, "Restored stack %q (backup of %s taken %s) into %s: state version %d, %d pool lease(s), %d permit(s) and claim(s), %d instance(s).\nStart the daemons now: holders must heartbeat their leases before they expire.\n",
		snap.Stack, snap.From, snap.Taken.Format("2006-01-02T15:04:05Z"), b.Where, snap.StateVersion, len(snap.PoolLeases), len(snap.Grants), len(snap.Instances))
	return 0
}

// stores are the backend's stores a snapshot reads and writes.
func stores(b *open.Backend) snapshot.Stores {
	return snapshot.Stores{State: b.State, Leader: b.Leader, Pools: b.Pools, Grants: b.Grants, Instances: b.Instances}
}

// classNames are the runner classes whose instances a backup holds: those
// of the configuration and those of the applied state (a serve
// deployment's configuration may only name the backend).
func classNames(ctx context.Context, cfg *spec.Config, b *open.Backend) ([]string, error) {
	names := map[string]bool{}
	for _, rc := range cfg.RunnerClasses {
		names[rc.Name] = true
	}
	doc, _, err := reconcile.ReadApplied(ctx, b.State, cfg.Stack)
	if err != nil {
		return nil, fmt.Errorf("read the applied runner classes: %w", err)
	}
	for name := range doc.RunnerClasses {
		names[name] = true
	}
	return slices.Sorted(maps.Keys(names)), nil
}

// writeFileAtomic writes path through a temporary file in its directory,
// synced and renamed over it, readable by its owner only: a crash never
// leaves half a backup under the name.
func writeFileAtomic(path string, write func(*os.File) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	defer os.Remove(f.Name())
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
