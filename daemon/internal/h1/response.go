package h1

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// response is the handler's http.ResponseWriter. An answer up to
// maxBuffered bytes is sent in one write with its Content-Length; a longer
// one is streamed, chunked unless the handler set a Content-Length. It
// must not be used after the handler returned (as with net/http).
type response struct {
	c      *conn
	r      *http.Request
	q      *request
	header http.Header

	status      int
	wroteHeader bool
	headSent    bool // the head is in the connection's writer: streaming
	chunked     bool
	closeAfter  bool
	declared    int64 // the handler's Content-Length; -1: none
	written     int64
	buf         []byte
}

// maxBuffered is the largest answer sent with a computed Content-Length.
const maxBuffered = 16 << 10

func (w *response) reset(r *http.Request, q *request) {
	w.r, w.q = r, q
	if w.header == nil {
		w.header = make(http.Header, 4)
	} else {
		clear(w.header)
	}
	w.status, w.wroteHeader, w.headSent, w.chunked, w.closeAfter = 0, false, false, false, false
	w.declared, w.written = -1, 0
	if cap(w.buf) > maxBuffered {
		w.buf = nil
	}
	w.buf = w.buf[:0]
}

func (w *response) Header() http.Header { return w.header }

func (w *response) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if code < 200 {
		return // informational answers are not sent (the daemon sends none)
	}
	w.status, w.wroteHeader = code, true
	if cl := w.header.Get("Content-Length"); cl != "" {
		if n, ok := parseLength(cl); ok {
			w.declared = n
		} else {
			w.header.Del("Content-Length")
		}
	}
}

func bodyAllowed(status int) bool {
	return status != http.StatusNoContent && status != http.StatusNotModified
}

func (w *response) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if w.declared >= 0 && w.written+int64(len(p)) > w.declared {
		return 0, http.ErrContentLength
	}
	w.written += int64(len(p))
	if w.q.method == http.MethodHead || w.c.offer.Sent() {
		// An answer sent early is the handler's: its bytes are dropped.
		return len(p), nil
	}
	if !w.headSent {
		if len(w.buf)+len(p) <= maxBuffered {
			w.buf = append(w.buf, p...)
			return len(p), nil
		}
		if err := w.startStream(); err != nil {
			return 0, err
		}
	}
	if err := w.writeBody(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteString lets io.WriteString skip a copy.
func (w *response) WriteString(s string) (int, error) {
	if !w.headSent && !w.c.offer.Sent() && w.wroteHeader && bodyAllowed(w.status) && w.declared < 0 && w.q.method != http.MethodHead && len(w.buf)+len(s) <= maxBuffered {
		w.written += int64(len(s))
		w.buf = append(w.buf, s...)
		return len(s), nil
	}
	return w.Write([]byte(s))
}

// Flush sends what is written so far (http.Flusher).
func (w *response) Flush() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.c.offer.Sent() {
		return
	}
	if !w.headSent && w.startStream() != nil {
		return
	}
	_ = w.c.bw.Flush()
}

// FlushError is Flush with its error (http.ResponseController).
func (w *response) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.c.offer.Sent() {
		return nil
	}
	if !w.headSent {
		if err := w.startStream(); err != nil {
			return err
		}
	}
	return w.c.bw.Flush()
}

// SetReadDeadline bounds the time the request body may still take
// (http.ResponseController); the zero time lifts the bound. It is kept to
// the reaper's period.
func (w *response) SetReadDeadline(t time.Time) error {
	if t.IsZero() {
		w.c.bodyDeadline.Store(0)
	} else {
		w.c.bodyDeadline.Store(t.UnixNano())
	}
	return nil
}

// startStream writes the head of an answer whose length is not known yet.
func (w *response) startStream() error {
	if w.declared < 0 && bodyAllowed(w.status) && w.q.method != http.MethodHead {
		if w.q.minor >= 1 {
			w.chunked = true
		} else {
			w.closeAfter = true // HTTP/1.0: the close ends the body
		}
	}
	w.writeHead(-1)
	w.headSent = true
	buf := w.buf
	w.buf = w.buf[:0]
	return w.writeBody(buf)
}

func (w *response) writeBody(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	bw := w.c.bw
	if w.chunked {
		bw.Write(strconv.AppendInt(w.c.scratch[:0], int64(len(p)), 16))
		bw.WriteString("\r\n")
		bw.Write(p)
		_, err := bw.WriteString("\r\n")
		return err
	}
	_, err := bw.Write(p)
	return err
}

// finish completes the answer and flushes it.
func (w *response) finish() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	bw := w.c.bw
	if !w.headSent {
		length := int64(len(w.buf))
		if w.q.method == http.MethodHead {
			length = w.written
			if length == 0 {
				length = -1
			}
		}
		if !bodyAllowed(w.status) {
			length = -1
		}
		w.writeHead(length)
		if w.q.method != http.MethodHead {
			bw.Write(w.buf)
		}
	} else if w.chunked {
		bw.WriteString("0\r\n\r\n")
	}
	if w.declared >= 0 && w.written < w.declared && w.q.method != http.MethodHead {
		// The body is shorter than its Content-Length: the client can only
		// tell from the close.
		w.closeAfter = true
	}
	return bw.Flush()
}

// writeHead writes the status line and header; length >= 0 is the
// Content-Length to add when the handler set none.
func (w *response) writeHead(length int64) {
	bw := w.c.bw
	bw.WriteString("HTTP/1.1 ")
	bw.WriteString(statusLine(w.status))
	for k, vs := range w.header {
		if !validToken(k) {
			continue
		}
		for _, v := range vs {
			bw.WriteString(k)
			bw.WriteString(": ")
			writeValue(bw, v)
			bw.WriteString("\r\n")
		}
	}
	if _, ok := w.header["Date"]; !ok {
		bw.Write(w.c.s.dateLine())
	}
	if bodyAllowed(w.status) && w.q.method != http.MethodHead && len(w.buf) > 0 {
		if _, ok := w.header["Content-Type"]; !ok {
			bw.WriteString("Content-Type: ")
			bw.WriteString(http.DetectContentType(w.buf[:min(len(w.buf), 512)]))
			bw.WriteString("\r\n")
		}
	}
	if length >= 0 && w.declared < 0 {
		bw.WriteString("Content-Length: ")
		bw.Write(strconv.AppendInt(w.c.scratch[:0], length, 10))
		bw.WriteString("\r\n")
	}
	if w.chunked {
		bw.WriteString("Transfer-Encoding: chunked\r\n")
	}
	if _, ok := w.header["Connection"]; !ok {
		switch {
		case w.closeAfter:
			bw.WriteString("Connection: close\r\n")
		case w.q.minor == 0:
			bw.WriteString("Connection: keep-alive\r\n")
		}
	}
	bw.WriteString("\r\n")
}

// writeValue writes a header value with its line breaks as spaces, so
// that no value can end the header.
func writeValue(bw interface{ WriteString(string) (int, error) }, v string) {
	if !strings.ContainsAny(v, "\r\n") {
		bw.WriteString(v)
		return
	}
	bw.WriteString(strings.NewReplacer("\r", " ", "\n", " ").Replace(v))
}

// statusLine is "<code> <text>\r\n".
func statusLine(code int) string {
	switch code {
	case http.StatusOK:
		return "200 OK\r\n"
	case http.StatusNoContent:
		return "204 No Content\r\n"
	}
	text := http.StatusText(code)
	if text == "" {
		text = "status code " + strconv.Itoa(code)
	}
	return strconv.Itoa(code) + " " + text + "\r\n"
}
