package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Orphaned segment files. A segment's file can outlive any use of it in
// two ways: the applier prepared a spare for its writer (journalwriter.go,
// prepareSpare) and the process stopped before the writer took it, so no
// row of journals names it; or a crash came between the transaction that
// marked a segment folded and the removal of its file. Each is up to one
// segment's preallocation (8 to 64 MiB) per crash, so removeOrphans looks for
// them: at open and then every orphanCheck, on the applier goroutine.
//
// A file with no row is removed only when its epoch is below the stack's
// leader epoch: a writer of that epoch is fenced and can never insert the
// row (a segment's row is inserted in a transaction that finds its epoch
// current), while the current leader's spare is kept. A file whose row is
// folded is wholly in the tables. A file another writer holds (its lock) is
// left alone until a later look.

// removeOrphans removes the orphaned segment files of the stack and
// returns how many it removed.
func (b *Backend) removeOrphans(ctx context.Context) (int, error) {
	dir := journalDir(b.path)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("list the grant journal %s: %w", dir, err)
	}
	// The stack's files are named prefix+"<epoch>.<seq>".
	prefix := strings.TrimSuffix(filepath.Base(segmentName(b.path, b.stack, 0, 0)), "0.0")
	type key = segKey
	var files []key
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(name, prefix) {
			continue
		}
		es, ss, ok := strings.Cut(name[len(prefix):], ".")
		epoch, err1 := strconv.ParseInt(es, 10, 64)
		seq, err2 := strconv.ParseInt(ss, 10, 64)
		if !ok || err1 != nil || err2 != nil || epoch <= 0 || seq < 0 {
			continue // not a segment name: not ours to remove
		}
		files = append(files, key{epoch, seq})
	}
	if len(files) == 0 {
		return 0, nil
	}
	var leader int64
	if err := b.rdb.QueryRowContext(ctx, `SELECT coalesce((SELECT epoch FROM leaders WHERE stack = ?), 0)`, b.stack).Scan(&leader); err != nil {
		return 0, fmt.Errorf("read the leader epoch of stack %s: %w", b.stack, err)
	}
	rows, err := b.rdb.QueryContext(ctx, `SELECT epoch, seq, folded FROM journals WHERE stack = ?`, b.stack)
	if err != nil {
		return 0, fmt.Errorf("read the grant journal rows of stack %s: %w", b.stack, err)
	}
	folded := map[key]bool{} // every row: folded or not
	for rows.Next() {
		var k key
		var f bool
		if err := rows.Scan(&k.epoch, &k.seq, &f); err != nil {
			rows.Close()
			return 0, err
		}
		folded[k] = f
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	removed := 0
	for _, k := range files {
		f, hasRow := folded[k]
		if hasRow && !f || !hasRow && k.epoch >= leader {
			continue
		}
		name := segmentName(b.path, b.stack, k.epoch, k.seq)
		ok, err := removeUnlocked(name)
		if err != nil {
			return removed, err
		}
		if ok {
			removed++
		}
	}
	return removed, nil
}

// removeUnlocked removes the file name unless another writer holds its
// lock (false, nil).
func removeUnlocked(name string) (bool, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	if lockFile(f) != nil {
		return false, nil // held: a writer still has it open
	}
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("remove the orphaned grant journal segment %s: %w", name, err)
	}
	return true, nil
}
