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
		return s.b.writeRecord(ctx, "put grant", id, &s.b.st.putGrant, s.b.stack, id, body)
	}
	return s.b.writeJournaled(ctx, "put grant", s.epoch, jrec{kind: kindPutGrant, id: id, body: body})
}

// DeleteGrant removes the record id; a missing one is not an error. A
// fenced delete returns before it is synced, as PoolStore.DeleteLease.
func (s *GrantStore) DeleteGrant(ctx context.Context, id string) error {
	if s.epoch == 0 {
		return s.b.writeRecord(ctx, "delete grant", id, &s.b.st.deleteGrant, s.b.stack, id)
	}
	return s.b.writeJournaled(ctx, "delete grant", s.epoch, jrec{kind: kindDeleteGrant, id: id})
}

// DeleteGrants removes the records ids, as DeleteGrant each, queued for
// the group commit at once, as PoolStore.DeleteLeases.
func (s *GrantStore) DeleteGrants(ctx context.Context, ids []string) error {
	if s.epoch == 0 {
		return s.b.deleteAll(ctx, "delete grants", ids, func(id string) recordWrite {
			return recordWrite{verb: "delete grant", id: id, st: &s.b.st.deleteGrant, args: []any{s.b.stack, id}}
		})
	}
	return s.b.deleteAll(ctx, "delete grants", ids, func(id string) recordWrite {
		return recordWrite{verb: "delete grant", id: id, epoch: s.epoch, rec: jrec{kind: kindDeleteGrant, id: id}}
	})
}

// LoadGrants returns every record of the stack by ID: the SQLite table with
// the grant journal's records not applied to it yet.
func (s *GrantStore) LoadGrants(ctx context.Context) (map[string][]byte, error) {
	recs, err := s.b.loadRecords(ctx, false, true)
	if err != nil {
		return nil, fmt.Errorf("load grants of stack %s from %s: %w", s.b.stack, s.b.path, err)
	}
	return recs.grants, nil
}
