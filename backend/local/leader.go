package local

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/rpdhq/rpd/backend"
)

var _ backend.LeaderStore = (*Backend)(nil)

const leaderColumns = `holder, epoch, address, mode, config_hash, acquired_ns, renewed_ns, expires_ns`

func scanLeader(row interface{ Scan(...any) error }) (backend.Leader, error) {
	var l backend.Leader
	var acquired, renewed, expires int64
	err := row.Scan(&l.Holder, &l.Epoch, &l.Address, &l.Mode, &l.ConfigHash, &acquired, &renewed, &expires)
	l.AcquiredAt, l.RenewedAt, l.ExpiresAt = fromNanos(acquired), fromNanos(renewed), fromNanos(expires)
	return l, err
}

// AcquireLeader takes or renews the stack's leader lease in one BEGIN
// IMMEDIATE transaction (see backend.LeaderStore).
func (b *Backend) AcquireLeader(ctx context.Context, c backend.LeaderClaim) (backend.Leader, bool, error) {
	if c.Holder == "" || c.Lease <= 0 {
		return backend.Leader{}, false, fmt.Errorf("acquire the leader lease of stack %s: holder %q and lease %v must be set and positive", b.stack, c.Holder, c.Lease)
	}
	var out backend.Leader
	var held bool
	var sealed []segKey
	err := b.write(ctx, func(tx *sql.Tx) error {
		sealed = sealed[:0]
		cur, err := scanLeader(tx.QueryRowContext(ctx, `SELECT `+leaderColumns+` FROM leaders WHERE stack = ?`, b.stack))
		if errors.Is(err, sql.ErrNoRows) {
			cur = backend.Leader{}
		} else if err != nil {
			return err
		}
		next, ok := backend.NextLeader(cur, c, b.now().UTC())
		if !ok {
			out = cur
			return nil
		}
		_, err = tx.ExecContext(ctx, `INSERT OR REPLACE INTO leaders (stack, `+leaderColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			b.stack, next.Holder, next.Epoch, next.Address, next.Mode, next.ConfigHash, nanos(next.AcquiredAt), nanos(next.RenewedAt), nanos(next.ExpiresAt))
		out, held = next, true
		if err != nil || next.Epoch == cur.Epoch {
			return err
		}
		// A takeover: the journal segments of older epochs are sealed,
		// their lengths fixed later (journalwriter.go), in the
		// transaction that moves the epoch.
		rows, err := tx.QueryContext(ctx, `UPDATE journals SET sealed = -2 WHERE stack = ? AND epoch < ? AND sealed = -1 RETURNING epoch, seq`, b.stack, next.Epoch)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k segKey
			if err := rows.Scan(&k.epoch, &k.seq); err != nil {
				return err
			}
			sealed = append(sealed, k)
		}
		return rows.Err()
	})
	if err != nil {
		return backend.Leader{}, false, fmt.Errorf("acquire the leader lease of stack %s in %s: %w", b.stack, b.path, err)
	}
	// Tell the stale writers at once (they read the flag after each
	// fdatasync, and fail their writes once they see the epoch moved). A
	// flag not set here is set by whoever fixes the seal.
	for _, k := range sealed {
		if err := setSealFlag(segmentName(b.path, b.stack, k.epoch, k.seq)); err != nil {
			b.log.Warn("local backend: could not flag a stale leader's grant journal as sealed; it is flagged when its seal is fixed", "path", b.path, "epoch", k.epoch, "seq", k.seq, "err", err)
		}
	}
	return out, held, nil
}

// ReleaseLeader gives the lease up when holder holds it under epoch.
func (b *Backend) ReleaseLeader(ctx context.Context, holder string, epoch int64) error {
	_, err := b.wdb.ExecContext(ctx, `UPDATE leaders SET holder = '', expires_ns = 0 WHERE stack = ? AND holder = ? AND epoch = ?`, b.stack, holder, epoch)
	if err != nil {
		return fmt.Errorf("release the leader lease of stack %s in %s: %w", b.stack, b.path, err)
	}
	return nil
}

// ReadLeader returns the stack's leader record, the zero Leader if none.
func (b *Backend) ReadLeader(ctx context.Context) (backend.Leader, error) {
	l, err := scanLeader(b.rdb.QueryRowContext(ctx, `SELECT `+leaderColumns+` FROM leaders WHERE stack = ?`, b.stack))
	if errors.Is(err, sql.ErrNoRows) {
		return backend.Leader{}, nil
	}
	if err != nil {
		return backend.Leader{}, fmt.Errorf("read the leader lease of stack %s from %s: %w", b.stack, b.path, err)
	}
	return l, nil
}
