package backend

import "context"

// GrantStore keeps a daemon's budget permits and VM-ceiling claims, as
// opaque records by ID, so that a restarted daemon restores what it granted.
type GrantStore interface {
	// PutGrant creates or replaces the record id.
	PutGrant(ctx context.Context, id string, body []byte) error
	// DeleteGrant removes the record id; removing one that is absent is
	// not an error.
	DeleteGrant(ctx context.Context, id string) error
	// LoadGrants returns every record of the stack, by ID.
	LoadGrants(ctx context.Context) (map[string][]byte, error)
}
