package pickup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"time"
)

// Mode selects how the manager treats a received message while it decides.
type Mode string

const (
	// ModeLease (the default) keeps a received message in flight under a
	// visibility timeout: a misfit is made visible again after the re-queue
	// delay, a match is deleted only after its claim commits, a discard is
	// deleted. A crash at any point lets the message reappear.
	ModeLease Mode = "lease"
	// ModeDelete is the plain loop: delete on receive, filter in
	// memory, send misfits back with a delay. A crash between the delete and
	// the re-send loses the idle runner.
	ModeDelete Mode = "delete"
)

// Defaults applied by NewManager and Reconfigure to zero fields.
const (
	DefaultRequeueDelay    = 3 * time.Second // docs/language.md, pickup
	DefaultLocalExhaustion = 5               // docs/language.md, pickup
	DefaultVisibility      = 30 * time.Second
	DefaultEmptyConfirm    = time.Second
	DefaultMaxTracked      = 1024
	DefaultClaimAttempts   = 5
	DefaultBackoff         = 50 * time.Millisecond
	DefaultReleaseTimeout  = 10 * time.Second
	DefaultHoldMisfits     = 256
	// MaxBodySize is the largest message body parsed; anything longer is
	// discarded with ReasonTooLarge. A well-formed entry is ~250 bytes.
	MaxBodySize = 64 << 10
)

// NoHold, as Config.HoldMisfits, switches holding off: every misfit is
// given back with the re-queue delay at once, the seed's algorithm.
const NoHold = -1

// Bounds of one Maintain pass.
const (
	// MaxScan bounds the messages one repair scan receives.
	MaxScan = 10000
	// MaxReoffer bounds the idle instances one repair pass re-offers.
	MaxReoffer = 100
	// MaxWait is the longest a request may wait for a runner (SQS's
	// long-poll bound).
	MaxWait = 20 * time.Second
)

// waitPoll is how often a request that waits (Requirements.Wait) looks
// again after finding nothing.
const waitPoll = 250 * time.Millisecond

// ShortPollConfirm, as Config.EmptyConfirmWait, confirms an empty receive
// with a second short poll instead of a long poll. Use it only with backends
// whose short polls see the whole queue (backend/local does; SQS does not).
const ShortPollConfirm time.Duration = -1

// Config is the runner-class configuration one Manager serves. Zero fields
// take the defaults above.
type Config struct {
	// Class is the runner class name; required.
	Class string
	// CPU and Mem are the specs every message of the class must carry (Mem in
	// bytes; messages carry MiB). A message that disagrees is discarded. Zero
	// means "not declared" and is not checked.
	CPU int
	Mem uint64
	// InstanceTypes are the path.Match patterns a message's instanceType must
	// match for the class; empty allows any type.
	InstanceTypes []string

	// Mode is ModeLease (default) or ModeDelete.
	Mode Mode
	// HoldMisfits is how many misfits the manager keeps received, under
	// their visibility timeout, for the requests that come next (lease mode
	// only; default 256; NoHold switches it off). A held misfit is offered to
	// every new request before the queue is asked, and given back at once,
	// never with the re-queue delay, when the bound is reached or it has
	// been held for half of Visibility (at most 15s): so a stream of requests of one kind
	// no longer hides the runners of another kind (docs/pickup.md).
	HoldMisfits int
	// RequeueDelay hides a misfit for this long before others see it again
	// (default 3s, at most 15m). With holding on it applies to no misfit.
	RequeueDelay time.Duration
	// ClaimTTL, when positive, is how long a claim waits for its owner's
	// Confirm: an unconfirmed claim lapses after it, and Maintain returns
	// the instance to idle and offers it again. 0 (the default): claims
	// need no confirmation (the seed's behaviour). At most 24h.
	ClaimTTL time.Duration
	// LocalExhaustion: a request that has seen the same instanceId more than
	// this many times is locally exhausted (default 5).
	LocalExhaustion int
	// MaxTracked bounds a request's frequency map: a request that has met
	// this many distinct misfits is locally exhausted too (default 1024).
	MaxTracked int
	// Visibility is how long a received message stays hidden while it is
	// classified and claimed (default 30s, at most 12h).
	Visibility time.Duration
	// ReceiveWait is the long-poll wait of ordinary receives (default 0, a
	// short poll, at most 20s).
	ReceiveWait time.Duration
	// EmptyConfirmWait guards against SQS's false-empty short polls: an
	// empty receive is confirmed by a second one, made after the manager's
	// own give-backs have landed, before the pool is declared globally
	// exhausted. When the first receive waited less than 1s the second
	// waits EmptyConfirmWait (default 1s; ShortPollConfirm for a second
	// short poll; at most 20s); after a long poll it does not wait.
	EmptyConfirmWait time.Duration
	// ClaimAttempts bounds how often a transient backend error is retried,
	// per call, before the message is released and the error returned
	// (default 5). Backoff is the first retry's delay, doubled each time
	// (default 50ms).
	ClaimAttempts int
	Backoff       time.Duration
	// ReleaseTimeout bounds the calls that give a message back after the
	// request's context is done (default 10s).
	ReleaseTimeout time.Duration
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Mode == "" {
		c.Mode = ModeLease
	}
	setDur := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	setInt := func(n *int, def int) {
		if *n == 0 {
			*n = def
		}
	}
	setDur(&c.RequeueDelay, DefaultRequeueDelay)
	setDur(&c.Visibility, DefaultVisibility)
	setDur(&c.EmptyConfirmWait, DefaultEmptyConfirm)
	setDur(&c.Backoff, DefaultBackoff)
	setDur(&c.ReleaseTimeout, DefaultReleaseTimeout)
	setInt(&c.LocalExhaustion, DefaultLocalExhaustion)
	setInt(&c.MaxTracked, DefaultMaxTracked)
	setInt(&c.ClaimAttempts, DefaultClaimAttempts)
	setInt(&c.HoldMisfits, DefaultHoldMisfits)
	if c.HoldMisfits < 0 || c.Mode == ModeDelete {
		c.HoldMisfits = NoHold // a deleted message cannot be held under a lease
	}
	c.InstanceTypes = append([]string(nil), c.InstanceTypes...)
	return c
}

// Validate reports the first impossible setting of c (after defaults).
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(format, args...))
	}
	if c.Class == "" {
		bad("class name is empty: set Config.Class to the runner class this manager serves")
	}
	if c.CPU < 0 {
		bad("cpu %d is negative", c.CPU)
	}
	if c.Mode != ModeLease && c.Mode != ModeDelete {
		bad("mode %q is unknown: use %q or %q", c.Mode, ModeLease, ModeDelete)
	}
	for _, p := range c.InstanceTypes {
		if _, err := path.Match(p, ""); err != nil {
			bad("instance type pattern %q does not compile: %w", p, err)
		}
	}
	if c.RequeueDelay < 0 || c.RequeueDelay > 15*time.Minute {
		bad("requeue delay %v is outside 0..15m", c.RequeueDelay)
	}
	if c.Visibility < 0 || c.Visibility > 12*time.Hour {
		bad("visibility %v is outside 0..12h", c.Visibility)
	}
	if c.ReceiveWait < 0 || c.ReceiveWait > 20*time.Second {
		bad("receive wait %v is outside 0..20s", c.ReceiveWait)
	}
	if c.EmptyConfirmWait != ShortPollConfirm && (c.EmptyConfirmWait < 0 || c.EmptyConfirmWait > 20*time.Second) {
		bad("empty-confirm wait %v is outside 0..20s (or ShortPollConfirm)", c.EmptyConfirmWait)
	}
	if c.LocalExhaustion < 0 {
		bad("local exhaustion %d is negative", c.LocalExhaustion)
	}
	if c.MaxTracked < 0 {
		bad("max tracked %d is negative", c.MaxTracked)
	}
	if c.ClaimAttempts < 0 {
		bad("claim attempts %d is negative", c.ClaimAttempts)
	}
	if c.ClaimTTL < 0 || c.ClaimTTL > 24*time.Hour {
		bad("claim ttl %v is outside 0..24h", c.ClaimTTL)
	}
	if c.Backoff < 0 || c.ReleaseTimeout < 0 {
		bad("backoff %v and release timeout %v must not be negative", c.Backoff, c.ReleaseTimeout)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pickup: invalid config for class %q: %w", c.Class, err)
	}
	return nil
}

// maxHoldFor bounds how long a misfit stays held, however long the
// visibility timeout: other consumers of the queue should see it soon.
const maxHoldFor = 15 * time.Second

// holdFor is how long a misfit stays held: half its visibility timeout, so
// that it is given back well before the timeout would return it anyway,
// and at most maxHoldFor.
func (c Config) holdFor() time.Duration { return min(c.Visibility/2, maxHoldFor) }

// confirmWait is the wait of the receive that confirms an empty one.
func (c Config) confirmWait() time.Duration {
	if c.EmptyConfirmWait == ShortPollConfirm {
		return 0
	}
	return c.EmptyConfirmWait
}

// Clock is the manager's source of time: Now for thresholds and latencies,
// After for retry backoff.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Options are the manager's collaborators; all are optional.
type Options struct {
	// Logger receives discards (with their reason), lost races and backend
	// trouble. Default: slog.Default().
	Logger *slog.Logger
	// Clock defaults to the wall clock.
	Clock Clock
	// Depth, when set, reports the class queue's approximate depth for
	// Stats (e.g. a QueueAdmin's DescribeQueue visible count).
	Depth func(ctx context.Context) (int, error)
}
