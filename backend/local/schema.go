package local

import (
	"context"
	"database/sql"
	"fmt"
)

// migrations[i] brings the schema from version i to i+1. Append only: a
// released migration is never edited. The version is PRAGMA user_version.
var migrations = []string{
	`CREATE TABLE queues (
		name          TEXT PRIMARY KEY,
		visibility_ms INTEGER NOT NULL,
		retention_ms  INTEGER NOT NULL,
		delay_ms      INTEGER NOT NULL,
		tags          TEXT NOT NULL,
		created_ms    INTEGER NOT NULL
	);
	CREATE TABLE messages (
		id            INTEGER PRIMARY KEY AUTOINCREMENT,
		queue         TEXT NOT NULL REFERENCES queues(name) ON DELETE CASCADE,
		body          TEXT NOT NULL,
		sent_ms       INTEGER NOT NULL,
		visible_ms    INTEGER NOT NULL,
		receive_count INTEGER NOT NULL DEFAULT 0,
		receipt       TEXT NOT NULL DEFAULT ''
	);
	CREATE INDEX messages_by_visibility ON messages(queue, visible_ms, id);
	CREATE INDEX messages_by_age ON messages(queue, sent_ms);
	CREATE TABLE instances (
		id             TEXT PRIMARY KEY,
		class          TEXT NOT NULL,
		state          TEXT NOT NULL,
		owner          TEXT NOT NULL,
		usage_class    TEXT NOT NULL,
		instance_type  TEXT NOT NULL,
		cpu            INTEGER NOT NULL,
		mem_mib        INTEGER NOT NULL,
		resource_class TEXT NOT NULL,
		threshold_ns   INTEGER NOT NULL,
		updated_ns     INTEGER NOT NULL
	);
	CREATE INDEX instances_by_class ON instances(class, state, id);
	CREATE TABLE state (
		stack   TEXT PRIMARY KEY,
		version INTEGER NOT NULL,
		doc     BLOB NOT NULL,
		sha256  TEXT NOT NULL
	);
	CREATE TABLE locks (
		stack      TEXT PRIMARY KEY,
		id         TEXT NOT NULL,
		who        TEXT NOT NULL,
		operation  TEXT NOT NULL,
		created_ns INTEGER NOT NULL,
		expires_ns INTEGER NOT NULL
	);
	CREATE TABLE pool_leases (
		stack      TEXT NOT NULL,
		lease_id   TEXT NOT NULL,
		pool       TEXT NOT NULL,
		task_id    TEXT NOT NULL,
		priority   INTEGER NOT NULL,
		slots      INTEGER NOT NULL,
		granted_ns INTEGER NOT NULL,
		expires_ns INTEGER NOT NULL,
		PRIMARY KEY (stack, lease_id)
	);`,
	// 2: pools.LeaseRecord.TTL (0 in records written by version 1).
	`ALTER TABLE pool_leases ADD COLUMN ttl_ns INTEGER NOT NULL DEFAULT 0;`,
	// 3: the daemon's other remote grants (budget permits, VM-ceiling
	// claims), as opaque records.
	`CREATE TABLE grants (
		stack TEXT NOT NULL,
		id    TEXT NOT NULL,
		body  BLOB NOT NULL,
		PRIMARY KEY (stack, id)
	);`,
	// 4: the stack's leader lease (backend.Leader); epoch is the fencing
	// token every grant write is conditional on.
	`CREATE TABLE leaders (
		stack       TEXT PRIMARY KEY,
		holder      TEXT NOT NULL,
		epoch       INTEGER NOT NULL,
		address     TEXT NOT NULL,
		mode        TEXT NOT NULL,
		config_hash TEXT NOT NULL,
		acquired_ns INTEGER NOT NULL,
		renewed_ns  INTEGER NOT NULL,
		expires_ns  INTEGER NOT NULL
	);`,
	// 5: unconfirmed claims lapse (pickup.Instance.ClaimExpires), and a
	// retried pickup finds its owner's claim by an index.
	`ALTER TABLE instances ADD COLUMN claim_expires_ns INTEGER NOT NULL DEFAULT 0;
	CREATE INDEX instances_by_owner ON instances(class, owner) WHERE owner != '';`,
	// 6: pools.LeaseRecord.Owner, the principal that took the lease ('' in
	// records written before).
	`ALTER TABLE pool_leases ADD COLUMN owner TEXT NOT NULL DEFAULT '';`,
	// 7: the segments of the grant journal (journalwriter.go): applied is
	// the offset up to which a segment's records are in the tables above;
	// sealed is -1 (open), -2 (seal pending after a takeover) or its final
	// length; folded is 1 once a sealed segment is wholly in the tables,
	// synced, and its file removed (the row stays, so that a stale writer
	// still finds its seal).
	`CREATE TABLE journals (
		stack   TEXT NOT NULL,
		epoch   INTEGER NOT NULL,
		seq     INTEGER NOT NULL,
		applied INTEGER NOT NULL,
		sealed  INTEGER NOT NULL,
		folded  INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (stack, epoch, seq)
	);`,
}

// SchemaVersion is the schema version this binary writes.
func SchemaVersion() int { return len(migrations) }

// migrate applies the missing migrations in one transaction, so a second
// process opening the file at the same time either sees the old schema and
// waits, or the new one.
func (b *Backend) migrate(ctx context.Context) error {
	return b.write(ctx, func(tx *sql.Tx) error {
		var v int
		if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
			return fmt.Errorf("read the schema version (is it an SQLite database?): %w", err)
		}
		if v > len(migrations) {
			return fmt.Errorf("schema version %d is newer than this rpd knows (%d); upgrade rpd", v, len(migrations))
		}
		if v == 0 {
			// A fresh file has no tables; a file with foreign tables is not ours.
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type='table'`).Scan(&n); err != nil {
				return fmt.Errorf("inspect the tables: %w", err)
			}
			if n > 0 {
				return fmt.Errorf("the file holds %d tables but no rpd schema version; it is not an rpd database, choose another path", n)
			}
		}
		for i := v; i < len(migrations); i++ {
			if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
				return fmt.Errorf("migrate to schema version %d: %w", i+1, err)
			}
			if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, i+1)); err != nil {
				return fmt.Errorf("migrate to schema version %d: %w", i+1, err)
			}
			b.log.Debug("migrated database schema", "path", b.path, "version", i+1)
		}
		return nil
	})
}
