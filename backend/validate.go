package backend

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Limits shared by both backends; they are SQS's.
const (
	MaxQueueNameLen   = 80
	MaxVisibility     = 12 * time.Hour
	MinRetention      = time.Minute
	MaxRetention      = 14 * 24 * time.Hour
	DefaultRetention  = 4 * 24 * time.Hour
	MaxDelay          = 15 * time.Minute
	MaxWait           = 20 * time.Second
	MaxBatch          = 10
	MaxMessageBytes   = 256 * 1024
	DefaultVisibility = 30 * time.Second
)

// ValidateQueueName reports whether name is a valid queue name: 1..80
// characters of [A-Za-z0-9_-].
func ValidateQueueName(name string) error {
	if name == "" || len(name) > MaxQueueNameLen {
		return fmt.Errorf("queue name %q: must be 1..%d characters", name, MaxQueueNameLen)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("queue name %q: only letters, digits, '-' and '_' are allowed", name)
		}
	}
	return nil
}

// NormalizeQueueAttributes validates attrs and returns them with defaults
// filled in: a zero Retention means DefaultRetention. Durations must be whole
// seconds, because SQS counts in seconds.
func NormalizeQueueAttributes(attrs QueueAttributes) (QueueAttributes, error) {
	if attrs.Retention == 0 {
		attrs.Retention = DefaultRetention
	}
	check := func(what string, d, lo, hi time.Duration) error {
		if d < lo || d > hi {
			return fmt.Errorf("queue %s %v: must be between %v and %v", what, d, lo, hi)
		}
		if d%time.Second != 0 {
			return fmt.Errorf("queue %s %v: must be a whole number of seconds", what, d)
		}
		return nil
	}
	if err := check("visibility timeout", attrs.VisibilityTimeout, 0, MaxVisibility); err != nil {
		return attrs, err
	}
	if err := check("retention", attrs.Retention, MinRetention, MaxRetention); err != nil {
		return attrs, err
	}
	if err := check("delay", attrs.Delay, 0, MaxDelay); err != nil {
		return attrs, err
	}
	tags := make(map[string]string, len(attrs.Tags))
	for k, v := range attrs.Tags {
		if k == "" {
			return attrs, errors.New("queue tag with an empty key")
		}
		tags[k] = v
	}
	attrs.Tags = tags
	return attrs, nil
}

// ValidateSend checks the arguments of Queue.Send.
func ValidateSend(body string, delay time.Duration) error {
	if body == "" {
		return errors.New("send: empty message body")
	}
	if len(body) > MaxMessageBytes {
		return fmt.Errorf("send: message body is %d bytes, the limit is %d", len(body), MaxMessageBytes)
	}
	if delay < 0 || delay > MaxDelay {
		return fmt.Errorf("send: delay %v must be between 0 and %v", delay, MaxDelay)
	}
	return nil
}

// ValidateReceive checks the arguments of Queue.Receive.
func ValidateReceive(max int, visibility, wait time.Duration) error {
	if max < 1 || max > MaxBatch {
		return fmt.Errorf("receive: max %d must be between 1 and %d", max, MaxBatch)
	}
	if visibility < 0 || visibility > MaxVisibility {
		return fmt.Errorf("receive: visibility %v must be between 0 and %v", visibility, MaxVisibility)
	}
	if wait < 0 || wait > MaxWait {
		return fmt.Errorf("receive: wait %v must be between 0 and %v", wait, MaxWait)
	}
	return nil
}

// ValidateVisibility checks a ChangeVisibility timeout.
func ValidateVisibility(timeout time.Duration) error {
	if timeout < 0 || timeout > MaxVisibility {
		return fmt.Errorf("change visibility: timeout %v must be between 0 and %v", timeout, MaxVisibility)
	}
	return nil
}

// ValidateBatch checks the handles of a batch call: 1..10, none empty, no
// duplicates.
func ValidateBatch(handles []string) error {
	if len(handles) == 0 || len(handles) > MaxBatch {
		return fmt.Errorf("batch of %d receipt handles: must be 1..%d", len(handles), MaxBatch)
	}
	seen := make(map[string]bool, len(handles))
	for _, h := range handles {
		if h == "" {
			return errors.New("batch: empty receipt handle")
		}
		if seen[h] {
			return fmt.Errorf("batch: receipt handle %q appears twice", h)
		}
		seen[h] = true
	}
	return nil
}

// Both backends store times as Unix nanoseconds in an int64, which spans
// 1677-09-21 to 2262-04-11. A time outside that span would wrap into another
// one (a far-future threshold became a past one), so it is refused instead.
var (
	MinStoredTime = time.Unix(0, math.MinInt64+1).UTC()
	MaxStoredTime = time.Unix(0, math.MaxInt64).UTC()
)

// ValidateStoredTime reports a time the backends cannot store without
// wrapping; the zero time (stored as 0, "unset") is fine.
func ValidateStoredTime(what string, t time.Time) error {
	if t.IsZero() || (!t.Before(MinStoredTime) && !t.After(MaxStoredTime)) {
		return nil
	}
	return fmt.Errorf("%s %s is outside the times the backend stores (%s to %s)",
		what, t.UTC().Format(time.RFC3339), MinStoredTime.Format(time.RFC3339), MaxStoredTime.Format(time.RFC3339))
}
