package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Reading is one usage figure: Active VMs at the provider, as of At. A zero
// At means "as of when the ledger started asking", which is the safe reading
// for a source that measures on request.
type Reading struct {
	Active int
	At     time.Time
}

// UsageSource reports how many VMs the provider counts as active. An error
// means "no figure": the ledger never treats a failure as zero.
type UsageSource interface {
	Usage(ctx context.Context) (Reading, error)
}

var (
	_ UsageSource = (*HTTPSource)(nil)
	_ UsageSource = (*ManualSource)(nil)
)

// ErrNoUsage is returned by a ManualSource that has not been given a figure.
var ErrNoUsage = errors.New("ledger: no usage figure has been pushed yet")

// ManualSource is a UsageSource whose figure is set by hand: by tests, or by
// an operator who pushes the provider's count. Each figure keeps the time it
// was set, so a figure that is not refreshed goes stale in the ledger instead
// of looking new on every poll. Safe for concurrent use.
type ManualSource struct {
	clock Clock

	mu  sync.Mutex
	r   Reading
	set bool
}

// NewManualSource returns a source with no figure; clock stamps SetUsage
// (nil means SystemClock()).
func NewManualSource(clock Clock) *ManualSource {
	if clock == nil {
		clock = SystemClock()
	}
	return &ManualSource{clock: clock}
}

// SetUsage records n active VMs as of now. A negative n is refused and
// changes nothing.
func (s *ManualSource) SetUsage(n int) error {
	if n < 0 {
		return fmt.Errorf("ledger: usage figure %d is negative; push a count >= 0", n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.r = Reading{Active: n, At: s.clock.Now()}
	s.set = true
	return nil
}

// Usage returns the last figure set, or ErrNoUsage.
func (s *ManualSource) Usage(ctx context.Context) (Reading, error) {
	if err := ctx.Err(); err != nil {
		return Reading{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.set {
		return Reading{}, ErrNoUsage
	}
	return s.r, nil
}
