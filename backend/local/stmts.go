package local

import (
	"context"
	"database/sql"
	"errors"
)

// The statements on the hot paths (queue data plane, instance transitions,
// pool leases and the daemon's other grants, DescribeQueue, ReadState) are
// prepared once at Open and reused: parsing SQL on every call was a
// measurable share of the daemon's CPU and of a 10k-queue plan. database/sql
// keeps one prepared copy per connection; the driver resets a statement
// between uses.
const (
	sqlPutLease = `INSERT OR REPLACE INTO pool_leases (stack, lease_id, pool, task_id, priority, slots, granted_ns, expires_ns, ttl_ns, owner)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// sqlPutLeases writes the leases a JSON array of rows lists, each row
	// [lease_id, pool, task_id, priority, slots, granted_ns, expires_ns,
	// ttl_ns, owner] (applyBuf.addPut).
	sqlPutLeases = `INSERT OR REPLACE INTO pool_leases (stack, lease_id, pool, task_id, priority, slots, granted_ns, expires_ns, ttl_ns, owner)
		SELECT ?1, value->>0, value->>1, value->>2, value->>3, value->>4, value->>5, value->>6, value->>7, value->>8 FROM json_each(?2)`
	sqlDeleteLease = `DELETE FROM pool_leases WHERE stack = ? AND lease_id = ?`
	// sqlDeleteLeases deletes the leases whose IDs a JSON array lists.
	sqlDeleteLeases = `DELETE FROM pool_leases WHERE stack = ?1 AND lease_id IN (SELECT value FROM json_each(?2))`
	sqlLoadLeases   = `SELECT lease_id, pool, task_id, priority, slots, granted_ns, expires_ns, ttl_ns, owner FROM pool_leases WHERE stack = ? ORDER BY lease_id`

	sqlPutGrant    = `INSERT OR REPLACE INTO grants (stack, id, body) VALUES (?, ?, ?)`
	sqlDeleteGrant = `DELETE FROM grants WHERE stack = ? AND id = ?`
	// sqlDeleteGrants deletes the grants whose IDs a JSON array lists.
	sqlDeleteGrants = `DELETE FROM grants WHERE stack = ?1 AND id IN (SELECT value FROM json_each(?2))`
	sqlLoadGrants   = `SELECT id, body FROM grants WHERE stack = ?`

	sqlLeaderEpoch = `SELECT epoch FROM leaders WHERE stack = ?`
	sqlJournalSegs = `SELECT epoch, seq, applied, sealed FROM journals WHERE stack = ? AND folded = 0 ORDER BY epoch, seq`
	sqlSetApplied  = `UPDATE journals SET applied = ? WHERE stack = ? AND epoch = ? AND seq = ?`
	// After a journal write: the leader epoch and the segment's seal.
	sqlJournalCheck = `SELECT coalesce((SELECT epoch FROM leaders WHERE stack = ?1), 0),
		coalesce((SELECT sealed FROM journals WHERE stack = ?1 AND epoch = ?2 AND seq = ?3), -3)`

	sqlLoadQueue = `SELECT visibility_ms, retention_ms, delay_ms, tags FROM queues WHERE name = ?`
	// Messages past retention are not counted (Receive deletes them).
	sqlDescribeQueue = `SELECT q.visibility_ms, q.retention_ms, q.delay_ms, q.tags,
			coalesce(sum(m.visible_ms <= ?1), 0),
			coalesce(sum(m.visible_ms > ?1 AND m.receive_count > 0), 0),
			coalesce(sum(m.visible_ms > ?1 AND m.receive_count = 0), 0)
		FROM queues q LEFT JOIN messages m ON m.queue = q.name AND m.sent_ms > ?1 - q.retention_ms
		WHERE q.name = ?2 GROUP BY q.name`

	sqlSend = `INSERT INTO messages (queue, body, sent_ms, visible_ms)
		SELECT name, ?, ?, ? + CASE WHEN ? = 0 THEN delay_ms ELSE ? END FROM queues WHERE name = ?`
	sqlAnyVisible    = `SELECT 1 FROM messages WHERE queue = ? AND visible_ms <= ? LIMIT 1`
	sqlQueueTimeouts = `SELECT visibility_ms, retention_ms FROM queues WHERE name = ?`
	sqlExpire        = `DELETE FROM messages WHERE queue = ? AND sent_ms <= ?`
	sqlReceive       = `UPDATE messages
			SET receipt = lower(hex(randomblob(12))), visible_ms = ?, receive_count = receive_count + 1
			WHERE id IN (SELECT id FROM messages WHERE queue = ? AND visible_ms <= ? ORDER BY visible_ms, id LIMIT ?)
			RETURNING id, body, receipt, receive_count`
	sqlDeleteMessage = `DELETE FROM messages WHERE id = ? AND queue = ? AND receipt = ?`
	sqlChangeVis     = `UPDATE messages SET visible_ms = ? WHERE id = ? AND queue = ? AND receipt = ?`

	sqlGetInstance = `SELECT ` + instanceColumns + ` FROM instances WHERE id = ?`
	// Left to itself the planner picks instances_by_class (it yields id
	// order without a sort) and reads every claimed instance of the class:
	// a pickup's retry lookup then costs O(claimed instances).
	sqlClaimedBy = `SELECT ` + instanceColumns + ` FROM instances INDEXED BY instances_by_owner
		WHERE class = ? AND owner = ? AND owner != '' AND state = ? ORDER BY id`
	sqlTransition = `UPDATE instances SET state = ?, owner = ?, updated_ns = ?, claim_expires_ns = ?
		WHERE id = ? AND state = ? AND owner = ? AND (? = 0 OR threshold_ns > ?)
			AND (? = 0 OR (claim_expires_ns != 0 AND claim_expires_ns <= ?))
		RETURNING ` + instanceColumns

	sqlReadState = `SELECT doc, version, sha256 FROM state WHERE stack = ?`
)

// stmt is one statement prepared at Open. When preparing failed (a file
// whose schema lacks a table: the statement fails when called, as it would
// unprepared), s is nil and the query text is run instead.
type stmt struct {
	db   *sql.DB
	text string
	s    *sql.Stmt
}

func (p *stmt) exec(ctx context.Context, args ...any) (sql.Result, error) {
	if p.s == nil {
		return p.db.ExecContext(ctx, p.text, args...)
	}
	return p.s.ExecContext(ctx, args...)
}

func (p *stmt) query(ctx context.Context, args ...any) (*sql.Rows, error) {
	if p.s == nil {
		return p.db.QueryContext(ctx, p.text, args...)
	}
	return p.s.QueryContext(ctx, args...)
}

func (p *stmt) queryRow(ctx context.Context, args ...any) *sql.Row {
	if p.s == nil {
		return p.db.QueryRowContext(ctx, p.text, args...)
	}
	return p.s.QueryRowContext(ctx, args...)
}

// tx returns the statement for use in tx, a transaction on p's DB: the copy
// already prepared on the write connection is reused, not re-parsed.
func (p *stmt) tx(ctx context.Context, tx *sql.Tx) txStmt {
	if p.s == nil {
		return txStmt{tx: tx, text: p.text}
	}
	return txStmt{s: tx.StmtContext(ctx, p.s)}
}

// txStmt is a stmt bound to a transaction.
type txStmt struct {
	s    *sql.Stmt
	tx   *sql.Tx
	text string
}

func (t txStmt) exec(ctx context.Context, args ...any) (sql.Result, error) {
	if t.s == nil {
		return t.tx.ExecContext(ctx, t.text, args...)
	}
	return t.s.ExecContext(ctx, args...)
}

func (t txStmt) query(ctx context.Context, args ...any) (*sql.Rows, error) {
	if t.s == nil {
		return t.tx.QueryContext(ctx, t.text, args...)
	}
	return t.s.QueryContext(ctx, args...)
}

func (t txStmt) queryRow(ctx context.Context, args ...any) *sql.Row {
	if t.s == nil {
		return t.tx.QueryRowContext(ctx, t.text, args...)
	}
	return t.s.QueryRowContext(ctx, args...)
}

// stmts is a Backend's prepared statements. Those on wdb run directly or,
// inside a write transaction, through stmt.tx.
type stmts struct {
	// on wdb
	putLease, deleteLease, putLeases     stmt
	putGrant, deleteGrant                stmt
	deleteLeases, deleteGrants           stmt
	leaderEpoch, journalSegs, setApplied stmt
	send, queueTimeouts, expire, receive stmt
	deleteMessage, changeVis, loadQueueW stmt
	transition                           stmt
	// on rdb
	loadLeases, loadGrants, describeQueue stmt
	anyVisible, getInstance, readState    stmt
	claimedBy, journalCheck               stmt

	prepared []*sql.Stmt // every statement above that prepared, for closeStmts
}

// prepareStmts prepares b.st, after migrate. A statement that does not
// prepare is logged and left to run unprepared.
func (b *Backend) prepareStmts(ctx context.Context) {
	prep := func(p *stmt, db *sql.DB, query string) {
		*p = stmt{db: db, text: query}
		s, err := db.PrepareContext(ctx, query)
		if err != nil {
			b.log.Debug("statement not prepared; it runs unprepared", "path", b.path, "query", query, "err", err)
			return
		}
		p.s = s
		b.st.prepared = append(b.st.prepared, s)
	}
	st := &b.st
	prep(&st.putLease, b.wdb, sqlPutLease)
	prep(&st.deleteLease, b.wdb, sqlDeleteLease)
	prep(&st.putLeases, b.wdb, sqlPutLeases)
	prep(&st.putGrant, b.wdb, sqlPutGrant)
	prep(&st.deleteGrant, b.wdb, sqlDeleteGrant)
	prep(&st.deleteLeases, b.wdb, sqlDeleteLeases)
	prep(&st.deleteGrants, b.wdb, sqlDeleteGrants)
	prep(&st.leaderEpoch, b.wdb, sqlLeaderEpoch)
	prep(&st.journalSegs, b.wdb, sqlJournalSegs)
	prep(&st.setApplied, b.wdb, sqlSetApplied)
	prep(&st.send, b.wdb, sqlSend)
	prep(&st.queueTimeouts, b.wdb, sqlQueueTimeouts)
	prep(&st.expire, b.wdb, sqlExpire)
	prep(&st.receive, b.wdb, sqlReceive)
	prep(&st.deleteMessage, b.wdb, sqlDeleteMessage)
	prep(&st.changeVis, b.wdb, sqlChangeVis)
	prep(&st.loadQueueW, b.wdb, sqlLoadQueue)
	prep(&st.transition, b.wdb, sqlTransition)
	prep(&st.loadLeases, b.rdb, sqlLoadLeases)
	prep(&st.loadGrants, b.rdb, sqlLoadGrants)
	prep(&st.describeQueue, b.rdb, sqlDescribeQueue)
	prep(&st.anyVisible, b.rdb, sqlAnyVisible)
	prep(&st.getInstance, b.rdb, sqlGetInstance)
	prep(&st.claimedBy, b.rdb, sqlClaimedBy)
	prep(&st.readState, b.rdb, sqlReadState)
	prep(&st.journalCheck, b.rdb, sqlJournalCheck)
}

// closeStmts closes the prepared statements; later calls fail with
// "statement is closed".
func (b *Backend) closeStmts() error {
	var errs []error
	for _, s := range b.st.prepared {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}
