package httpapi

import (
	"strconv"

	"github.com/rpdhq/rpd/api"
)

// ParseAcquire decodes the body of the hot path by hand: a json.Decoder
// costs two allocations and a buffer per request, and reflection per
// field. It covers the shape every client sends (one object of known keys,
// written exactly, with unescaped printable-ASCII strings and plain
// numbers), reusing CheckJSON's scanner, and reports false, leaving r
// unchanged, for anything else: DecodeBody then decodes with
// encoding/json, whose result and errors are the definition (a property
// test holds the two to the same value wherever this answers). b has
// passed CheckJSON.
func ParseAcquire(b []byte, r *api.AcquireRequest) bool {
	s := jsonScan{b: b}
	var out api.AcquireRequest
	prio, hasPrio := 0, false
	s.ws()
	if s.i >= len(b) || b[s.i] != '{' {
		return false
	}
	if !s.object(0, func(key []byte) (ok bool) {
		switch string(key) {
		case "task_id":
			out.TaskID, ok = s.text()
		case "priority":
			prio, ok = s.int()
			hasPrio = true
		case "priority_name":
			out.PriorityName, ok = s.text()
		case "slots":
			out.Slots, ok = s.int()
		case "wait_seconds":
			out.WaitSeconds, ok = s.float()
		case "ttl_seconds":
			out.TTLSeconds, ok = s.float()
		case "request_id":
			out.RequestID, ok = s.text()
		}
		return ok
	}) {
		return false
	}
	s.ws()
	if s.i != len(b) {
		return false
	}
	if hasPrio {
		out.Priority = &prio
	}
	*r = out
	return true
}

// text scans a string as str does and copies it.
func (s *jsonScan) text() (string, bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return "", false
	}
	v, ok := s.str()
	return string(v), ok
}

// token scans a number and returns its bytes.
func (s *jsonScan) token() ([]byte, bool) {
	start := s.i
	if s.i >= len(s.b) || !s.number() {
		return nil, false
	}
	return s.b[start:s.i], true
}

// int scans an integer written without fraction or exponent that fits an
// int (encoding/json refuses the others for an int field).
func (s *jsonScan) int() (int, bool) {
	tok, ok := s.token()
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(string(tok), 10, strconv.IntSize)
	return int(n), err == nil
}

// float scans a number that ParseFloat takes, as encoding/json does.
func (s *jsonScan) float() (float64, bool) {
	tok, ok := s.token()
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	return f, err == nil
}
