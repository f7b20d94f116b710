package api

import (
	"strconv"
)

// The hot request body (an AcquireRequest) is also decoded by hand: a
// json.Decoder costs two allocations and a buffer per request, and
// reflection per field. ParseJSON covers the shape every client sends (one
// object of known keys, written exactly, with unescaped printable-ASCII
// strings and plain numbers) and reports anything else as not covered, for
// the caller to decode with encoding/json, whose result and errors are the
// definition. A property test holds the two to the same value wherever the
// fast path answers.

// ParseJSON decodes b into r when b is a JSON object the fast path covers
// and reports whether it did; r is unchanged when it did not. The caller
// has checked b for duplicate keys and over-long strings.
func (r *AcquireRequest) ParseJSON(b []byte) bool {
	p := objParser{b: b}
	var out AcquireRequest
	prio, hasPrio := 0, false
	if !p.object(func(key []byte) (ok bool) {
		switch string(key) {
		case "task_id":
			out.TaskID, ok = p.str()
		case "priority":
			prio, ok = p.int()
			hasPrio = true
		case "priority_name":
			out.PriorityName, ok = p.str()
		case "slots":
			out.Slots, ok = p.int()
		case "wait_seconds":
			out.WaitSeconds, ok = p.float()
		case "ttl_seconds":
			out.TTLSeconds, ok = p.float()
		case "request_id":
			out.RequestID, ok = p.str()
		}
		return ok
	}) {
		return false
	}
	if hasPrio {
		out.Priority = &prio
	}
	*r = out
	return true
}

// objParser reads one JSON object of the covered shape.
type objParser struct {
	b []byte
	i int
}

// object parses {"key": value, ...} with only whitespace around it,
// calling field at each key with the parser on its value.
func (p *objParser) object(field func(key []byte) bool) bool {
	p.ws()
	if !p.byte('{') {
		return false
	}
	p.ws()
	if p.byte('}') {
		return p.end()
	}
	for {
		p.ws()
		key, ok := p.raw()
		if !ok {
			return false
		}
		p.ws()
		if !p.byte(':') {
			return false
		}
		p.ws()
		if !field(key) {
			return false
		}
		p.ws()
		if p.byte('}') {
			return p.end()
		}
		if !p.byte(',') {
			return false
		}
	}
}

func (p *objParser) end() bool {
	p.ws()
	return p.i == len(p.b)
}

func (p *objParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *objParser) byte(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// raw reads a string of printable ASCII without escapes and returns its
// bytes, without copying.
func (p *objParser) raw() ([]byte, bool) {
	if !p.byte('"') {
		return nil, false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return p.b[start : p.i-1], true
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, false
		}
		p.i++
	}
	return nil, false
}

func (p *objParser) str() (string, bool) {
	s, ok := p.raw()
	return string(s), ok
}

// number reads a JSON number token.
func (p *objParser) number() ([]byte, bool) {
	start := p.i
	p.byte('-')
	switch {
	case p.byte('0'):
	case p.digits() == 0:
		return nil, false
	}
	if p.byte('.') && p.digits() == 0 {
		return nil, false
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if !p.byte('+') {
			p.byte('-')
		}
		if p.digits() == 0 {
			return nil, false
		}
	}
	return p.b[start:p.i], true
}

func (p *objParser) digits() int {
	n := 0
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
		n++
	}
	return n
}

// int reads an integer written without fraction or exponent that fits an
// int (encoding/json refuses the others, or takes them slowly).
func (p *objParser) int() (int, bool) {
	tok, ok := p.number()
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(string(tok), 10, strconv.IntSize)
	return int(n), err == nil
}

// float reads a number that ParseFloat takes exactly as encoding/json does.
func (p *objParser) float() (float64, bool) {
	tok, ok := p.number()
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	return f, err == nil
}
