package httpapi

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// CloseQuiet closes a connection that sent no request and leaves one whose
// request is under way to finish it.
func TestTrackedServerCloseQuiet(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	inHandler, release := make(chan struct{}), make(chan struct{})
	s := NewTrackedServer(&http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(inHandler)
		<-release
		io.WriteString(w, "done")
	})})
	go s.Serve(ln)
	defer s.Close()

	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		return c
	}
	busy := dial()
	defer busy.Close()
	if _, err := io.WriteString(busy, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-inHandler:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the handler")
	}
	quiet := dial()
	defer quiet.Close()
	// The server has seen the quiet connection once ConnState said New:
	// poll CloseQuiet until it is closed (bounded).
	closed := make(chan error, 1)
	go func() {
		_, err := quiet.Read(make([]byte, 1))
		closed <- err
	}()
	deadline := time.After(10 * time.Second)
	for done := false; !done; {
		s.CloseQuiet()
		select {
		case err := <-closed:
			if err != io.EOF && !strings.Contains(err.Error(), "reset") {
				t.Fatalf("quiet connection: %v, want EOF", err)
			}
			done = true
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatal("CloseQuiet never closed the connection that sent nothing")
		}
	}
	close(release)
	resp, err := http.ReadResponse(bufio.NewReader(busy), nil)
	if err != nil {
		t.Fatalf("the busy connection lost its answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "done" {
		t.Fatalf("busy answer %q", body)
	}
}
