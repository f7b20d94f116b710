package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/runtime/fatjob"
	"github.com/rpdhq/rpd/runtime/ledger"
	"github.com/rpdhq/rpd/runtime/pools"
)

// ErrShuttingDown: the daemon stopped while the request waited.
var ErrShuttingDown = errors.New("the daemon is shutting down; retry against its replacement")

// WaitTimedOut is the 408 of a request that waited its wait_seconds in a
// queue without a grant; what names the request.
func WaitTimedOut(what string, wait time.Duration) *Error {
	return &Error{Status: http.StatusRequestTimeout, Code: api.CodeTimeout,
		Msg: fmt.Sprintf("%s waited %v in the queue and was not granted; nothing is held: retry, or pass a longer wait_seconds", what, wait)}
}

// Classify maps an error of a runtime package to its HTTP status and API
// code. The table is the one of docs/api.md; anything unknown is a 500.
func Classify(err error) *Error {
	st := func(status int, code string) *Error {
		return &Error{Status: status, Code: code, Msg: err.Error()}
	}
	switch {
	case errors.Is(err, pools.ErrUnknownPool), errors.Is(err, pools.ErrUnknownLease),
		errors.Is(err, pools.ErrLeaseExpired), errors.Is(err, pools.ErrLeaseReleased):
		return st(http.StatusNotFound, api.CodeNotFound)
	case errors.Is(err, pools.ErrInvalidRequest), errors.Is(err, ledger.ErrInvalidRequest):
		return st(http.StatusBadRequest, api.CodeBadRequest)
	case errors.Is(err, pools.ErrQueueFull), errors.Is(err, ledger.ErrQueueFull), errors.Is(err, fatjob.ErrQueueFull):
		return st(http.StatusTooManyRequests, api.CodeQueueFull)
	case errors.Is(err, pools.ErrTimeout):
		return st(http.StatusRequestTimeout, api.CodeTimeout)
	case errors.Is(err, pools.ErrExceedsCapacity), errors.Is(err, ledger.ErrTooLarge),
		errors.Is(err, ledger.ErrUnavailable), errors.Is(err, ledger.ErrClaimEnded):
		return st(http.StatusConflict, api.CodeUnavailable)
	case LostLeadership(err):
		return st(http.StatusServiceUnavailable, api.CodeNotLeader)
	case errors.Is(err, ErrShuttingDown):
		return st(http.StatusServiceUnavailable, api.CodeNotReady)
	case errors.Is(err, context.DeadlineExceeded):
		return st(http.StatusRequestTimeout, api.CodeTimeout)
	case errors.Is(err, context.Canceled):
		// The client went away; nobody reads this answer.
		return st(499, "cancelled")
	}
	return st(http.StatusInternalServerError, api.CodeInternal)
}

// LostLeadership reports whether err says this daemon may no longer write
// grant records: the client must retry at the leader (503 not_leader).
func LostLeadership(err error) bool {
	return errors.Is(err, backend.ErrFenced) || errors.Is(err, ErrNotLeader)
}

// ErrNotLeader: a grant was asked of (or a record written by) a daemon that
// does not lead the stack, or whose lease ran out unrenewed. It answers 503
// not_leader, like backend.ErrFenced.
var ErrNotLeader = errors.New("this daemon does not lead the stack (it is a standby, or its leader lease lapsed); retry, the standbys forward to the leader")
