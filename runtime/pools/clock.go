package pools

import "time"

// Clock is the time source of a Manager: lease expiry and request timeouts
// are driven by it, so tests inject a fake and never sleep.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed, like
	// time.AfterFunc.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is the handle AfterFunc returns; *time.Timer satisfies it.
type Timer interface {
	Stop() bool
	Reset(d time.Duration) bool
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// AfterFunc wraps time.AfterFunc.
func (SystemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

var _ Clock = SystemClock{}
