package pickup

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"
)

// This file declares what the pickup manager needs from a backend. Both
// backend/local (SQLite) and backend/aws (SQS + DynamoDB) implement these
// interfaces; tests may use an in-memory fake.

// Message is one message received from a runner-class queue.
type Message struct {
	ID            string // backend message ID
	Body          string
	ReceiptHandle string // valid until the message is received again or deleted
	ReceiveCount  int    // 1 on first delivery
}

// Queue is the data plane of one runner class's queue, with SQS semantics:
// per-message delay, visibility timeout, receipt handles that become invalid
// once the message is received again, at-least-once delivery.
type Queue interface {
	// Send enqueues body, invisible for delay (0..15m).
	Send(ctx context.Context, body string, delay time.Duration) error
	// Receive returns up to max (1..10) visible messages and hides them for
	// visibility. It waits up to wait (0..20s) for at least one message
	// (long poll); an empty result with a nil error means the queue had none.
	Receive(ctx context.Context, max int, visibility, wait time.Duration) ([]Message, error)
	// Delete removes a received message. A handle that is no longer valid
	// (the message was received again, or already deleted) returns an error
	// wrapping ErrStaleHandle.
	Delete(ctx context.Context, receiptHandle string) error
	// ChangeVisibility makes a received message visible again after timeout
	// (0 = at once). A stale handle returns an error wrapping ErrStaleHandle.
	ChangeVisibility(ctx context.Context, receiptHandle string, timeout time.Duration) error
	// DeleteBatch and ChangeVisibilityBatch act on up to 10 handles in one
	// call. Entries fail independently: the returned error, if any, is a
	// *BatchError naming each failed handle.
	DeleteBatch(ctx context.Context, receiptHandles []string) error
	ChangeVisibilityBatch(ctx context.Context, receiptHandles []string, timeout time.Duration) error
}

// ErrStaleHandle: a receipt handle no longer refers to an in-flight delivery.
var ErrStaleHandle = errors.New("receipt handle is stale: the message was received again or deleted")

// BatchError reports the entries of a batch call that failed.
type BatchError struct {
	Failed map[string]error // receipt handle -> cause
}

func (e *BatchError) Error() string {
	handles := make([]string, 0, len(e.Failed))
	for h := range e.Failed {
		handles = append(handles, h)
	}
	sort.Strings(handles)
	if len(handles) == 0 {
		return "batch: no entries failed"
	}
	return fmt.Sprintf("batch: %d of the entries failed, first %s: %v", len(handles), handles[0], e.Failed[handles[0]])
}

// State is an instance's lifecycle state in the instance table.
type State string

const (
	StateIdle    State = "idle"
	StateClaimed State = "claimed"
	StateRetired State = "retired"
	// StateTerminating: taken out of the pool to be terminated (a fleet's
	// scale-down or reaping, Manager.Withdraw); no claim matches it.
	StateTerminating State = "terminating"
)

// Instance is one record of the instance table, keyed by ID.
type Instance struct {
	ID            string
	Class         string // runner class name
	State         State
	Owner         string // claimant; "" when idle
	UsageClass    string // "spot" | "on-demand"
	InstanceType  string
	CPU           int
	MemMiB        int
	ResourceClass string
	Threshold     time.Time // the idle entry expires at this instant
	UpdatedAt     time.Time
	// ClaimExpires is the deadline of an unconfirmed claim: unless its owner
	// confirms it by then, the claim lapses and the instance is idle again
	// (Manager.Maintain). Zero: no deadline (confirmed, Config.ClaimTTL off,
	// or not claimed).
	ClaimExpires time.Time
}

// Transition is a conditional state change of one instance record. It
// succeeds only if, atomically: the record exists, its state is From, its
// owner equals ExpectOwner ("" = no owner), when Now is non-zero its
// Threshold is after Now, and when LapsedBy is non-zero its ClaimExpires is
// set and not after LapsedBy. On success the record's state becomes To, its
// owner Owner, its ClaimExpires ClaimExpires (zero clears it), and UpdatedAt
// Now (or the backend's clock when Now is zero).
type Transition struct {
	ID           string
	From, To     State
	ExpectOwner  string
	Owner        string
	Now          time.Time
	LapsedBy     time.Time
	ClaimExpires time.Time
}

// InstanceTable is the table of instances with atomic conditional transitions.
type InstanceTable interface {
	// Put creates or replaces a record unconditionally.
	Put(ctx context.Context, inst Instance) error
	// Get returns a record or an error wrapping ErrNotFound.
	Get(ctx context.Context, id string) (Instance, error)
	// Transition applies t atomically and returns the new record. When a
	// condition does not hold (someone else won, or the record is stale or
	// missing) the error wraps ErrConditionFailed; any other error is
	// transient and the caller may retry. The two are never conflated.
	Transition(ctx context.Context, t Transition) (Instance, error)
	// List returns the records of one class in one state ("" = any state),
	// ordered by ID.
	List(ctx context.Context, class string, state State) ([]Instance, error)
	// ClaimedBy returns the records of one class claimed by owner, ordered
	// by ID: how a retried pickup finds the instance its first attempt
	// claimed. It must see every committed claim (a consistent read).
	ClaimedBy(ctx context.Context, class, owner string) ([]Instance, error)
}

var (
	// ErrConditionFailed: a Transition's condition did not hold.
	ErrConditionFailed = errors.New("instance transition condition failed")
	// ErrNotFound: no such instance record.
	ErrNotFound = errors.New("instance not found")
)
