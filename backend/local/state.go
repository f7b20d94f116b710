package local

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rpdhq/rpd/backend"
)

// ReadState returns the stack's document and version, (nil, 0, nil) when
// none was ever written. A stored document whose checksum or JSON does not
// verify is an error naming the file and stack, never an empty state.
func (b *Backend) ReadState(ctx context.Context) ([]byte, int64, error) {
	var doc []byte
	var version int64
	var sum string
	err := b.st.readState.queryRow(ctx, b.stack).Scan(&doc, &version, &sum)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read state of stack %s from %s: %w", b.stack, b.path, err)
	}
	got := sha256.Sum256(doc)
	if hex.EncodeToString(got[:]) != sum || !json.Valid(doc) || version < 1 {
		return nil, 0, fmt.Errorf("read state of stack %s from %s: the stored document (version %d) is corrupt (checksum or JSON does not verify); restore the file from a backup, or re-apply from the configuration", b.stack, b.path, version)
	}
	return doc, version, nil
}

// WriteState stores doc (which must be JSON) if the current version is
// expectVersion (0 = nothing written yet) and returns expectVersion+1.
func (b *Backend) WriteState(ctx context.Context, doc []byte, expectVersion int64) (int64, error) {
	if !json.Valid(doc) {
		return 0, fmt.Errorf("write state of stack %s: the document is not valid JSON", b.stack)
	}
	sum := sha256.Sum256(doc)
	var res sql.Result
	var err error
	if expectVersion == 0 {
		res, err = b.wdb.ExecContext(ctx, `INSERT INTO state (stack, version, doc, sha256) VALUES (?, 1, ?, ?) ON CONFLICT (stack) DO NOTHING`,
			b.stack, doc, hex.EncodeToString(sum[:]))
	} else {
		res, err = b.wdb.ExecContext(ctx, `UPDATE state SET version = version + 1, doc = ?, sha256 = ? WHERE stack = ? AND version = ?`,
			doc, hex.EncodeToString(sum[:]), b.stack, expectVersion)
	}
	if err != nil {
		return 0, fmt.Errorf("write state of stack %s to %s: %w", b.stack, b.path, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return 0, fmt.Errorf("write state of stack %s to %s at version %d: %w", b.stack, b.path, expectVersion, backend.ErrVersionConflict)
	}
	return expectVersion + 1, nil
}

// newLockID returns a random lock ID.
func newLockID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Lock takes the stack's lock for ttl. A live holder makes it fail with a
// *backend.LockedError; an expired one is taken over. An empty info.ID is
// replaced by a random one, a zero Created by now; the returned LockInfo is
// what was stored.
func (b *Backend) Lock(ctx context.Context, info backend.LockInfo, ttl time.Duration) (backend.LockInfo, error) {
	if ttl <= 0 {
		return backend.LockInfo{}, fmt.Errorf("lock stack %s: the lease ttl %v must be positive", b.stack, ttl)
	}
	if info.ID == "" {
		info.ID = newLockID()
	}
	now := b.now()
	if info.Created.IsZero() {
		info.Created = now
	}
	info.Created = info.Created.UTC()
	info.Expires = now.Add(ttl).UTC()
	err := b.write(ctx, func(tx *sql.Tx) error {
		var h backend.LockInfo
		var created, expires int64
		err := tx.QueryRowContext(ctx, `SELECT id, who, operation, created_ns, expires_ns FROM locks WHERE stack = ?`, b.stack).
			Scan(&h.ID, &h.Who, &h.Operation, &created, &expires)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case expires > nanos(now):
			h.Created, h.Expires = fromNanos(created), fromNanos(expires)
			return &backend.LockedError{Holder: h}
		default:
			b.log.Info("taking over an expired state lock", "stack", b.stack, "holder", h.Who, "lock_id", h.ID, "expired", fromNanos(expires))
		}
		_, err = tx.ExecContext(ctx, `INSERT OR REPLACE INTO locks (stack, id, who, operation, created_ns, expires_ns) VALUES (?, ?, ?, ?, ?, ?)`,
			b.stack, info.ID, info.Who, info.Operation, nanos(info.Created), nanos(info.Expires))
		return err
	})
	if err != nil {
		return backend.LockInfo{}, fmt.Errorf("lock stack %s in %s: %w", b.stack, b.path, err)
	}
	return info, nil
}

// Renew extends the lease of the lock held under id to now+ttl. It fails
// with backend.ErrLockNotHeld when the lock is not held under id, including
// when it expired and someone else took it over.
func (b *Backend) Renew(ctx context.Context, id string, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("renew lock of stack %s: the lease ttl %v must be positive", b.stack, ttl)
	}
	res, err := b.wdb.ExecContext(ctx, `UPDATE locks SET expires_ns = ? WHERE stack = ? AND id = ?`, nanos(b.now().Add(ttl)), b.stack, id)
	return b.lockResult("renew", id, res, err)
}

// Unlock releases the lock held under id.
func (b *Backend) Unlock(ctx context.Context, id string) error {
	res, err := b.wdb.ExecContext(ctx, `DELETE FROM locks WHERE stack = ? AND id = ?`, b.stack, id)
	return b.lockResult("unlock", id, res, err)
}

// ForceUnlock removes the lock if its ID is id, whoever holds it and
// whether or not its lease is live.
func (b *Backend) ForceUnlock(ctx context.Context, id string) error {
	res, err := b.wdb.ExecContext(ctx, `DELETE FROM locks WHERE stack = ? AND id = ?`, b.stack, id)
	if err := b.lockResult("force-unlock", id, res, err); err != nil {
		return err // no "forced open" log: nothing was removed
	}
	b.log.Warn("forced the state lock open", "stack", b.stack, "lock_id", id)
	return nil
}

func (b *Backend) lockResult(op, id string, res sql.Result, err error) error {
	if err != nil {
		return fmt.Errorf("%s lock %s of stack %s in %s: %w", op, id, b.stack, b.path, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("%s lock %s of stack %s: %w", op, id, b.stack, backend.ErrLockNotHeld)
	}
	return nil
}
