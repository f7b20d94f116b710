package local

import (
	"context"
	"fmt"
	"time"

	"github.com/rpdhq/rpd/runtime/pools"
)

// PoolStore persists the stack's pool leases.
type PoolStore struct {
	b *Backend
}

// PutLease creates or replaces a record.
func (s *PoolStore) PutLease(ctx context.Context, rec pools.LeaseRecord) error {
	if rec.LeaseID == "" {
		return fmt.Errorf("put pool lease: empty LeaseID (pool %s, task %s)", rec.Pool, rec.TaskID)
	}
	_, err := s.b.st.putLease.exec(ctx,
		s.b.stack, rec.LeaseID, rec.Pool, rec.TaskID, rec.Priority, rec.Slots, nanos(rec.GrantedAt), nanos(rec.ExpiresAt), int64(rec.TTL))
	if err != nil {
		return fmt.Errorf("put pool lease %s of stack %s in %s: %w", rec.LeaseID, s.b.stack, s.b.path, err)
	}
	return nil
}

// DeleteLease removes a record; a missing one is not an error.
func (s *PoolStore) DeleteLease(ctx context.Context, leaseID string) error {
	if _, err := s.b.st.deleteLease.exec(ctx, s.b.stack, leaseID); err != nil {
		return fmt.Errorf("delete pool lease %s of stack %s in %s: %w", leaseID, s.b.stack, s.b.path, err)
	}
	return nil
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
		if err := rows.Scan(&r.LeaseID, &r.Pool, &r.TaskID, &r.Priority, &r.Slots, &granted, &expires, &ttl); err != nil {
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
