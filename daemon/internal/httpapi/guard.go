package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path"
	"strings"

	"github.com/rpdhq/rpd/api"
)

// What this file guards against: requests net/http answers by itself in
// plain text, paths that ServeMux would redirect, and JSON bodies whose
// strings or duplicate keys the standard decoder accepts silently.

// ServerErrorBody is the answer's body to a request the server could not
// parse (a malformed request line or URL escape, a missing Host header,
// headers over MaxHeaderBytes, an unsupported transfer encoding), in the
// JSON error model; text is the server's reason.
func ServerErrorBody(status int, text string) (contentType string, body []byte) {
	code, msg := api.CodeBadRequest, fmt.Sprintf("the request could not be parsed (%s): check the request line, URL escapes and headers", text)
	if status == http.StatusRequestHeaderFieldsTooLarge {
		code, msg = api.CodeHeadersTooLarge, fmt.Sprintf("the request line and headers are over %d KiB; send fewer or shorter headers", MaxHeaderBytes>>10)
	}
	body, _ = json.Marshal(api.ErrorBody{Error: api.Error{Code: code, Message: msg}})
	return "application/json", append(body, '\n')
}

// MaxHeaderBytes bounds the request line and headers (net/http allows 4 KiB
// of slack on top).
const MaxHeaderBytes = 64 << 10

// UncleanPath reports whether p (an escaped path) has empty, "." or ".."
// segments, which ServeMux would answer with a redirect to the cleaned path;
// a client following that redirect would send its POST to another route.
// The API matches paths as sent instead.
func UncleanPath(p string) bool {
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean != p
}

// CheckJSON refuses what encoding/json would accept silently in a request
// body: a key that appears twice in one object (the decoder keeps the
// last), and a string longer than api.MaxIDBytes (an identifier that long
// is a flood, not a name). Syntax errors are left to the decoder, which
// reports them with their offset.
//
// Most bodies are one small valid object without escapes: scanJSON passes
// those in one allocation-free pass. Anything else (an escape, non-ASCII
// text, a syntax error, a refusal to word) goes to CheckJSONTokens, whose
// verdict is the definition; FuzzCheckJSONFastPath holds the two equal.
func CheckJSON(body []byte) error {
	if scanJSON(body) {
		return nil
	}
	return CheckJSONTokens(body)
}

// scanJSON reports whether body is one valid JSON value, with only
// whitespace around it, whose strings are printable ASCII without escapes
// and at most api.MaxIDBytes long, and whose objects have distinct keys.
// false means "not shown", not "refused".
func scanJSON(body []byte) bool {
	s := jsonScan{b: body}
	s.ws()
	if !s.value(0) {
		return false
	}
	s.ws()
	return s.i == len(s.b)
}

type jsonScan struct {
	b []byte
	i int
}

// maxScanDepth bounds the fast path's recursion; deeper bodies take the
// token walk.
const maxScanDepth = 32

func (s *jsonScan) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

func (s *jsonScan) value(depth int) bool {
	if s.i >= len(s.b) || depth > maxScanDepth {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(depth, nil)
	case c == '[':
		s.i++
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ']' {
			s.i++
			return true
		}
		for {
			s.ws()
			if !s.value(depth + 1) {
				return false
			}
			if done, ok := s.separator(']'); done || !ok {
				return ok
			}
		}
	case c == '"':
		_, ok := s.str()
		return ok
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	}
	return false
}

// object scans an object, keeping its keys as offsets into b (no copies).
// member, when not nil, scans each member's value (positioned at it)
// instead of value.
func (s *jsonScan) object(depth int, member func(key []byte) bool) bool {
	s.i++ // '{'
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return true
	}
	var keysArr [8][]byte
	keys := keysArr[:0]
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return false
		}
		k, ok := s.str()
		if !ok {
			return false
		}
		for _, seen := range keys {
			if bytes.Equal(seen, k) {
				return false
			}
		}
		keys = append(keys, k)
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.ws()
		if member != nil {
			ok = member(k)
		} else {
			ok = s.value(depth + 1)
		}
		if !ok {
			return false
		}
		if done, ok := s.separator('}'); done || !ok {
			return ok
		}
	}
}

// separator consumes what follows an element of an array or object: a comma
// (more follows) or its closing byte (done); anything else is not ok.
func (s *jsonScan) separator(closing byte) (done, ok bool) {
	s.ws()
	if s.i >= len(s.b) {
		return false, false
	}
	s.i++
	switch s.b[s.i-1] {
	case ',':
		return false, true
	case closing:
		return true, true
	}
	return false, false
}

// str scans a string of printable ASCII without escapes, at most
// api.MaxIDBytes long, returning its contents.
func (s *jsonScan) str() ([]byte, bool) {
	start := s.i + 1
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			if j-start > api.MaxIDBytes {
				return nil, false
			}
			s.i = j + 1
			return s.b[start:j], true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return nil, false
		}
	}
	return nil, false
}

func (s *jsonScan) lit(word string) bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte(word)) {
		return false
	}
	s.i += len(word)
	return true
}

// number scans -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScan) number() bool {
	b := s.b
	digits := func() int {
		n := 0
		for s.i < len(b) && b[s.i] >= '0' && b[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if b[s.i] == '-' {
		s.i++
	}
	if s.i < len(b) && b[s.i] == '0' {
		s.i++
	} else if digits() == 0 {
		return false
	}
	if s.i < len(b) && b[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return false
		}
	}
	if s.i < len(b) && (b[s.i] == 'e' || b[s.i] == 'E') {
		s.i++
		if s.i < len(b) && (b[s.i] == '+' || b[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}

// CheckJSONTokens is CheckJSON's definition: it walks the tokens of body.
func CheckJSONTokens(body []byte) error {
	type frame struct {
		keys      map[string]bool // nil for an array
		expectKey bool
	}
	var stack []frame
	key := "" // the last key, to name the field of a bad value
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].keys != nil {
			stack[n-1].expectKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // io.EOF, or a syntax error the decoder reports
		}
		if n := len(stack); n > 0 && stack[n-1].expectKey {
			k, ok := tok.(string)
			if !ok { // '}' closing the object
				stack = stack[:n-1]
				valueDone()
				continue
			}
			if stack[n-1].keys[k] {
				return BadRequest("invalid JSON body: key %q appears twice in one object; send each field once", truncate(k))
			}
			stack[n-1].keys[k] = true
			stack[n-1].expectKey = false
			key = k
			continue
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, frame{keys: map[string]bool{}, expectKey: true})
			case '[':
				stack = append(stack, frame{})
			default: // ']'
				stack = stack[:len(stack)-1]
				valueDone()
			}
		case string:
			if len(t) > api.MaxIDBytes {
				return BadRequest("%s is %d bytes long; identifiers and names are limited to %d bytes", fieldName(key), len(t), api.MaxIDBytes)
			}
			valueDone()
		default:
			valueDone()
		}
	}
}

func fieldName(key string) string {
	if key == "" {
		return "a string"
	}
	return truncate(key)
}

// truncate shortens s for an error message.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// ReadBody reads all of body (at most api.MaxBodyBytes) into buf, translating a body
// that is too large or arrives too slowly into the API's errors.
func ReadBody(buf *bytes.Buffer, body io.Reader) ([]byte, error) {
	_, err := buf.ReadFrom(body)
	if err == nil {
		return buf.Bytes(), nil
	}
	var tooBig *http.MaxBytesError
	var netErr net.Error
	switch {
	case errors.As(err, &tooBig):
		return nil, &Error{Status: http.StatusRequestEntityTooLarge, Code: api.CodeBodyTooLarge,
			Msg: fmt.Sprintf("request body over %d bytes", api.MaxBodyBytes)}
	case errors.As(err, &netErr) && netErr.Timeout():
		return nil, &Error{Status: http.StatusRequestTimeout, Code: api.CodeTimeout,
			Msg: "the request body did not arrive in time: send as many bytes as Content-Length says, promptly"}
	}
	return nil, BadRequest("reading the request body: %v", err)
}
