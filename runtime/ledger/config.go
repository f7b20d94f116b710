package ledger

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// MaxCount bounds every figure the ledger takes: Config.Max, a usage
// figure, a request's or a restored claim's Count. No provider runs more VMs;
// the bound keeps every sum the ledger forms far from overflowing, and a
// figure above it is a broken source, refused like a negative one.
const MaxCount = math.MaxInt32

// GrantMode says when a waiting request may be granted.
type GrantMode string

// Grant modes. The names match the vm_ceiling block's grant attribute.
const (
	// GrantNextUsage is the default: a request that
	// arrives between usage figures waits, and only the arrival of the next
	// figure grants waiting requests (as many as fit, in FIFO order).
	GrantNextUsage GrantMode = "next_usage"
	// GrantImmediate grants at once whenever the ledger shows room; waiting
	// requests are granted as soon as room appears (a cancel, an expiry, a
	// figure).
	GrantImmediate GrantMode = "immediate"
)

// Defaults applied by Config.WithDefaults to zero fields (docs/language.md, vm_ceiling).
const (
	DefaultClaimTTL     = 2 * time.Minute
	DefaultPollInterval = 5 * time.Second
	DefaultStaleAfter   = 30 * time.Second
)

// ErrInvalidConfig is wrapped by every error Config.Validate returns.
var ErrInvalidConfig = errors.New("ledger: invalid config")

// Config describes one VM ceiling. The zero value of every field except Max
// means "use the default".
type Config struct {
	// Max is the ceiling: provider-active VMs plus counting local claims
	// never exceed it through a grant. Must be > 0.
	Max int
	// ClaimTTL is how long an unconfirmed claim counts (default 2m). It must
	// exceed StaleAfter: a claim may only lapse once a fresh figure could
	// already show its VM.
	ClaimTTL time.Duration
	// PollInterval is how often Run asks the usage source (default 5s).
	PollInterval time.Duration
	// StaleAfter is how old the last successful figure may be before the
	// ledger grants nothing (default 30s, at least PollInterval).
	StaleAfter time.Duration
	// Grant is GrantNextUsage (default) or GrantImmediate.
	Grant GrantMode
	// MaxQueued caps the waiting requests and tickets; one more fails at
	// once with ErrQueueFull. 0 means unbounded. Lowering it drops no
	// request already waiting.
	MaxQueued int
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.ClaimTTL == 0 {
		c.ClaimTTL = DefaultClaimTTL
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.StaleAfter == 0 {
		c.StaleAfter = DefaultStaleAfter
	}
	if c.Grant == "" {
		c.Grant = GrantNextUsage
	}
	return c
}

// Validate reports the first problem of c after defaults are applied, as an
// error wrapping ErrInvalidConfig. New and Reconfigure run the same check.
func (c Config) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.Max <= 0 || c.Max > MaxCount:
		return fmt.Errorf("%w: max is %d; set it to the provider's VM limit (1..%d)", ErrInvalidConfig, c.Max, MaxCount)
	case c.ClaimTTL < 0, c.PollInterval < 0, c.StaleAfter < 0:
		return fmt.Errorf("%w: durations must not be negative (claim_ttl %v, poll_interval %v, stale_after %v)",
			ErrInvalidConfig, c.ClaimTTL, c.PollInterval, c.StaleAfter)
	case c.StaleAfter < c.PollInterval:
		return fmt.Errorf("%w: stale_after %v is shorter than poll_interval %v; every figure would be stale before the next poll",
			ErrInvalidConfig, c.StaleAfter, c.PollInterval)
	case c.ClaimTTL <= c.StaleAfter:
		return fmt.Errorf("%w: claim_ttl %v must exceed stale_after %v, or a claim could lapse before any fresh figure shows its VM",
			ErrInvalidConfig, c.ClaimTTL, c.StaleAfter)
	case c.MaxQueued < 0:
		return fmt.Errorf("%w: max queued %d; use 0 for unbounded", ErrInvalidConfig, c.MaxQueued)
	case c.Grant != GrantNextUsage && c.Grant != GrantImmediate:
		return fmt.Errorf("%w: grant mode %q; use %q or %q", ErrInvalidConfig, c.Grant, GrantNextUsage, GrantImmediate)
	}
	return nil
}
