package reconcile

import "time"

// Clock is the time source of Apply (lock retries, lease renewal,
// "Still creating..." events). Tests inject a fake one.
type Clock interface {
	Now() time.Time
	// After is time.After.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
