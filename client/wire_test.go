package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rawServer accepts connections on loopback and hands each request, read
// with net/http's parser, to answer, which writes raw bytes back; answer
// returning false closes the connection.
func rawServer(t *testing.T, answer func(n int, r *http.Request, body []byte, w io.Writer) bool) (addr string, conns *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns = new(atomic.Int32)
	var wg sync.WaitGroup
	var reqs atomic.Int32
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			wg.Go(func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				br := bufio.NewReader(c)
				for range 100 {
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					body, _ := io.ReadAll(r.Body)
					if !answer(int(reqs.Add(1)), r, body, c) {
						return
					}
				}
			})
		}
	})
	return ln.Addr().String(), conns
}

func newTestClient(t *testing.T, addr string, opts ...Option) *Client {
	t.Helper()
	c, err := New(addr, append([]Option{WithRetry(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if c.wires[0] == nil {
		t.Fatal("a plain-http loopback address should use the wire transport")
	}
	t.Cleanup(c.wires[0].closeIdle)
	return c
}

// The request on the wire is what the daemon expects: method, escaped path
// under the base's prefix, Host, token, JSON body with its length; the
// connection is kept and reused.
func TestWireRequestAndKeepAlive(t *testing.T) {
	var mu sync.Mutex
	var got []string
	addr, conns := rawServer(t, func(n int, r *http.Request, body []byte, w io.Writer) bool {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.EscapedPath()+" host="+r.Host+" auth="+r.Header.Get("Authorization")+" ct="+r.Header.Get("Content-Type")+" body="+string(body))
		mu.Unlock()
		io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}")
		return true
	})
	c := newTestClient(t, "http://"+addr+"/prefix", WithToken("tok"))
	ctx := context.Background()
	for range 3 {
		if err := c.Health(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Release(ctx, "a/b"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for 5 sequential requests; want 1, kept alive", n)
	}
	want := []string{
		"GET /prefix/healthz host=" + addr + " auth=Bearer tok ct= body=",
		"DELETE /prefix/v1/leases/a%2Fb host=" + addr + " auth=Bearer tok ct= body=",
	}
	if got[0] != want[0] || got[3] != want[1] {
		t.Errorf("requests:\n%s\nwant first %q, fourth %q", strings.Join(got, "\n"), want[0], want[1])
	}
}

// A kept-alive connection the daemon closed (its idle timeout) is not an
// error: the request goes again on a new connection, and the answer's
// reader is told it was sent twice.
func TestWireRetriesAClosedKeptAliveConnection(t *testing.T) {
	addr, conns := rawServer(t, func(n int, r *http.Request, body []byte, w io.Writer) bool {
		io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
		return false // close after each answer, without saying so
	})
	c := newTestClient(t, addr)
	for range 3 {
		var retried []bool
		err := c.send(context.Background(), "GET", "/healthz", nil, func(status int, body []byte, r bool) error {
			retried = append(retried, r)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(retried) != 1 {
			t.Fatalf("read called %d times", len(retried))
		}
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("%d connections; want 3 (one per request, the dead one dropped)", n)
	}
}

// The same when the close reached the client long before its next
// request (the poller has seen it and marked the connection readable):
// the client waits for the answer without a read first (sendThenAwait),
// so what wakes it is the reset its request draws from the closed
// socket, not the close it already saw. And a daemon that closes a fresh
// connection without answering is "no answer", at once.
func TestWireNoticesACloseSeenWhileIdle(t *testing.T) {
	addr, conns := rawServer(t, func(n int, r *http.Request, body []byte, w io.Writer) bool {
		if r.URL.Path == "/drop" {
			return false
		}
		io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
		return false // close after each answer, without saying so
	})
	c := newTestClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 3 {
		if err := c.Health(ctx); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		time.Sleep(50 * time.Millisecond) // the close arrives and is polled while the connection is idle
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("%d connections; want 3", n)
	}
	c.wires[0].closeIdle()
	err := c.send(ctx, "GET", "/drop", nil, func(int, []byte, bool) error { return nil })
	if !errors.Is(err, errNoAnswer) || ctx.Err() != nil {
		t.Fatalf("err = %v (ctx: %v); want no answer, before the deadline", err, ctx.Err())
	}
}

// Answers in every framing the client accepts are read whole; those that
// end the connection are not reused.
func TestWireAnswerFramings(t *testing.T) {
	for _, tc := range []struct {
		name, raw, body string
		status          int
		reuse           bool
	}{
		{"length", "HTTP/1.1 201 Created\r\nContent-Length: 5\r\n\r\nhello", "hello", 201, true},
		{"chunked with trailer", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2\r\nlo\r\n0\r\nX-T: 1\r\n\r\n", "hello", 200, true},
		{"continue first", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok", "ok", 200, true},
		{"no content", "HTTP/1.1 204 No Content\r\n\r\n", "", 204, true},
		{"connection close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", "ok", 200, false},
		{"close-delimited", "HTTP/1.0 200 OK\r\n\r\nto the end", "to the end", 200, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, conns := rawServer(t, func(n int, r *http.Request, body []byte, w io.Writer) bool {
				io.WriteString(w, tc.raw)
				return !strings.Contains(tc.name, "close")
			})
			c := newTestClient(t, addr)
			for range 2 {
				var got string
				var status int
				err := c.send(context.Background(), "GET", "/x", nil, func(s int, body []byte, _ bool) error {
					status, got = s, string(body)
					return nil
				})
				if err != nil || status != tc.status || got != tc.body {
					t.Fatalf("status %d body %q err %v; want %d %q", status, got, err, tc.status, tc.body)
				}
			}
			if want := map[bool]int32{true: 1, false: 2}[tc.reuse]; conns.Load() != want {
				t.Errorf("%d connections for 2 requests; want %d", conns.Load(), want)
			}
		})
	}
}

// Malformed or oversized answers are errors that say what was wrong, and
// their connection is not reused.
func TestWireBadAnswers(t *testing.T) {
	for _, tc := range []struct{ name, raw, want string }{
		{"not http", "SSH-2.0-OpenSSH\r\n", "not an HTTP/1.x status line"},
		{"bad length", "HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n", "bad Content-Length"},
		{"too long", "HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n", "at most"},
		{"long header", "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 5000) + "\r\n\r\n", "longer than 4096"},
		{"gzip", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "unsupported Transfer-Encoding"},
		{"short body", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", "unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, _ := rawServer(t, func(n int, r *http.Request, body []byte, w io.Writer) bool {
				io.WriteString(w, tc.raw)
				return false
			})
			c := newTestClient(t, addr)
			err := c.Health(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want it to say %q", err, tc.want)
			}
			if n := len(c.wires[0].idle); n != 0 {
				t.Errorf("%d idle connections after a bad answer", n)
			}
		})
	}
}

// A call whose context ends while the daemon has not answered returns the
// context's error promptly, and its connection is dropped, not reused
// (it may still carry the late answer).
func TestWireContextEndsTheCall(t *testing.T) {
	release := make(chan struct{})
	addr, conns := rawServer(t, func(n int, r *http.Request, body []byte, w io.Writer) bool {
		if n == 1 {
			<-release
		}
		io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
		return true
	})
	defer close(release)
	c := newTestClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.Health(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("err = %v after %v; want the context's deadline, promptly", err, time.Since(start))
	}
	if n := len(c.wires[0].idle); n != 0 {
		t.Fatalf("%d idle connections after a cancelled call", n)
	}
	if err := c.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections; want 2 (the cancelled one dropped)", n)
	}
}

// A daemon that cannot be reached is "no answer" (the caller may retry
// elsewhere), not an answered failure.
func TestWireUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := newTestClient(t, addr)
	answered, _, err := c.sendOnce(context.Background(), route{base: c.bases[0], wire: c.wires[0]}, "GET", "/healthz", nil, nil, func(int, []byte, bool) error { return nil })
	if answered || err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("answered %v err %v", answered, err)
	}
}

// Only plain-http addresses without a proxy take the wire transport; an
// https address, a proxied one and WithHTTPClient keep net/http's.
func TestWireOnlyWhereItIsEnough(t *testing.T) {
	proxy := func(r *http.Request) (*url.URL, error) {
		if r.URL.Hostname() == "10.1.2.3" {
			return url.Parse("http://127.0.0.1:9")
		}
		return nil, nil
	}
	ws := wires([]string{"http://10.1.2.3:7070", "https://127.0.0.1:7070", "http://127.0.0.1:7071", "https://rpd.example"}, proxy, "", nil)
	if ws[0] != nil || ws[1] == nil || ws[2] == nil {
		t.Errorf("wires: proxied %v, https %v, loopback %v; want nil, set, set", ws[0] != nil, ws[1] != nil, ws[2] != nil)
	}
	if w := ws[1]; w.tls == nil || w.tls.ServerName != "127.0.0.1" || ws[2].tls != nil {
		t.Errorf("the https wire's TLS: %+v; the http wire's: %+v", w.tls, ws[2].tls)
	}
	if w := ws[3]; w.addr != "rpd.example:443" || w.tls.ServerName != "rpd.example" {
		t.Errorf("https without a port: %s, server name %q; want port 443", w.addr, w.tls.ServerName)
	}
	c, err := New("127.0.0.1:7071", WithHTTPClient(http.DefaultClient))
	if err != nil {
		t.Fatal(err)
	}
	if c.wires[0] != nil {
		t.Error("WithHTTPClient: the given client should carry every request")
	}
}

// Under -race: many goroutines share the pool; every call gets its own
// answer, and no more connections are opened than calls ran at once.
func TestWireConcurrentCalls(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.URL.Query().Get("echo"))
	}))
	var conns atomic.Int32
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c := newTestClient(t, srv.URL)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 50 {
				want := strings.Repeat("x", g) + string(rune('a'+i%26))
				err := c.send(context.Background(), "GET", "/?echo="+want, nil, func(_ int, body []byte, _ bool) error {
					if !bytes.Equal(body, []byte(want)) {
						t.Errorf("got %q, want %q", body, want)
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := conns.Load(); n > 16 {
		t.Errorf("%d connections for 16 concurrent callers", n)
	}
}
