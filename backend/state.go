package backend

import (
	"context"
	"errors"
	"fmt"
	"time"
)

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
	// held under id is an error wrapping ErrLockNotHeld.
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

// ErrLockNotHeld: Renew, Unlock or ForceUnlock named a lock ID that does not
// hold the stack's lock (it was released, forced, or taken over after its
// lease expired).
var ErrLockNotHeld = errors.New("the state lock is not held under this ID")
