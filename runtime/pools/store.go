package pools

import (
	"context"
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
