package local

import (
	"context"
	"fmt"
	"time"

	"github.com/rpdhq/rpd/runtime/pools"
)

// PoolStore persists the stack's pool leases.
type PoolStore struct {
	b     *Backend
	epoch int64 // 0: unfenced
}

// Fence returns the store whose writes succeed only while epoch is the
// stack's leader epoch (backend.Leader): each is one statement conditional
// on the leader row, and a stale epoch fails with backend.ErrFenced having
// written nothing.
func (s *PoolStore) Fence(epoch int64) *PoolStore { return &PoolStore{b: s.b, epoch: epoch} }

// PutLease creates or replaces a record. Concurrent writes share one
// transaction (see committer); PutLease returns once its own committed.
func (s *PoolStore) PutLease(ctx context.Context, rec pools.LeaseRecord) error {
	if rec.LeaseID == "" {
		return fmt.Errorf("put pool lease: empty LeaseID (pool %s, task %s)", rec.Pool, rec.TaskID)
	}
	if s.epoch == 0 {
		return s.b.writeRecord(ctx, "put pool lease", rec.LeaseID, &s.b.st.putLease, 0,
			s.b.stack, rec.LeaseID, rec.Pool, rec.TaskID, rec.Priority, rec.Slots, nanos(rec.GrantedAt), nanos(rec.ExpiresAt), int64(rec.TTL), rec.Owner)
	}
	return s.b.writeRecord(ctx, "put pool lease", rec.LeaseID, &s.b.st.putLeaseFenced, s.epoch,
		s.b.stack, rec.LeaseID, rec.Pool, rec.TaskID, rec.Priority, rec.Slots, nanos(rec.GrantedAt), nanos(rec.ExpiresAt), int64(rec.TTL), s.epoch, rec.Owner)
}

// DeleteLease removes a record; a missing one is not an error. It is
// written as PutLease is.
func (s *PoolStore) DeleteLease(ctx context.Context, leaseID string) error {
	if s.epoch == 0 {
		return s.b.writeRecord(ctx, "delete pool lease", leaseID, &s.b.st.deleteLease, 0, s.b.stack, leaseID)
	}
	return s.b.writeRecord(ctx, "delete pool lease", leaseID, &s.b.st.deleteLeaseFenced, s.epoch, s.b.stack, leaseID, s.epoch)
}

// LoadLeases returns every record of the stack, ordered by lease ID.
func (s *PoolStore) LoadLeases(ctx context.Context) ([]pools.LeaseRecord, error) {
	rows, err := s.b.st.loadLeases.query(ctx, s.b.stack)
	if err != nil {
		return nil, fmt.Errorf("load pool leases of stack %s from %s: %w", s.b.stack, s.b.path, err)
	}
	defer rows.Close()
	var out []pools.LeaseRecord
	for rows.Next() {
		var r pools.LeaseRecord
		var granted, expires, ttl int64
		if err := rows.Scan(&r.LeaseID, &r.Pool, &r.TaskID, &r.Priority, &r.Slots, &granted, &expires, &ttl, &r.Owner); err != nil {
			return nil, fmt.Errorf("load pool leases of stack %s from %s: %w", s.b.stack, s.b.path, err)
		}
		r.GrantedAt, r.ExpiresAt, r.TTL = fromNanos(granted), fromNanos(expires), time.Duration(ttl)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load pool leases of stack %s from %s: %w", s.b.stack, s.b.path, err)
	}
	return out, nil
}
