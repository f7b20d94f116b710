package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// This file declares what reconcile needs from a backend. backend/local and
// backend/aws implement these interfaces.

// QueueAttributes are the managed attributes of one queue.
type QueueAttributes struct {
	VisibilityTimeout time.Duration
	Retention         time.Duration
	Delay             time.Duration
	Tags              map[string]string // rpd sets StackTag
}

// StackTag is the tag key that marks a queue (or table) as managed by an rpd
// stack; its value is the stack name.
const StackTag = "rpd:stack"

// QueueInfo is what Describe reports about a live queue.
type QueueInfo struct {
	Name       string
	URL        string // backend-specific locator ("sqlite://…" or the SQS URL)
	Attributes QueueAttributes
	// Approximate counts, as SQS reports them.
	Visible  int
	InFlight int
	Delayed  int
}

// QueueAdmin is the control plane of a backend's queues.
type QueueAdmin interface {
	// CreateQueue creates a queue with attrs (tags included). Creating a
	// queue that already exists with the same attributes succeeds.
	CreateQueue(ctx context.Context, name string, attrs QueueAttributes) error
	// UpdateQueue sets attrs on an existing queue (tags merged).
	UpdateQueue(ctx context.Context, name string, attrs QueueAttributes) error
	// DeleteQueue deletes a queue and its messages.
	DeleteQueue(ctx context.Context, name string) error
	// DescribeQueue returns the queue or an error wrapping ErrQueueNotFound.
	DescribeQueue(ctx context.Context, name string) (QueueInfo, error)
	// ListQueues returns the names of the queues whose name starts with prefix, sorted.
	ListQueues(ctx context.Context, prefix string) ([]string, error)
}

// ErrQueueNotFound: no queue of that name.
var ErrQueueNotFound = errors.New("queue does not exist")

// StateStore holds the stack's versioned runtime document (JSON), which apply
// writes and daemons follow.
type StateStore interface {
	// ReadState returns the document and its version; (nil, 0, nil) when
	// nothing was ever written. A document that exists but cannot be read is
	// an error naming where it lives, never an empty state.
	ReadState(ctx context.Context) (doc []byte, version int64, err error)
	// WriteState stores doc if the current version is expectVersion and
	// returns the new version (expectVersion+1); otherwise it returns an
	// error wrapping ErrVersionConflict and changes nothing.
	WriteState(ctx context.Context, doc []byte, expectVersion int64) (int64, error)
}

// ErrVersionConflict: the state changed since it was read.
var ErrVersionConflict = errors.New("state version conflict: the state was changed by someone else since it was read")

// LockInfo describes a held state lock.
type LockInfo struct {
	ID        string // unique per acquisition
	Who       string // user@host
	Operation string // "apply", "watch", …
	Created   time.Time
	Expires   time.Time // the lease; renewed by Renew
}

// Locker is the stack's state lock: a lease that expires unless renewed.
type Locker interface {
	// Lock takes the lock for ttl. When another live holder has it, the
	// error is a *LockedError carrying the holder's info. An expired lock is
	// taken over.
	Lock(ctx context.Context, info LockInfo, ttl time.Duration) (LockInfo, error)
	// Renew extends the lease of the lock held under id.
	Renew(ctx context.Context, id string, ttl time.Duration) error
	// Unlock releases the lock held under id; releasing a lock that is not
	// held under id is an error.
	Unlock(ctx context.Context, id string) error
	// ForceUnlock removes the lock whatever its holder, if its ID is id.
	ForceUnlock(ctx context.Context, id string) error
}

// LockedError: the state lock is held by someone else.
type LockedError struct {
	Holder LockInfo
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("state is locked by %s (operation %q, lock ID %s, since %s, lease until %s); wait for it to finish, or run `rpd force-unlock %s` if that process is gone",
		e.Holder.Who, e.Holder.Operation, e.Holder.ID, e.Holder.Created.Format(time.RFC3339), e.Holder.Expires.Format(time.RFC3339), e.Holder.ID)
}
