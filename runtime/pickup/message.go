package pickup

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Usage classes a message may carry (docs/language.md, "The queue message").
const (
	UsageSpot     = "spot"
	UsageOnDemand = "on-demand"
)

// Entry is one idle instance as its queue message describes it
// (docs/language.md, "The queue message"):
//
//	{"instanceId":"i-12345678","usageClass":"on-demand","instanceType":"c6i.large",
//	 "cpu":2,"mem":4096,"resourceClass":"medium","threshold":"2025-05-31T12:20:00Z"}
type Entry struct {
	InstanceID    string
	UsageClass    string // UsageSpot or UsageOnDemand
	InstanceType  string
	CPU           int
	MemMiB        int
	ResourceClass string
	Threshold     time.Time // the entry expires at this instant
}

// EntryFor describes inst as a queue entry.
func EntryFor(inst Instance) Entry {
	return Entry{
		InstanceID:    inst.ID,
		UsageClass:    inst.UsageClass,
		InstanceType:  inst.InstanceType,
		CPU:           inst.CPU,
		MemMiB:        inst.MemMiB,
		ResourceClass: inst.ResourceClass,
		Threshold:     inst.Threshold,
	}
}

// Body encodes e in the queue message format, fields in the documented order;
// the threshold is RFC 3339 in UTC.
func (e Entry) Body() string {
	var b strings.Builder
	b.Grow(200)
	b.WriteString(`{"instanceId":`)
	writeJSONString(&b, e.InstanceID)
	b.WriteString(`,"usageClass":`)
	writeJSONString(&b, e.UsageClass)
	b.WriteString(`,"instanceType":`)
	writeJSONString(&b, e.InstanceType)
	b.WriteString(`,"cpu":`)
	b.WriteString(strconv.Itoa(e.CPU))
	b.WriteString(`,"mem":`)
	b.WriteString(strconv.Itoa(e.MemMiB))
	b.WriteString(`,"resourceClass":`)
	writeJSONString(&b, e.ResourceClass)
	b.WriteString(`,"threshold":"`)
	b.WriteString(e.Threshold.UTC().Format(time.RFC3339Nano))
	b.WriteString(`"}`)
	return b.String()
}

func writeJSONString(b *strings.Builder, s string) {
	q, _ := json.Marshal(s) // a string always marshals
	b.Write(q)
}

// DiscardReason says why a message was discarded.
type DiscardReason int

const (
	ReasonTooLarge          DiscardReason = iota // body over MaxBodySize
	ReasonMalformed                              // not a JSON object of the message's fields with the right types
	ReasonUnknownUsageClass                      // usageClass neither spot nor on-demand
	ReasonClassMismatch                          // cpu, mem or instance type contradict the runner class
	ReasonExpired                                // threshold already past
	ReasonWithdrawn                              // the instance was taken out of the pool (Withdraw)
	numReasons
)

var reasonNames = [numReasons]string{"too_large", "malformed", "unknown_usage_class", "class_mismatch", "expired", "withdrawn"}

// DiscardReasons lists every discard reason, in order.
func DiscardReasons() []DiscardReason {
	out := make([]DiscardReason, numReasons)
	for r := range numReasons {
		out[r] = r
	}
	return out
}

func (r DiscardReason) String() string {
	if r >= 0 && r < numReasons {
		return reasonNames[r]
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// DiscardError is why a message body is unusable. ParseEntry returns it; the
// manager logs it, counts it by Reason and deletes the message.
type DiscardError struct {
	Reason     DiscardReason
	InstanceID string // when known
	Detail     string
}

func (e *DiscardError) Error() string {
	if e.InstanceID != "" {
		return fmt.Sprintf("pickup: discard message of %s (%s): %s", e.InstanceID, e.Reason, e.Detail)
	}
	return fmt.Sprintf("pickup: discard message (%s): %s", e.Reason, e.Detail)
}

// ParseEntry parses a message body strictly. The body must be one JSON
// object holding exactly the seven fields of the queue message, each once, with
// exactly those (case-sensitive) names: strings for instanceId, usageClass,
// instanceType, resourceClass and threshold (RFC 3339, the ISO 8601 profile
// JSON uses); positive integers for cpu and mem (MiB). Unknown fields are
// rejected, not ignored: a producer that adds fields is one this manager was
// not written for, and its messages may mean something it cannot check. The error is always a *DiscardError.
func ParseEntry(body string) (Entry, error) {
	if len(body) > MaxBodySize {
		return Entry{}, &DiscardError{Reason: ReasonTooLarge, Detail: fmt.Sprintf("body is %d bytes, more than %d", len(body), MaxBodySize)}
	}
	malformed := func(format string, args ...any) (Entry, error) {
		return Entry{}, &DiscardError{Reason: ReasonMalformed, Detail: fmt.Sprintf(format, args...)}
	}
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return malformed("body is not a JSON object")
	}
	raw := make(map[string]json.RawMessage, 7)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return malformed("bad JSON: %v", err)
		}
		key, _ := tok.(string) // object keys are always strings
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return malformed("bad JSON value for %q: %v", key, err)
		}
		if _, known := fieldKinds[key]; !known {
			return malformed("unknown field %q", key)
		}
		if _, dup := raw[key]; dup {
			return malformed("field %q appears twice", key)
		}
		raw[key] = v
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return malformed("bad JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return malformed("data after the JSON object")
	}

	var e Entry
	str := func(key string, dst *string) error {
		v, ok := raw[key]
		if !ok {
			return fmt.Errorf("field %q is missing", key)
		}
		if len(v) == 0 || v[0] != '"' {
			return fmt.Errorf("field %q must be a string, got %s", key, abbreviate(v))
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return fmt.Errorf("field %q: %v", key, err)
		}
		if *dst == "" {
			return fmt.Errorf("field %q is empty", key)
		}
		return nil
	}
	integer := func(key string, dst *int) error {
		v, ok := raw[key]
		if !ok {
			return fmt.Errorf("field %q is missing", key)
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 32)
		if err != nil {
			return fmt.Errorf("field %q must be an integer, got %s", key, abbreviate(v))
		}
		if n < 1 {
			return fmt.Errorf("field %q must be positive, got %d", key, n)
		}
		*dst = int(n)
		return nil
	}
	var threshold string
	if err := errors.Join(
		str("instanceId", &e.InstanceID),
		str("usageClass", &e.UsageClass),
		str("instanceType", &e.InstanceType),
		integer("cpu", &e.CPU),
		integer("mem", &e.MemMiB),
		str("resourceClass", &e.ResourceClass),
		str("threshold", &threshold),
	); err != nil {
		return Entry{}, &DiscardError{Reason: ReasonMalformed, InstanceID: e.InstanceID, Detail: strings.ReplaceAll(err.Error(), "\n", "; ")}
	}
	t, err := time.Parse(time.RFC3339Nano, threshold)
	if err != nil {
		return Entry{}, &DiscardError{Reason: ReasonMalformed, InstanceID: e.InstanceID, Detail: fmt.Sprintf("threshold %q is not an RFC 3339 time", threshold)}
	}
	e.Threshold = t
	if e.UsageClass != UsageSpot && e.UsageClass != UsageOnDemand {
		return Entry{}, &DiscardError{Reason: ReasonUnknownUsageClass, InstanceID: e.InstanceID, Detail: fmt.Sprintf("usageClass %q is neither %q nor %q", e.UsageClass, UsageSpot, UsageOnDemand)}
	}
	return e, nil
}

var fieldKinds = map[string]struct{}{
	"instanceId": {}, "usageClass": {}, "instanceType": {}, "cpu": {}, "mem": {}, "resourceClass": {}, "threshold": {},
}

func abbreviate(v []byte) string {
	if len(v) > 40 {
		return string(v[:40]) + "…"
	}
	return string(v)
}
