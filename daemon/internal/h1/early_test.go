package h1

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpdhq/rpd/internal/answer"
)

// earlyHandler arms its answer (package answer) and has another goroutine,
// standing for the store's writer, take and send it before the handler
// answers the same through w, as the daemon's grant routes do:
//
//	/early        a JSON body numbered by the request
//	/early-big    8 MiB, more than the socket takes at once
//	/early-500    sent early, then the handler answers 500 (a bug)
//	/armed-only   armed, but no write takes it: the handler's answer goes
//	/offered      whether the request was offered an early answer
func earlyHandler() http.Handler {
	var n atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		body := []byte(fmt.Sprintf(`{"request":%d}`, n.Add(1)))
		switch r.URL.Path {
		case "/offered":
			fmt.Fprint(w, answer.Offered(ctx))
			return
		case "/early-big":
			body = bytes.Repeat([]byte("0123456789abcdef"), 8<<20/16)
		}
		answer.Arm(ctx, http.StatusOK, "application/json", body)
		if r.URL.Path != "/armed-only" {
			e := answer.Take(ctx)
			done := make(chan struct{})
			go func() { defer close(done); e.Send() }()
			<-done
		}
		switch r.URL.Path {
		case "/early-500":
			http.Error(w, "late failure", http.StatusInternalServerError)
		case "/armed-only":
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprint(w, "late")
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Write(body)
		}
	})
}

func TestEarlyAnswersKeepTheConnectionsOrder(t *testing.T) {
	addr := serve(t, &Server{Handler: earlyHandler()})
	req := "GET /early HTTP/1.1\r\nHost: x\r\n\r\n"
	resps := raw(t, addr, req+req+"GET /armed-only HTTP/1.1\r\nHost: x\r\n\r\n"+req, 4)
	for i, want := range []string{`{"request":1}`, `{"request":2}`, "late", `{"request":4}`} {
		r := resps[i]
		if r.StatusCode != 200 || bodyOf(r) != want {
			t.Fatalf("answer %d: %d %q, want 200 %q", i, r.StatusCode, bodyOf(r), want)
		}
		if i == 2 {
			continue
		}
		if ct, cl := r.Header.Get("Content-Type"), r.Header.Get("Content-Length"); ct != "application/json" || cl != strconv.Itoa(len(want)) {
			t.Errorf("answer %d: Content-Type %q, Content-Length %q", i, ct, cl)
		}
		if r.Header.Get("Date") == "" || r.Close {
			t.Errorf("answer %d: no Date, or the connection closes: %v", i, r.Header)
		}
	}
}

func TestEarlyAnswerLargerThanTheSocketTakes(t *testing.T) {
	addr := serve(t, &Server{Handler: earlyHandler()})
	c := dial(t, addr)
	io.WriteString(c, "GET /early-big HTTP/1.1\r\nHost: x\r\n\r\nGET /early HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	r, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r.Body)
	want := bytes.Repeat([]byte("0123456789abcdef"), 8<<20/16)
	if err != nil || !bytes.Equal(b, want) {
		i := 0
		for i < len(b) && i < len(want) && b[i] == want[i] {
			i++
		}
		t.Fatalf("the big answer: %d bytes (%v), differing from byte %d: %.40q", len(b), err, i, b[i:])
	}
	r, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := bodyOf(r); got != `{"request":2}` {
		t.Fatalf("the answer after the big one: %q", got)
	}
}

func TestHandlerDisagreeingWithItsEarlyAnswerClosesTheConnection(t *testing.T) {
	addr := serve(t, &Server{Handler: earlyHandler()})
	c := dial(t, addr)
	io.WriteString(c, "GET /early-500 HTTP/1.1\r\nHost: x\r\n\r\nGET /early HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	r, err := http.ReadResponse(br, nil)
	if err != nil || r.StatusCode != 200 || bodyOf(r) != `{"request":1}` {
		t.Fatalf("the early answer: %v %v", r, err)
	}
	if r, err := http.ReadResponse(br, nil); err == nil {
		t.Fatalf("an answer after the handler contradicted its early one: %d %q", r.StatusCode, bodyOf(r))
	}
}

func TestEarlyAnswersOfferedOnlyWhereTheyFit(t *testing.T) {
	for _, c := range []struct {
		name, req string
		noEarly   bool
		want      string
	}{
		{"HTTP/1.1 kept alive", "GET /offered HTTP/1.1\r\nHost: x\r\n\r\n", false, "true"},
		{"HTTP/1.0", "GET /offered HTTP/1.0\r\n\r\n", false, "false"},
		{"Connection: close", "GET /offered HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", false, "false"},
		{"NoEarlyAnswers", "GET /offered HTTP/1.1\r\nHost: x\r\n\r\n", true, "false"},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr := serve(t, &Server{Handler: earlyHandler(), NoEarlyAnswers: c.noEarly})
			if got := bodyOf(raw(t, addr, c.req, 1)[0]); got != c.want {
				t.Fatalf("offered = %s, want %s", got, c.want)
			}
		})
	}
	// A connection without a file descriptor (net.Pipe) offers none.
	s := &Server{Handler: earlyHandler()}
	if nc := newConn(s, pipeConn(t)); nc.offer != nil {
		t.Fatal("a connection without a descriptor offers early answers")
	}
}

// TestEarlyAnswersUnderRace runs clients that each send requests one at a
// time on kept-alive connections, half of them answered early, and checks
// every answer arrives whole and in order.
func TestEarlyAnswersUnderRace(t *testing.T) {
	addr := serve(t, &Server{Handler: earlyHandler()})
	done := make(chan error, 8)
	for range 8 {
		go func() {
			c, err := dialErr(addr)
			if err != nil {
				done <- err
				return
			}
			defer c.Close()
			br := bufio.NewReader(c)
			for i := range 200 {
				path := []string{"/early", "/armed-only"}[i%2]
				if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
					done <- err
					return
				}
				r, err := http.ReadResponse(br, nil)
				if err != nil {
					done <- fmt.Errorf("request %d: %w", i, err)
					return
				}
				b := bodyOf(r)
				if (path == "/early") != strings.HasPrefix(b, `{"request":`) {
					done <- fmt.Errorf("request %d to %s answered %q", i, path, b)
					return
				}
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func pipeConn(t *testing.T) net.Conn {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return a
}

// dialErr is dial for a goroutine other than the test's.
func dialErr(addr string) (net.Conn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return c, c.SetDeadline(time.Now().Add(30 * time.Second))
}
