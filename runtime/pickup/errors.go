package pickup

import (
	"errors"
	"fmt"
)

// ErrExhausted: the pool has no idle instance for the request. Pickup
// returns it as an *ExhaustedError that says which kind; the caller falls
// back to fresh capacity (docs/language.md, "The queue message").
var ErrExhausted = errors.New("pickup: pool exhausted")

// Exhaustion is the kind of an ErrExhausted.
type Exhaustion int

const (
	// Global: the queue returned nothing, confirmed by a long poll or a
	// second receive.
	Global Exhaustion = iota + 1
	// Local: this request kept meeting the same misfits (one instanceId seen
	// more than Config.LocalExhaustion times, or Config.MaxTracked distinct
	// misfits).
	Local
)

func (k Exhaustion) String() string {
	switch k {
	case Global:
		return "global"
	case Local:
		return "local"
	}
	return fmt.Sprintf("exhaustion(%d)", int(k))
}

// ExhaustedError is the typed form of ErrExhausted.
type ExhaustedError struct {
	Class string
	Kind  Exhaustion
	// For Local: the instance whose sightings tripped the limit ("" when the
	// frequency map was full) and how often it was seen.
	InstanceID string
	Seen       int
}

func (e *ExhaustedError) Error() string {
	switch {
	case e.Kind == Local && e.InstanceID != "":
		return fmt.Sprintf("pickup: class %q locally exhausted for this request: instance %s seen %d times without fitting; provision fresh capacity", e.Class, e.InstanceID, e.Seen)
	case e.Kind == Local:
		return fmt.Sprintf("pickup: class %q locally exhausted for this request: %d distinct misfits seen; provision fresh capacity", e.Class, e.Seen)
	}
	return fmt.Sprintf("pickup: class %q globally exhausted: its queue is empty; provision fresh capacity", e.Class)
}

// Is makes errors.Is(err, ErrExhausted) hold.
func (e *ExhaustedError) Is(target error) bool { return target == ErrExhausted }

// UncertainClaimError: Pickup gave up on a claim after transient errors,
// the claim may have committed, and undoing it failed too. The instance may
// therefore be recorded as claimed by Owner; its message was given back.
// Release(ctx, InstanceID, Owner, ReOffer) returns it to the pool (a failed
// condition then means it was never claimed).
type UncertainClaimError struct {
	InstanceID, Owner string
	Err               error
}

func (e *UncertainClaimError) Error() string {
	return fmt.Sprintf("pickup: claim of instance %s by %q may have committed and could not be undone; Release it: %v", e.InstanceID, e.Owner, e.Err)
}

func (e *UncertainClaimError) Unwrap() error { return e.Err }
