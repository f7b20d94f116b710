package local

import (
	"context"
	"fmt"
)

// GrantStore persists the daemon's remote grants other than pool leases
// (budget permits, VM-ceiling claims) as opaque records keyed by ID, so a
// restarted daemon still counts what its clients hold.
type GrantStore struct {
	b *Backend
}

// GrantStore returns the persistence of this stack's grants.
func (b *Backend) GrantStore() *GrantStore { return &GrantStore{b: b} }

// PutGrant creates or replaces the record id.
func (s *GrantStore) PutGrant(ctx context.Context, id string, body []byte) error {
	if id == "" {
		return fmt.Errorf("put grant of stack %s: empty ID", s.b.stack)
	}
	if _, err := s.b.st.putGrant.exec(ctx, s.b.stack, id, body); err != nil {
		return fmt.Errorf("put grant %s of stack %s in %s: %w", id, s.b.stack, s.b.path, err)
	}
	return nil
}

// DeleteGrant removes the record id; a missing one is not an error.
func (s *GrantStore) DeleteGrant(ctx context.Context, id string) error {
	if _, err := s.b.st.deleteGrant.exec(ctx, s.b.stack, id); err != nil {
		return fmt.Errorf("delete grant %s of stack %s in %s: %w", id, s.b.stack, s.b.path, err)
	}
	return nil
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
