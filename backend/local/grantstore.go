package local

import (
	"context"
	"fmt"
)

// GrantStore persists the daemon's remote grants other than pool leases
// (budget permits, VM-ceiling claims) as opaque records keyed by ID, so a
// restarted daemon still counts what its clients hold.
type GrantStore struct {
	b     *Backend
	epoch int64 // 0: unfenced
}

// Fence returns the store whose writes succeed only while epoch is the
// stack's leader epoch, as PoolStore.Fence.
func (s *GrantStore) Fence(epoch int64) *GrantStore { return &GrantStore{b: s.b, epoch: epoch} }

// GrantStore returns the persistence of this stack's grants.
func (b *Backend) GrantStore() *GrantStore { return &GrantStore{b: b} }

// PutGrant creates or replaces the record id, by group commit as
// PoolStore.PutLease.
func (s *GrantStore) PutGrant(ctx context.Context, id string, body []byte) error {
	if id == "" {
		return fmt.Errorf("put grant of stack %s: empty ID", s.b.stack)
	}
	if s.epoch == 0 {
		return s.b.writeRecord(ctx, "put grant", id, &s.b.st.putGrant, 0, s.b.stack, id, body)
	}
	return s.b.writeRecord(ctx, "put grant", id, &s.b.st.putGrantFenced, s.epoch, s.b.stack, id, body, s.epoch)
}

// DeleteGrant removes the record id; a missing one is not an error.
func (s *GrantStore) DeleteGrant(ctx context.Context, id string) error {
	if s.epoch == 0 {
		return s.b.writeRecord(ctx, "delete grant", id, &s.b.st.deleteGrant, 0, s.b.stack, id)
	}
	return s.b.writeRecord(ctx, "delete grant", id, &s.b.st.deleteGrantFenced, s.epoch, s.b.stack, id, s.epoch)
}

// LoadGrants returns every record of the stack by ID.
func (s *GrantStore) LoadGrants(ctx context.Context) (map[string][]byte, error) {
	rows, err := s.b.st.loadGrants.query(ctx, s.b.stack)
	if err != nil {
		return nil, fmt.Errorf("load grants of stack %s from %s: %w", s.b.stack, s.b.path, err)
	}
	defer rows.Close()
	out := map[string][]byte{}
	for rows.Next() {
		var id string
		var body []byte
		if err := rows.Scan(&id, &body); err != nil {
			return nil, fmt.Errorf("load grants of stack %s from %s: %w", s.b.stack, s.b.path, err)
		}
		out[id] = body
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load grants of stack %s from %s: %w", s.b.stack, s.b.path, err)
	}
	return out, nil
}
