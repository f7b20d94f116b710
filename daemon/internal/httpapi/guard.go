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
	"strconv"
	"strings"

	"github.com/rpdhq/rpd/api"
)

// What this file guards against: requests net/http answers by itself in
// plain text, paths that ServeMux would redirect, and JSON bodies whose
// strings or duplicate keys the standard decoder accepts silently.

// APIErrorListener hands out connections whose plain-text error answers
// from net/http are rewritten into the API's JSON error model.
type APIErrorListener struct{ net.Listener }

func (l APIErrorListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return apiErrorConn{c}, nil
}

// apiErrorConn rewrites the answers net/http writes straight to the
// connection, before any handler runs, for requests it cannot parse:
// headers over MaxHeaderBytes (431), a malformed request line or URL escape
// ("%zz"), a missing Host header (400), an unsupported transfer encoding
// (501). net/http writes each in one Write of exactly the form
// "HTTP/1.1 <status>" + plainErrorHeaders + <text>, and then closes the
// connection. Handler responses never match: they go through a buffer and
// always carry a Date header between the status line and the body.
type apiErrorConn struct{ net.Conn }

const plainErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

func (c apiErrorConn) Write(b []byte) (int, error) {
	if js, ok := jsonServerError(b); ok {
		if _, err := c.Conn.Write(js); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	return c.Conn.Write(b)
}

// CloseWrite lets net/http half-close the connection after such an answer
// (so that the client reads it instead of a reset), as it does on a plain
// *net.TCPConn.
func (c apiErrorConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// jsonServerError returns the JSON form of one of net/http's own plain-text
// error answers, or false if b is not one.
func jsonServerError(b []byte) ([]byte, bool) {
	head, text, ok := bytes.Cut(b, []byte(plainErrorHeaders))
	if !ok || !bytes.HasPrefix(head, []byte("HTTP/1.1 ")) || bytes.Contains(head, []byte("\r\n")) || len(head) < 12 {
		return nil, false
	}
	status, err := strconv.Atoi(string(head[9:12]))
	if err != nil || status < 400 {
		return nil, false
	}
	code, msg := api.CodeBadRequest, fmt.Sprintf("the request could not be parsed (%s): check the request line, URL escapes and headers", text)
	if status == http.StatusRequestHeaderFieldsTooLarge {
		code, msg = api.CodeHeadersTooLarge, fmt.Sprintf("the request line and headers are over %d KiB; send fewer or shorter headers", MaxHeaderBytes>>10)
	}
	body, _ := json.Marshal(api.ErrorBody{Error: api.Error{Code: code, Message: msg}})
	body = append(body, '\n')
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body), true
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
