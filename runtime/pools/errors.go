package pools

import "errors"

// Sentinel errors. Every error returned by this package wraps at most one of
// them, so callers test with errors.Is; the message around it names the pool,
// task or lease concerned and says what to do.
var (
	// ErrUnknownPool: the named pool does not exist (or was deleted while
	// the call was in flight). Acquire never waits on an unknown pool.
	ErrUnknownPool = errors.New("unknown pool")
	// ErrPoolExists: CreatePool was given the name of an existing pool.
	ErrPoolExists = errors.New("pool already exists")
	// ErrPoolInUse: DeletePool was called while slots are held or requests
	// are queued.
	ErrPoolInUse = errors.New("pool in use")
	// ErrDefaultPool: the default pool cannot be deleted.
	ErrDefaultPool = errors.New("default pool cannot be deleted")
	// ErrInvalidPool: a pool name or setting is out of range.
	ErrInvalidPool = errors.New("invalid pool configuration")
	// ErrInvalidRequest: a Request field is out of range.
	ErrInvalidRequest = errors.New("invalid request")
	// ErrExceedsCapacity: the request needs more slots than the pool has in
	// total, either when it is made or after the pool was shrunk while it
	// waited. Waiting could never succeed.
	ErrExceedsCapacity = errors.New("request exceeds pool capacity")
	// ErrQueueFull: the pool already has MaxQueued waiting requests.
	ErrQueueFull = errors.New("pool queue full")
	// ErrTimeout: the request's own Timeout elapsed before a grant. (A
	// context deadline is reported as the context's error instead.)
	ErrTimeout = errors.New("timed out waiting for pool slots")
	// ErrUnknownLease: no held lease has this ID (it never existed, was
	// released, or expired).
	ErrUnknownLease = errors.New("unknown lease")
	// ErrLeaseReleased: Heartbeat on a lease that was released.
	ErrLeaseReleased = errors.New("lease already released")
	// ErrLeaseExpired: Heartbeat on a lease whose TTL elapsed; its slots
	// were returned to the pool and the holder must acquire again.
	ErrLeaseExpired = errors.New("lease expired")
	// ErrStore: the configured Store failed; the error also wraps the
	// store's own error.
	ErrStore = errors.New("pool store failed")
)
