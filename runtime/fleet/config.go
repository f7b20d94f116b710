package fleet

import (
	"errors"
	"fmt"
	"time"
)

// Lifecycles of a launch.
const (
	Spot     = "spot"
	OnDemand = "on-demand"
)

// Starts is a schedule's start times: the next start strictly after t.
// robfig/cron's Schedule (what spec.ParseCron returns) is one.
type Starts interface {
	Next(t time.Time) time.Time
}

// Schedule raises a class's warm runners to MinIdle for Duration from each
// of its start times.
type Schedule struct {
	Name     string
	Starts   Starts
	Duration time.Duration
	MinIdle  int
}

// Active reports whether the schedule covers now: it started within the
// last Duration.
func (s Schedule) Active(now time.Time) bool {
	if s.Starts == nil || s.Duration <= 0 {
		return false
	}
	start := s.Starts.Next(now.Add(-s.Duration))
	return !start.IsZero() && !start.After(now)
}

// Config is one class's fleet as the engine sees it.
type Config struct {
	Class     string
	MinIdle   int
	Schedules []Schedule
	// MaxIdleAge terminates an idle runner idle this long; 0 = never.
	MaxIdleAge  time.Duration
	BootTimeout time.Duration
	OrphanGrace time.Duration
	// MaxLaunch bounds the VMs one pass launches.
	MaxLaunch int
}

// ErrInvalidConfig is wrapped by every error Config.Validate returns.
var ErrInvalidConfig = errors.New("fleet: invalid configuration")

// Validate reports the first problem of c.
func (c Config) Validate() error {
	switch {
	case c.Class == "":
		return fmt.Errorf("%w: no class name", ErrInvalidConfig)
	case c.MinIdle < 0:
		return fmt.Errorf("%w: min_idle %d is negative", ErrInvalidConfig, c.MinIdle)
	case c.BootTimeout <= 0 || c.OrphanGrace <= 0:
		return fmt.Errorf("%w: boot_timeout and orphan_grace must be positive", ErrInvalidConfig)
	case c.MaxIdleAge < 0:
		return fmt.Errorf("%w: max_idle_age is negative", ErrInvalidConfig)
	case c.MaxLaunch < 1:
		return fmt.Errorf("%w: max_launch %d must be at least 1", ErrInvalidConfig, c.MaxLaunch)
	}
	for _, s := range c.Schedules {
		if s.Starts == nil || s.Duration <= 0 || s.MinIdle < 0 {
			return fmt.Errorf("%w: schedule %q needs start times, a positive duration and a min_idle >= 0", ErrInvalidConfig, s.Name)
		}
	}
	return nil
}

// Desired is how many idle runners the class wants at now: the largest
// min_idle of the base and the active schedules, and the schedule that set
// it ("" when the base did).
func (c Config) Desired(now time.Time) (int, string) {
	n, by := c.MinIdle, ""
	for _, s := range c.Schedules {
		if s.MinIdle > n && s.Active(now) {
			n, by = s.MinIdle, s.Name
		}
	}
	return n, by
}
