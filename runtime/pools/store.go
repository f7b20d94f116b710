package pools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// LeaseRecord is the durable form of one granted lease, written through a
// Store so that a restarted process still counts slots held by workers that
// outlived it.
type LeaseRecord struct {
	LeaseID   string
	Pool      string
	TaskID    string
	Priority  int
	Slots     int
	GrantedAt time.Time
	ExpiresAt time.Time // zero = no TTL
	// TTL is the lease's time to live, which each heartbeat adds to its
	// time; zero = none, or a record written before the field existed
	// (Restore then derives it). Heartbeats move ExpiresAt but not
	// GrantedAt, so the TTL cannot be derived from the two.
	TTL time.Duration
	// Owner is Request.Owner: who took the lease ("" for nobody named).
	Owner string
}

// Store persists leases. Implementations: MemoryStore (this package),
// backend/local (SQLite) and backend/aws (DynamoDB).
type Store interface {
	// PutLease creates or replaces a record (grant, heartbeat).
	PutLease(ctx context.Context, rec LeaseRecord) error
	// DeleteLease removes a record; deleting a missing record is not an error.
	DeleteLease(ctx context.Context, leaseID string) error
	// LoadLeases returns every record, in no particular order.
	LoadLeases(ctx context.Context) ([]LeaseRecord, error)
}

// CreateLease writes the record of a lease granted just now, as PutLease
// does. A store that has a method CreateLease(ctx, rec) error (backend/local's
// PoolStore) gets that instead: it is told that no record of rec.LeaseID
// was ever written before, so that a store which applies its writes in
// batches may drop a record created and deleted within one batch. Manager
// calls it for each grant, and PutLease for later writes (heartbeats).
func CreateLease(ctx context.Context, s Store, rec LeaseRecord) error {
	if c, ok := s.(interface {
		CreateLease(ctx context.Context, rec LeaseRecord) error
	}); ok {
		return c.CreateLease(ctx, rec)
	}
	return s.PutLease(ctx, rec)
}

// DeleteLeases removes the records ids from s, as DeleteLease each. A store
// that can delete many in one call (a method DeleteLeases(ctx, ids) error,
// as backend/local's has) gets them in one; any other gets one DeleteLease
// per ID, up to 64 at once, so that a backend with group
// commit still writes them together. It returns once every delete is
// done, with the failures joined, each naming its ID.
func DeleteLeases(ctx context.Context, s Store, ids []string) error {
	if b, ok := s.(interface {
		DeleteLeases(ctx context.Context, ids []string) error
	}); ok {
		return b.DeleteLeases(ctx, ids)
	}
	return deleteEach(ctx, "delete pool lease", ids, s.DeleteLease)
}

// deleteConcurrency bounds the deletes DeleteLeases has under way at once
// on a store without a batch delete.
const deleteConcurrency = 64

func deleteEach(ctx context.Context, verb string, ids []string, del func(context.Context, string) error) error {
	if len(ids) == 1 {
		return named(verb, ids[0], del(ctx, ids[0]))
	}
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for start := 0; start < len(ids); start += deleteConcurrency {
		for i := start; i < min(start+deleteConcurrency, len(ids)); i++ {
			wg.Go(func() { errs[i] = named(verb, ids[i], del(ctx, ids[i])) })
		}
		wg.Wait()
	}
	return errors.Join(errs...)
}

// named makes sure err names the record id it is about.
func named(verb, id string, err error) error {
	if err == nil || strings.Contains(err.Error(), id) {
		return err
	}
	return fmt.Errorf("%s %s: %w", verb, id, err)
}
