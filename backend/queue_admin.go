package backend

import (
	"context"
	"errors"
	"time"
)

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

// QueueInfo is what DescribeQueue reports about a live queue.
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
