package api

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
)

// The bodies of the hot path (an AcquireRequest, and the Lease an acquire
// or heartbeat answers) are encoded by hand: encoding/json reflects over
// the struct on every call. AppendJSON writes exactly the bytes json.Marshal
// would (a property test holds it to that), falling back to json.Marshal
// for a value the fast path does not cover (a string needing escapes, a
// time outside years 0-9999, a non-finite float).

// AppendJSON appends r encoded as json.Marshal would encode it.
func (r AcquireRequest) AppendJSON(b []byte) ([]byte, error) {
	start := len(b)
	b = append(b, '{')
	e := fieldAppender{b: b, first: true}
	if r.TaskID != "" {
		e.str("task_id", r.TaskID)
	}
	if r.Priority != nil {
		e.int("priority", int64(*r.Priority))
	}
	if r.PriorityName != "" {
		e.str("priority_name", r.PriorityName)
	}
	if r.Slots != 0 {
		e.int("slots", int64(r.Slots))
	}
	if r.WaitSeconds != 0 {
		e.float("wait_seconds", r.WaitSeconds)
	}
	if r.TTLSeconds != 0 {
		e.float("ttl_seconds", r.TTLSeconds)
	}
	if r.RequestID != "" {
		e.str("request_id", r.RequestID)
	}
	if e.slow {
		return marshalAppend(b[:start], r)
	}
	return append(e.b, '}'), nil
}

// AppendJSON appends l encoded as json.Marshal would encode it.
func (l Lease) AppendJSON(b []byte) ([]byte, error) {
	start := len(b)
	b = append(b, '{')
	e := fieldAppender{b: b, first: true}
	e.str("lease_id", l.LeaseID)
	e.str("kind", l.Kind)
	if l.Pool != "" {
		e.str("pool", l.Pool)
	}
	if l.Budget != "" {
		e.str("budget", l.Budget)
	}
	if l.TaskID != "" {
		e.str("task_id", l.TaskID)
	}
	e.int("priority", int64(l.Priority))
	if l.Slots != 0 {
		e.int("slots", int64(l.Slots))
	}
	e.float("ttl_seconds", l.TTLSeconds)
	if !l.GrantedAt.IsZero() {
		e.time("granted_at", l.GrantedAt)
	}
	e.time("expires_at", l.ExpiresAt)
	if l.ScanRingBytes != 0 {
		e.uint("scan_ring_bytes", l.ScanRingBytes)
	}
	if l.DeltaCacheBytes != 0 {
		e.uint("delta_cache_bytes", l.DeltaCacheBytes)
	}
	if l.Spill {
		e.key("spill")
		e.b = append(e.b, "true"...)
	}
	if l.RequestID != "" {
		e.str("request_id", l.RequestID)
	}
	if e.slow {
		return marshalAppend(b[:start], l)
	}
	return append(e.b, '}'), nil
}

func marshalAppend(b []byte, v any) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return b, err
	}
	return append(b, j...), nil
}

// fieldAppender appends the members of one object. A value it cannot
// write as json.Marshal would sets slow, and the caller starts over with
// json.Marshal.
type fieldAppender struct {
	b     []byte
	first bool
	slow  bool
}

// key appends the member's name; names are plain ASCII.
func (e *fieldAppender) key(k string) {
	if !e.first {
		e.b = append(e.b, ',')
	}
	e.first = false
	e.b = append(e.b, '"')
	e.b = append(e.b, k...)
	e.b = append(e.b, '"', ':')
}

func (e *fieldAppender) str(k, v string) {
	for i := 0; i < len(v); i++ {
		// json.Marshal escapes these (HTML-safe, and U+2028/U+2029 and
		// invalid UTF-8 beyond 0x7f): left to it.
		if c := v[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			e.slow = true
			return
		}
	}
	e.key(k)
	e.b = append(e.b, '"')
	e.b = append(e.b, v...)
	e.b = append(e.b, '"')
}

func (e *fieldAppender) int(k string, v int64) {
	e.key(k)
	e.b = strconv.AppendInt(e.b, v, 10)
}

func (e *fieldAppender) uint(k string, v uint64) {
	e.key(k)
	e.b = strconv.AppendUint(e.b, v, 10)
}

// float writes v as encoding/json does: the shortest representation, in
// exponent form only below 1e-6 or from 1e21 on.
func (e *fieldAppender) float(k string, v float64) {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		e.slow = true // json.Marshal's error
		return
	}
	if a := math.Abs(v); a != 0 && (a < 1e-6 || a >= 1e21) {
		e.slow = true // json.Marshal trims the exponent's zeros: rare, left to it
		return
	}
	e.key(k)
	e.b = strconv.AppendFloat(e.b, v, 'f', -1, 64)
}

func (e *fieldAppender) time(k string, t time.Time) {
	if y := t.Year(); y < 0 || y > 9999 {
		e.slow = true // json.Marshal's error
		return
	}
	if _, off := t.Zone(); off <= -24*3600 || off >= 24*3600 {
		e.slow = true // json.Marshal's error
		return
	}
	e.key(k)
	e.b = append(e.b, '"')
	e.b = t.AppendFormat(e.b, time.RFC3339Nano)
	e.b = append(e.b, '"')
}
