package backend

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

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

// DeleteGrants removes the records ids from s, as DeleteGrant each. A store
// that can delete many in one call (a method DeleteGrants(ctx, ids) error,
// as backend/local's has) gets them in one; any other gets one DeleteGrant
// per ID, up to 64 at once, so that a backend with group commit still
// writes them together. It returns once every delete is done, with the
// failures joined, each naming its ID.
func DeleteGrants(ctx context.Context, s GrantStore, ids []string) error {
	if b, ok := s.(interface {
		DeleteGrants(ctx context.Context, ids []string) error
	}); ok {
		return b.DeleteGrants(ctx, ids)
	}
	if len(ids) == 1 {
		return namedGrant(ids[0], s.DeleteGrant(ctx, ids[0]))
	}
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for start := 0; start < len(ids); start += deleteConcurrency {
		for i := start; i < min(start+deleteConcurrency, len(ids)); i++ {
			wg.Go(func() { errs[i] = namedGrant(ids[i], s.DeleteGrant(ctx, ids[i])) })
		}
		wg.Wait()
	}
	return errors.Join(errs...)
}

// deleteConcurrency bounds the deletes DeleteGrants has under way at once
// on a store without a batch delete.
const deleteConcurrency = 64

// namedGrant makes sure err names the record id it is about.
func namedGrant(id string, err error) error {
	if err == nil || strings.Contains(err.Error(), id) {
		return err
	}
	return fmt.Errorf("delete grant %s: %w", id, err)
}
