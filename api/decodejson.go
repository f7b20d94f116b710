package api

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/rpdhq/rpd/internal/ascii"
)

// The answers of the hot path (the Lease an acquire or heartbeat answers,
// and the ErrorBody of a refusal) are decoded by hand on the client:
// encoding/json reflects over the struct on every call. DecodeJSON covers
// the shape a daemon writes (one object, known members written exactly,
// plain numbers, strings with at most the short escapes, unknown members
// of any shape, which are skipped as encoding/json skips them) and hands
// anything else to json.Unmarshal, whose result and errors are the
// definition: a property test holds the two to the same value wherever
// the fast path answers, and a fuzz test to the same outcome on any input.

// DecodeJSON decodes b into l exactly as json.Unmarshal(b, l) does.
func (l *Lease) DecodeJSON(b []byte) error {
	out := *l
	s := jsonScanner{b: b}
	if s.document(func(key []byte) bool { return out.member(&s, key) }) {
		*l = out
		return nil
	}
	// Through a copy, so that l (often on its caller's stack) does not
	// escape: the fast path's callers do not pay for the slow one.
	v := new(Lease)
	*v = *l
	err := json.Unmarshal(b, v)
	*l = *v
	return err
}

// leaseKeys are Lease's member names, for the case-insensitive match
// encoding/json makes of the others.
var leaseKeys = []string{"lease_id", "kind", "pool", "budget", "task_id", "priority", "slots", "ttl_seconds",
	"granted_at", "expires_at", "scan_ring_bytes", "delta_cache_bytes", "spill", "request_id"}

func (l *Lease) member(s *jsonScanner, key []byte) (ok bool) {
	switch string(key) {
	case "lease_id":
		l.LeaseID, ok = s.text()
	case "kind":
		l.Kind, ok = s.text()
	case "pool":
		l.Pool, ok = s.text()
	case "budget":
		l.Budget, ok = s.text()
	case "task_id":
		l.TaskID, ok = s.text()
	case "priority":
		l.Priority, ok = s.int()
	case "slots":
		l.Slots, ok = s.int()
	case "ttl_seconds":
		l.TTLSeconds, ok = s.float()
	case "granted_at":
		ok = s.time(&l.GrantedAt)
	case "expires_at":
		ok = s.time(&l.ExpiresAt)
	case "scan_ring_bytes":
		l.ScanRingBytes, ok = s.uint()
	case "delta_cache_bytes":
		l.DeltaCacheBytes, ok = s.uint()
	case "spill":
		l.Spill, ok = s.bool()
	case "request_id":
		l.RequestID, ok = s.text()
	default:
		ok = s.unknown(key, leaseKeys)
	}
	return ok
}

// DecodeJSON decodes b into e exactly as json.Unmarshal(b, e) does.
func (e *ErrorBody) DecodeJSON(b []byte) error {
	out := *e
	s := jsonScanner{b: b}
	if s.document(func(key []byte) bool {
		if string(key) == "error" {
			return s.objectValue(func(key []byte) bool { return out.Error.member(&s, key) })
		}
		return s.unknown(key, errorBodyKeys)
	}) {
		*e = out
		return nil
	}
	v := new(ErrorBody) // as Lease's
	*v = *e
	err := json.Unmarshal(b, v)
	*e = *v
	return err
}

var (
	errorBodyKeys = []string{"error"}
	errorKeys     = []string{"code", "message", "kind", "leader"}
)

func (e *Error) member(s *jsonScanner, key []byte) (ok bool) {
	switch string(key) {
	case "code":
		e.Code, ok = s.text()
	case "message":
		e.Message, ok = s.text()
	case "kind":
		e.Kind, ok = s.text()
	case "leader":
		e.Leader, ok = s.text()
	default:
		ok = s.unknown(key, errorKeys)
	}
	return ok
}

// document scans s.b, one JSON object and nothing else, calling member
// for each member with the scanner at its value, which member consumes.
// It reports false for anything the fast path does not cover: the caller
// then leaves the body to json.Unmarshal.
func (s *jsonScanner) document(member func(key []byte) bool) bool {
	s.ws()
	if !s.objectValue(member) {
		return false
	}
	s.ws()
	return s.i == len(s.b)
}

// jsonScanner reads JSON as encoding/json's scanner validates it.
type jsonScanner struct {
	b []byte
	i int
	// str is b as one string, made at the first string value: the plain
	// strings decoded are slices of it (one allocation for all of them).
	str string
}

// maxSkipDepth bounds the nesting of an unknown member's value the fast
// path skips; a deeper one goes to encoding/json (which allows 10000).
const maxSkipDepth = 64

func (s *jsonScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *jsonScanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// objectValue scans an object, calling member for each member (its key
// plain: no escapes, so it reads as encoding/json unquotes it).
func (s *jsonScanner) objectValue(member func(key []byte) bool) bool {
	if s.peek() != '{' {
		return false
	}
	s.i++
	s.ws()
	if s.peek() == '}' {
		s.i++
		return true
	}
	for {
		start, end, esc, ok := s.rawString()
		if !ok || esc {
			return false
		}
		s.ws()
		if s.peek() != ':' {
			return false
		}
		s.i++
		s.ws()
		if !member(s.b[start+1 : end-1]) {
			return false
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
			s.ws()
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// rawString scans a string at s.i, as encoding/json's scanner checks it
// (no control characters, valid escapes); [start, end) holds it with its
// quotes, and esc says it has escapes.
func (s *jsonScanner) rawString() (start, end int, esc, ok bool) {
	start = s.i
	if s.peek() != '"' {
		return 0, 0, false, false
	}
	for i := s.i + 1; i < len(s.b); i++ {
		switch c := s.b[i]; {
		case c == '"':
			s.i = i + 1
			return start, s.i, esc, true
		case c < 0x20:
			return 0, 0, false, false
		case c == '\\':
			esc = true
			i++
			if i >= len(s.b) {
				return 0, 0, false, false
			}
			switch s.b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(s.b) {
					return 0, 0, false, false
				}
				for _, h := range s.b[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return 0, 0, false, false
					}
				}
				i += 4
			default:
				return 0, 0, false, false
			}
		}
	}
	return 0, 0, false, false
}

// text scans a string value as encoding/json unquotes it into a string:
// plain strings and the short escapes (\uXXXX and invalid UTF-8, which it
// rewrites, are left to it).
func (s *jsonScanner) text() (string, bool) {
	start, end, esc, ok := s.rawString()
	if !ok {
		return "", false
	}
	raw := s.b[start+1 : end-1]
	ascii := true
	for _, c := range raw {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if !ascii && !utf8.Valid(raw) {
		return "", false
	}
	if !esc {
		if s.str == "" {
			s.str = string(s.b)
		}
		return s.str[start+1 : end-1], true
	}
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		switch raw[i] {
		case '"', '\\', '/':
			out = append(out, raw[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		default: // \u
			return "", false
		}
	}
	return string(out), true
}

// number scans a number as JSON spells it and returns it, a slice of the
// body as a string.
func (s *jsonScanner) number() (string, bool) {
	b, start := s.b, s.i
	i := s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		return "", false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return "", false
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return "", false
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	s.i = i
	if s.str == "" {
		s.str = string(s.b)
	}
	return s.str[start:i], true
}

// int scans a number into an int as encoding/json does: no fraction or
// exponent, and in range (the others are its errors).
func (s *jsonScanner) int() (int, bool) {
	tok, ok := s.number()
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(tok, 10, strconv.IntSize)
	return int(n), err == nil
}

func (s *jsonScanner) uint() (uint64, bool) {
	tok, ok := s.number()
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(tok, 10, 64)
	return n, err == nil
}

func (s *jsonScanner) float() (float64, bool) {
	tok, ok := s.number()
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(tok, 64)
	return f, err == nil
}

func (s *jsonScanner) bool() (v, ok bool) {
	switch {
	case s.literal("true"):
		return true, true
	case s.literal("false"):
		return false, true
	}
	return false, false
}

// time scans a string into t with time.Time's UnmarshalJSON, as
// encoding/json does (it hands the method the quoted string as is).
func (s *jsonScanner) time(t *time.Time) bool {
	start, end, _, ok := s.rawString()
	return ok && t.UnmarshalJSON(s.b[start:end]) == nil
}

func (s *jsonScanner) literal(word string) bool {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return false
	}
	s.i += len(word)
	return true
}

// unknown skips the value of a member that is none of known. A key
// encoding/json would match to one of them case-insensitively (any
// non-ASCII key, which it folds by Unicode rules, included) is left to it.
func (s *jsonScanner) unknown(key []byte, known []string) bool {
	for _, c := range key {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	for _, k := range known {
		if ascii.EqualFold(key, k) {
			return false
		}
	}
	return s.skip(0)
}

// skip scans any value, checking it as encoding/json's scanner does.
func (s *jsonScanner) skip(depth int) bool {
	switch c := s.peek(); {
	case c == '"':
		_, _, _, ok := s.rawString()
		return ok
	case c == '-' || '0' <= c && c <= '9':
		_, ok := s.number()
		return ok
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case depth >= maxSkipDepth:
		return false
	case c == '{':
		return s.objectValue(func([]byte) bool { return s.skip(depth + 1) })
	case c == '[':
		s.i++
		s.ws()
		if s.peek() == ']' {
			s.i++
			return true
		}
		for {
			if !s.skip(depth + 1) {
				return false
			}
			s.ws()
			switch s.peek() {
			case ',':
				s.i++
				s.ws()
			case ']':
				s.i++
				return true
			default:
				return false
			}
		}
	}
	return false
}
