// Package poolstest provides test doubles of pools.Store for the tests of
// the packages that wrap a store (daemon/internal/records, internal/open).
//
// Not for: production code (it is imported by tests only), nor the tests
// of runtime/pools itself, which cannot import it without a cycle.
package poolstest

import (
	"context"

	"github.com/rpdhq/rpd/runtime/pools"
)

// CreatingStore is a pools.MemoryStore with CreateLease: it records the
// lease ID of each CreateLease, then stores the record as PutLease does,
// so that a test sees which writes reached the store as creates.
type CreatingStore struct {
	pools.MemoryStore
	Created []string
}

// CreateLease records rec's lease ID and stores rec.
func (c *CreatingStore) CreateLease(ctx context.Context, rec pools.LeaseRecord) error {
	c.Created = append(c.Created, rec.LeaseID)
	return c.PutLease(ctx, rec)
}
