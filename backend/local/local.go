package local

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/internal/groupcommit"
	"github.com/rpdhq/rpd/runtime/pickup"
	"github.com/rpdhq/rpd/runtime/pools"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Options configure Open.
type Options struct {
	// Stack names the stack whose state, lock and pool leases this backend
	// reads and writes. Required.
	Stack string
	// Clock returns the current time; nil means time.Now. Tests inject a
	// fake clock to step through delays, visibility timeouts and leases.
	Clock func() time.Time
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
	// BusyTimeout bounds how long a write waits for another process's
	// write to finish; zero means 10s.
	BusyTimeout time.Duration
	// NormalPrioritySync keeps the thread of a synced grant-journal append
	// in the normal scheduling class. By default it is raised to
	// SCHED_FIFO for the write where the process may (syncprio_linux.go;
	// the backend "local" block's realtime_sync).
	NormalPrioritySync bool
}

// Backend is an open database file. It is safe for concurrent use, and
// several processes may open the same file.
type Backend struct {
	path      string
	stack     string
	clock     func() time.Time
	log       *slog.Logger
	pollEvery time.Duration
	// wdb has one connection and serialises this process's writes, so that
	// goroutines do not spin in SQLite's busy handler against each other;
	// rdb serves reads concurrently (WAL readers do not block the writer).
	wdb *sql.DB
	rdb *sql.DB
	st  stmts
	// records writes the grant records by group commit (commit.go).
	records *groupcommit.Queue[recordWrite]
	// queued tells a write queued by a QueueDelete... method its outcome
	// (b.finishQueued, made once: a method value allocates).
	queued func(recordWrite, error)
	// j is the grant journal of fenced writes (journalwriter.go).
	j journal
}

var (
	_ backend.QueueAdmin  = (*Backend)(nil)
	_ backend.StateStore  = (*Backend)(nil)
	_ backend.Locker      = (*Backend)(nil)
	_ backend.LeaderStore = (*Backend)(nil)
	_ backend.GrantStore  = (*GrantStore)(nil)
	_ pickup.Queue        = (*Queue)(nil)
	_ pools.Store         = (*PoolStore)(nil)
)

// Open opens (creating it and its parent directory if needed) the database
// at path and migrates its schema to the current version. A file that is not
// an rpd database, or has a newer schema than this binary knows, is an error
// naming the file.
func Open(ctx context.Context, path string, opts Options) (*Backend, error) {
	if opts.Stack == "" {
		return nil, errors.New("local backend: Options.Stack is required")
	}
	if path == "" {
		return nil, fmt.Errorf("local backend: no database path given (rpd's default is %s)", backend.DefaultLocalPath)
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = 10 * time.Second
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("local backend: create the directory of %s: %w", path, err)
		}
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", opts.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(ON)")
	q.Set("_txlock", "immediate")
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
	wdb, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("local backend: open %s: %w", path, err)
	}
	wdb.SetMaxOpenConns(1)
	rdb, err := sql.Open("sqlite", dsn)
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("local backend: open %s: %w", path, err)
	}
	rdb.SetMaxOpenConns(4)
	// Keep every reader open, so that its prepared statements live on.
	rdb.SetMaxIdleConns(4)
	b := &Backend{path: path, stack: opts.Stack, clock: opts.Clock, log: opts.Logger, wdb: wdb, rdb: rdb, pollEvery: 20 * time.Millisecond}
	if err := retryBusy(ctx, opts.BusyTimeout, func() error { return b.migrate(ctx) }); err != nil {
		b.Close()
		return nil, fmt.Errorf("local backend: open %s: %w", path, err)
	}
	b.prepareStmts(ctx)
	b.j.prio = newSyncPriority(b.log, !opts.NormalPrioritySync)
	b.startJournal()
	b.records = groupcommit.New(maxBatch, b.commitRecords, groupcommit.DeferGo(deferDeletes))
	b.queued = b.finishQueued
	return b, nil
}

// retryBusy runs fn again, with backoff, while it fails with SQLite's
// SQLITE_BUSY or SQLITE_LOCKED, for up to timeout. Opening a connection
// switches the file to WAL, which takes a lock that SQLite's busy handler
// does not wait for: daemons started at once on a fresh file would
// otherwise fail at once for a lock another holds for milliseconds.
func retryBusy(ctx context.Context, timeout time.Duration, fn func() error) error {
	deadline := time.Now().Add(timeout)
	delay := 5 * time.Millisecond
	for {
		err := fn()
		if err == nil || !isBusy(err) || time.Now().Add(delay).After(deadline) {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		delay = min(2*delay, 250*time.Millisecond)
	}
}

// isBusy reports whether err is SQLite's SQLITE_BUSY or SQLITE_LOCKED
// (extended codes included).
func isBusy(err error) bool {
	var se interface{ Code() int }
	if !errors.As(err, &se) {
		return false
	}
	c := se.Code() & 0xff
	return c == 5 || c == 6
}

// Close closes the database. Calls after Close fail with a transient error.
func (b *Backend) Close() error {
	if b.records != nil {
		b.records.Close() // writes what is queued
	}
	b.stopJournal()
	return errors.Join(b.closeStmts(), b.wdb.Close(), b.rdb.Close())
}

// Path is the database file.
func (b *Backend) Path() string { return b.path }

// Stack is the stack this backend serves.
func (b *Backend) Stack() string { return b.stack }

// Queue returns the data plane of the named queue. It does not check that
// the queue exists; its operations fail with an error wrapping
// backend.ErrQueueNotFound when it does not.
func (b *Backend) Queue(name string) *Queue {
	return &Queue{b: b, name: name}
}

// Instances returns the instance table.
func (b *Backend) Instances() *InstanceTable {
	return &InstanceTable{b: b}
}

// PoolStore returns the persistence of this stack's pool leases.
func (b *Backend) PoolStore() *PoolStore {
	return &PoolStore{b: b}
}

var (
	_ pickup.Queue         = (*Queue)(nil)
	_ pickup.InstanceTable = (*InstanceTable)(nil)
	_ pools.Store          = (*PoolStore)(nil)
)

func (b *Backend) now() time.Time { return b.clock() }

// write runs fn in one BEGIN IMMEDIATE transaction on the write connection.
func (b *Backend) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := b.wdb.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// ms converts an instant to the milliseconds the queue tables store.
func ms(t time.Time) int64 { return t.UnixMilli() }

// nanos converts an instant to stored nanoseconds, the zero time to 0.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// fromNanos is the inverse of nanos, in UTC.
func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}
