package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/internal/answer"
)

// WriteJSON writes v with status. It returns the write error, so a handler
// that granted something can give it back when the client is gone.
func WriteJSON(w http.ResponseWriter, status int, v any) error {
	buf := answerBufs.Get().(*bytes.Buffer)
	defer PutBuf(&answerBufs, buf)
	buf.Reset()
	var err error
	if a, ok := v.(JSONAppender); ok {
		var b []byte
		if b, err = a.AppendJSON(buf.AvailableBuffer()); err == nil {
			buf.Write(append(b, '\n'))
		}
	} else {
		err = json.NewEncoder(buf).Encode(v) // as json.Marshal, plus '\n'
	}
	if err != nil {
		http.Error(w, `{"error":{"code":"internal","message":"cannot encode the response"}}`, http.StatusInternalServerError)
		return err
	}
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, err = w.Write(buf.Bytes())
	return err
}

// ArmJSON arms the answer WriteJSON would write for v as ctx's request's
// answer sent early (package answer): once a store makes the request's
// write durable, its writer sends it. The handler still answers with
// WriteJSON (the server drops that answer when this one went out).
func ArmJSON(ctx context.Context, status int, v JSONAppender) {
	if !answer.Offered(ctx) {
		return
	}
	buf := answerBufs.Get().(*bytes.Buffer)
	defer PutBuf(&answerBufs, buf)
	buf.Reset()
	b, err := v.AppendJSON(buf.AvailableBuffer())
	if err != nil {
		return // WriteJSON answers the error
	}
	buf.Write(append(b, '\n')) // grown, the pooled buffer holds the next one
	answer.Arm(ctx, status, jsonContentType[0], buf.Bytes())
}

// JSONAppender is an answer with a hand-kept encoder that writes what
// json.Marshal would (api.Lease, the answer of the hot path).
type JSONAppender interface {
	AppendJSON(b []byte) ([]byte, error)
}

// answerBufs holds the buffers WriteJSON encodes into, BodyBufs those
// DecodeBody reads request bodies into (*bytes.Buffer).
var (
	answerBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}
	BodyBufs   = sync.Pool{New: func() any { return new(bytes.Buffer) }}
)

// PutBuf returns buf to pool unless it grew large (a large body or
// answer is rare, and its buffer is not worth keeping).
func PutBuf(pool *sync.Pool, buf *bytes.Buffer) {
	if buf.Cap() <= 64<<10 {
		pool.Put(buf)
	}
}

func WriteError(w http.ResponseWriter, status int, code, msg string) {
	_ = WriteJSON(w, status, api.ErrorBody{Error: api.Error{Code: code, Message: msg}})
}

// Error is an error with its HTTP status and API code.
type Error struct {
	Status int
	Code   string
	Kind   string
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

func BadRequest(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: api.CodeBadRequest, Msg: fmt.Sprintf(format, args...)}
}

func NotFound(format string, args ...any) *Error {
	return &Error{Status: http.StatusNotFound, Code: api.CodeNotFound, Msg: fmt.Sprintf(format, args...)}
}

// jsonContentType is every JSON answer's Content-Type value, shared (never
// modified) so that an answer does not allocate it.
var jsonContentType = []string{"application/json"}

// Decode reads the JSON body of r into v: at most api.MaxBodyBytes within
// the body read timeout, no unknown fields, no key twice in one object, no
// string over api.MaxIDBytes, exactly one value. An empty body decodes as
// {}. This is the one place every request body passes through.
func Decode(w http.ResponseWriter, r *http.Request, v any) error {
	err := DecodeBody(http.MaxBytesReader(w, r.Body, api.MaxBodyBytes), v)
	var he *Error
	if errors.As(err, &he) && he.Status == http.StatusRequestTimeout {
		w.Header().Set("Connection", "close") // the rest of the body is not worth waiting for
		return err
	}
	SetReadDeadline(w, time.Time{})
	return err
}

// SetReadDeadline is http.ResponseController's SetReadDeadline (through
// the wrappers' Unwrap) without allocating the controller: it runs on
// every request.
func SetReadDeadline(w http.ResponseWriter, t time.Time) {
	for {
		switch x := w.(type) {
		case interface{ SetReadDeadline(time.Time) error }:
			_ = x.SetReadDeadline(t)
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return
		}
	}
}

// DecodeBody is Decode without the ResponseWriter, for the fuzz target.
// The body is read into a pooled buffer: what v keeps of it is copied.
func DecodeBody(body io.Reader, v any) error {
	buf := BodyBufs.Get().(*bytes.Buffer)
	defer PutBuf(&BodyBufs, buf)
	buf.Reset()
	b, err := ReadBody(buf, body)
	if err != nil {
		return err
	}
	if err := CheckJSON(b); err != nil {
		return err
	}
	// The hot body has a hand-kept decoder for the shape clients send;
	// anything else, and every error, is encoding/json's.
	if r, ok := v.(*api.AcquireRequest); ok && ParseAcquire(b, r) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // empty body: every field takes its default
		}
		return BadRequest("invalid JSON body: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return BadRequest("invalid JSON body: more than one JSON value")
	}
	return nil
}

// WaitDuration converts wait_seconds, rejecting negative, non-finite and
// too-long waits.
func WaitDuration(s float64) (time.Duration, error) {
	if !(s >= 0) || s > api.MaxWaitSeconds {
		return 0, BadRequest("wait_seconds %v out of range: use 0 (answer at once) to %d", s, api.MaxWaitSeconds)
	}
	return time.Duration(s * float64(time.Second)), nil
}

// TTLDuration converts ttl_seconds; 0 means def.
func TTLDuration(s float64, def time.Duration) (time.Duration, error) {
	const maxTTL = 7 * 24 * 3600
	if !(s >= 0) || s > maxTTL {
		return 0, BadRequest("ttl_seconds %v out of range: use 0 (the default) up to %d", s, maxTTL)
	}
	if s == 0 {
		return def, nil
	}
	d := time.Duration(s * float64(time.Second))
	if d < time.Second {
		return 0, BadRequest("ttl_seconds %v too short: a lease must live at least 1 second", s)
	}
	return d, nil
}

// Conflict is the 409 unavailable of a request that cannot be met now.
func Conflict(msg string) *Error {
	return &Error{Status: http.StatusConflict, Code: api.CodeUnavailable, Msg: msg}
}

// TimePtr returns nil for the zero time: "does not apply" in the API.
func TimePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}
