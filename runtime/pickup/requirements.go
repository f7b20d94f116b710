package pickup

import (
	"errors"
	"fmt"
	"path"
	"time"
)

// Requirements are one request's compute constraints. Zero fields do not
// constrain.
type Requirements struct {
	UsageClass    string   // UsageSpot, UsageOnDemand or "" for either
	InstanceTypes []string // path.Match patterns ("c6i.*", "m?i.large"); empty allows any
	MinCPU        int
	MinMemMiB     int
	ResourceClass string // exact label, "" for any
	// Wait is how long the request may wait (0..MaxWait) for a matching
	// runner to appear before it is answered exhausted: a caller that would
	// rather wait a few seconds than launch a VM says so here.
	Wait time.Duration
}

// Validate reports impossible requirements.
func (r Requirements) Validate() error {
	var errs []error
	if r.UsageClass != "" && r.UsageClass != UsageSpot && r.UsageClass != UsageOnDemand {
		errs = append(errs, fmt.Errorf("usage class %q is neither %q, %q nor empty", r.UsageClass, UsageSpot, UsageOnDemand))
	}
	for _, p := range r.InstanceTypes {
		if _, err := path.Match(p, ""); err != nil {
			errs = append(errs, fmt.Errorf("instance type pattern %q does not compile: %w", p, err))
		}
	}
	if r.Wait < 0 || r.Wait > MaxWait {
		errs = append(errs, fmt.Errorf("wait %v is outside 0..%v", r.Wait, MaxWait))
	}
	if r.MinCPU < 0 || r.MinMemMiB < 0 {
		errs = append(errs, fmt.Errorf("minimum cpu %d and mem %d must not be negative", r.MinCPU, r.MinMemMiB))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pickup: invalid requirements: %w", err)
	}
	return nil
}

// Matches reports whether e meets every constraint of r.
func (r Requirements) Matches(e Entry) bool {
	if r.UsageClass != "" && e.UsageClass != r.UsageClass {
		return false
	}
	if e.CPU < r.MinCPU || e.MemMiB < r.MinMemMiB {
		return false
	}
	if r.ResourceClass != "" && e.ResourceClass != r.ResourceClass {
		return false
	}
	return len(r.InstanceTypes) == 0 || matchAny(r.InstanceTypes, e.InstanceType)
}

// matchAny reports whether name matches one of patterns; the patterns were
// validated, so match errors cannot occur.
func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// Outcome is the classification of one message for a set of requests.
type Outcome int

const (
	PassOn  Outcome = iota // meets a request's constraints
	Requeue                // valid, but not for this request
	Discard                // unusable for anyone
)

func (o Outcome) String() string {
	switch o {
	case PassOn:
		return "pass-on"
	case Requeue:
		return "requeue"
	case Discard:
		return "discard"
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// MaxThresholdAhead is how far past now an entry's threshold may lie. No
// idle runner waits a year for work, and a far-future time is a unit
// mistake or an attack: a threshold beyond the backends' stored range (year
// 2262) used to wrap into the past and lose the runner.
const MaxThresholdAhead = 366 * 24 * time.Hour

// validEntry parses body and checks it against the class c: a message to
// discard fails with why (and the entry, when it parsed).
func validEntry(c *Config, body string, now time.Time) (Entry, *DiscardError) {
	e, err := ParseEntry(body)
	if err != nil {
		return Entry{}, err.(*DiscardError)
	}
	return e, checkClass(c, e, now)
}

// checkClass returns a *DiscardError when e contradicts the runner class c,
// has expired at now or has a threshold more than MaxThresholdAhead away,
// nil when e is a valid entry of the class.
func checkClass(c *Config, e Entry, now time.Time) *DiscardError {
	mismatch := func(format string, args ...any) *DiscardError {
		return &DiscardError{Reason: ReasonClassMismatch, InstanceID: e.InstanceID, Detail: fmt.Sprintf(format, args...)}
	}
	if c.CPU > 0 && e.CPU != c.CPU {
		return mismatch("cpu %d, but class %q declares %d", e.CPU, c.Class, c.CPU)
	}
	if c.Mem > 0 && uint64(e.MemMiB)<<20 != c.Mem {
		return mismatch("mem %d MiB, but class %q declares %d bytes", e.MemMiB, c.Class, c.Mem)
	}
	if len(c.InstanceTypes) > 0 && !matchAny(c.InstanceTypes, e.InstanceType) {
		return mismatch("instance type %q is not among class %q's %v", e.InstanceType, c.Class, c.InstanceTypes)
	}
	if !e.Threshold.After(now) {
		return &DiscardError{Reason: ReasonExpired, InstanceID: e.InstanceID, Detail: fmt.Sprintf("threshold %s is not after %s", e.Threshold.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))}
	}
	if e.Threshold.After(now.Add(MaxThresholdAhead)) {
		return &DiscardError{Reason: ReasonMalformed, InstanceID: e.InstanceID, Detail: fmt.Sprintf("threshold %s is more than %v after %s; use a time within a year", e.Threshold.UTC().Format(time.RFC3339), MaxThresholdAhead, now.UTC().Format(time.RFC3339))}
	}
	return nil
}

// Classify decides one message body for one request, as the manager does:
// Discard (with the *DiscardError) when the body is malformed, contradicts
// the class c or has expired at now; PassOn when it meets r; Requeue
// otherwise.
func Classify(c Config, r Requirements, body string, now time.Time) (Outcome, Entry, error) {
	c = c.withDefaults()
	e, d := validEntry(&c, body, now)
	if d != nil {
		return Discard, e, d
	}
	if r.Matches(e) {
		return PassOn, e, nil
	}
	return Requeue, e, nil
}
