package daemon

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

// apiErrorListener hands out connections whose plain-text error answers
// from net/http are rewritten into the API's JSON error model.
type apiErrorListener struct{ net.Listener }

func (l apiErrorListener) Accept() (net.Conn, error) {
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
		code, msg = api.CodeHeadersTooLarge, fmt.Sprintf("the request line and headers are over %d KiB; send fewer or shorter headers", maxHeaderBytes>>10)
	}
	body, _ := json.Marshal(api.ErrorBody{Error: api.Error{Code: code, Message: msg}})
	body = append(body, '\n')
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body), true
}

// maxHeaderBytes bounds the request line and headers (net/http allows 4 KiB
// of slack on top).
const maxHeaderBytes = 64 << 10

// uncleanPath reports whether p (an escaped path) has empty, "." or ".."
// segments, which ServeMux would answer with a redirect to the cleaned path;
// a client following that redirect would send its POST to another route.
// The API matches paths as sent instead.
func uncleanPath(p string) bool {
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean != p
}

// checkJSON walks the tokens of a request body and refuses what
// encoding/json would accept silently: a key that appears twice in one
// object (the decoder keeps the last), and a string longer than
// api.MaxIDBytes (an identifier that long is a flood, not a name). Syntax
// errors are left to the decoder, which reports them with their offset.
func checkJSON(body []byte) error {
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
				return badRequest("invalid JSON body: key %q appears twice in one object; send each field once", truncate(k))
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
				return badRequest("%s is %d bytes long; identifiers and names are limited to %d bytes", fieldName(key), len(t), api.MaxIDBytes)
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

// readBody reads all of body (at most api.MaxBodyBytes), translating a body
// that is too large or arrives too slowly into the API's errors.
func readBody(body io.Reader) ([]byte, error) {
	b, err := io.ReadAll(body)
	if err == nil {
		return b, nil
	}
	var tooBig *http.MaxBytesError
	var netErr net.Error
	switch {
	case errors.As(err, &tooBig):
		return nil, &httpError{status: http.StatusRequestEntityTooLarge, code: api.CodeBodyTooLarge,
			msg: fmt.Sprintf("request body over %d bytes", api.MaxBodyBytes)}
	case errors.As(err, &netErr) && netErr.Timeout():
		return nil, &httpError{status: http.StatusRequestTimeout, code: api.CodeTimeout,
			msg: "the request body did not arrive in time: send as many bytes as Content-Length says, promptly"}
	}
	return nil, badRequest("reading the request body: %v", err)
}
