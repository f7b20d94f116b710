package h1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// serve starts s (its Handler set) on a loopback port and returns the
// address; the server is closed when the test ends.
func serve(t testing.TB, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return ln.Addr().String()
}

// echo answers with what it was sent: method, path, host, a header, the
// body, and the request's context state.
func echo(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "body: "+err.Error(), http.StatusRequestTimeout)
		return
	}
	switch r.URL.Path {
	case "/none":
		w.WriteHeader(http.StatusNoContent)
		return
	case "/big":
		w.Header().Set("Content-Type", "text/plain")
		for i := 0; i < 3000; i++ {
			fmt.Fprintf(w, "line %04d of a long answer\n", i)
		}
		return
	case "/panic":
		panic("handler panics")
	}
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprintf(w, "%s %s host=%s x=%s len=%d body=%s", r.Method, r.URL.RequestURI(), r.Host, r.Header.Get("X-Test"), r.ContentLength, b)
}

// raw sends req on a new connection and returns the parsed answers, n of
// them; heads lists the answers (by index) to HEAD requests.
func raw(t *testing.T, addr, req string, n int, heads ...int) []*http.Response {
	t.Helper()
	c := dial(t, addr)
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var out []*http.Response
	for i := 0; i < n; i++ {
		var sent *http.Request
		if slices.Contains(heads, i) {
			sent = &http.Request{Method: http.MethodHead}
		}
		resp, err := http.ReadResponse(br, sent)
		if err != nil {
			t.Fatalf("answer %d to %.60q: %v", i, req, err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("answer %d body: %v", i, err)
		}
		resp.Body = io.NopCloser(strings.NewReader(string(b)))
		out = append(out, resp)
	}
	return out
}

// dial connects to addr for the rest of the test, with a 10 s deadline.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

func bodyOf(r *http.Response) string { b, _ := io.ReadAll(r.Body); return string(b) }

func TestRoundTripsThroughNetHTTPClient(t *testing.T) {
	addr := serve(t, &Server{Handler: http.HandlerFunc(echo)})
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer c.CloseIdleConnections()
	for i, tc := range []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"GET", "/a?b=c", "", 200, "GET /a?b=c host=" + addr + " x=v len=0 body="},
		{"POST", "/p", `{"k":1}`, 200, `POST /p host=` + addr + ` x=v len=7 body={"k":1}`},
		{"DELETE", "/none", "", 204, ""},
		{"PUT", "/x", strings.Repeat("z", 100000), 200, "PUT /x host=" + addr + " x=v len=100000 body=" + strings.Repeat("z", 100000)},
	} {
		var body io.Reader
		if tc.body != "" {
			body = strings.NewReader(tc.body)
		}
		req, _ := http.NewRequest(tc.method, "http://"+addr+tc.path, body)
		req.Header.Set("X-Test", "v")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		got := bodyOf(resp)
		resp.Body.Close()
		if resp.StatusCode != tc.status || got != tc.want {
			t.Fatalf("%d: %s %s = %d %.80q, want %d %.80q", i, tc.method, tc.path, resp.StatusCode, got, tc.status, tc.want)
		}
		if resp.Header.Get("Date") == "" {
			t.Errorf("%d: no Date header", i)
		}
	}
	// A long answer is streamed chunked and arrives whole.
	resp, err := c.Get("http://" + addr + "/big")
	if err != nil {
		t.Fatal(err)
	}
	got := bodyOf(resp)
	resp.Body.Close()
	if len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" || strings.Count(got, "\n") != 3000 || !strings.HasSuffix(got, "line 2999 of a long answer\n") {
		t.Fatalf("big answer: TE %v, %d lines", resp.TransferEncoding, strings.Count(got, "\n"))
	}
}

func TestKeepAlivePipeliningAndFraming(t *testing.T) {
	addr := serve(t, &Server{Handler: http.HandlerFunc(echo)})
	// Three requests in one write: a Content-Length body, a chunked body
	// with a trailer, a HEAD.
	req := "POST /1 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc" +
		"POST /2 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nxyz\r\n2\r\n12\r\n0\r\nT: v\r\n\r\n" +
		"HEAD /3 HTTP/1.1\r\nHost: h\r\n\r\n" +
		"GET /4 HTTP/1.1\r\nhost: h\r\nx-test: lower\r\nConnection: close\r\n\r\n"
	rs := raw(t, addr, req, 4, 2)
	want := []string{"POST /1 host=h x= len=3 body=abc", "POST /2 host=h x= len=-1 body=xyz12", "", "GET /4 host=h x=lower len=0 body="}
	for i, r := range rs {
		if got := bodyOf(r); r.StatusCode != 200 || got != want[i] {
			t.Errorf("answer %d: %d %q, want 200 %q", i, r.StatusCode, got, want[i])
		}
	}
	if rs[2].ContentLength != int64(len("HEAD /3 host=h x= len=0 body=")) {
		t.Errorf("HEAD Content-Length %d, want the GET's length", rs[2].ContentLength)
	}
	if !rs[3].Close {
		t.Errorf("the answer to Connection: close does not say close")
	}
}

func TestHTTP10(t *testing.T) {
	addr := serve(t, &Server{Handler: http.HandlerFunc(echo)})
	rs := raw(t, addr, "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /b HTTP/1.0\r\n\r\n", 2)
	if rs[0].Close || rs[0].Header.Get("Connection") != "keep-alive" || !rs[1].Close {
		t.Fatalf("HTTP/1.0 keep-alive: close %v/%v, Connection %q", rs[0].Close, rs[1].Close, rs[0].Header.Get("Connection"))
	}
	if got := bodyOf(rs[1]); got != "GET /b host= x= len=0 body=" {
		t.Fatalf("second answer %q", got)
	}
}

func TestExpectContinue(t *testing.T) {
	addr := serve(t, &Server{Handler: http.HandlerFunc(echo)})
	c := dial(t, addr)
	io.WriteString(c, "POST /e HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("first line %q, %v; want 100 Continue before the body is sent", line, err)
	}
	br.ReadString('\n')
	io.WriteString(c, "body")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := bodyOf(resp); got != "POST /e host=h x= len=4 body=body" {
		t.Fatalf("answer %q", got)
	}
}

func TestBadRequestsAreAnsweredAndClosed(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(echo), MaxHeaderBytes: 1 << 10,
		ErrorBody: func(status int, text string) (string, []byte) {
			return "application/json", fmt.Appendf(nil, `{"status":%d,"text":%q}`, status, text)
		}}
	addr := serve(t, s)
	for _, tc := range []struct {
		name, req string
		status    int
	}{
		{"headers too large", "GET / HTTP/1.1\r\nHost: h\r\nX: " + strings.Repeat("x", 2000) + "\r\n\r\n", 431},
		{"bad escape", "GET /%zz HTTP/1.1\r\nHost: h\r\n\r\n", 400},
		{"no Host", "GET / HTTP/1.1\r\n\r\n", 400},
		{"two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
		{"bad Host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400},
		{"bad Content-Length", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", 400},
		{"two Content-Lengths", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400},
		{"TE and CL", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"gzip TE", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
		{"folded header", "GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n", 400},
		{"space before colon", "GET / HTTP/1.1\r\nHost: h\r\nX : a\r\n\r\n", 400},
		{"control byte in value", "GET / HTTP/1.1\r\nHost: h\r\nX: a\x01b\r\n\r\n", 400},
		{"HTTP/2.0", "GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505},
		{"garbage version", "GET / FTP/1.0\r\nHost: h\r\n\r\n", 400},
		{"Expect other", "POST / HTTP/1.1\r\nHost: h\r\nExpect: 200-ok\r\nContent-Length: 1\r\n\r\nx", 417},
		{"no target", "GET  HTTP/1.1\r\nHost: h\r\n\r\n", 400},
		{"empty line", "\r\n", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := raw(t, addr, tc.req, 1)[0]
			body := bodyOf(r)
			if r.StatusCode != tc.status || !r.Close || r.Header.Get("Content-Type") != "application/json" || !strings.Contains(body, fmt.Sprintf(`"status":%d`, tc.status)) {
				t.Fatalf("%d close=%v %q %s; want %d in the JSON form, closed", r.StatusCode, r.Close, r.Header.Get("Content-Type"), body, tc.status)
			}
		})
	}
}

func TestPanicClosesTheConnectionOnly(t *testing.T) {
	addr := serve(t, &Server{Handler: http.HandlerFunc(echo)})
	c := dial(t, addr)
	io.WriteString(c, "GET /panic HTTP/1.1\r\nHost: h\r\n\r\n")
	if _, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
		t.Fatal("a panicking handler's request was answered")
	}
	if r := raw(t, addr, "GET /after HTTP/1.1\r\nHost: h\r\n\r\n", 1)[0]; r.StatusCode != 200 {
		t.Fatalf("after a panic: %d", r.StatusCode)
	}
}

func TestTimeouts(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slowbody" {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		}
		echo(w, r)
	}), ReadHeaderTimeout: 200 * time.Millisecond, IdleTimeout: 300 * time.Millisecond}
	addr := serve(t, s)
	closedWithin := func(t *testing.T, c net.Conn, d time.Duration) {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(d))
		b, err := io.ReadAll(c)
		if err != nil {
			t.Fatalf("not closed within %v (read %q): %v", d, b, err)
		}
	}
	t.Run("header", func(t *testing.T) {
		c, _ := net.Dial("tcp", addr)
		defer c.Close()
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n") // never ends
		closedWithin(t, c, 3*time.Second)
	})
	t.Run("new connection", func(t *testing.T) {
		c, _ := net.Dial("tcp", addr)
		defer c.Close()
		closedWithin(t, c, 3*time.Second)
	})
	t.Run("idle", func(t *testing.T) {
		c, _ := net.Dial("tcp", addr)
		defer c.Close()
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
		br := bufio.NewReader(c)
		r, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		bodyOf(r)
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
			t.Fatalf("idle connection: %v, want closed", err)
		}
	})
	t.Run("body", func(t *testing.T) {
		c, _ := net.Dial("tcp", addr)
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "POST /slowbody HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc")
		r, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := bodyOf(r); r.StatusCode != http.StatusRequestTimeout || !strings.Contains(got, "timeout") || !r.Close {
			t.Fatalf("slow body: %d %q close=%v; want the handler's 408 and a close", r.StatusCode, got, r.Close)
		}
	})
}

func TestContextEndsWhenTheClientGoesAway(t *testing.T) {
	ended := make(chan error, 1)
	started := make(chan struct{})
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		close(started)
		select {
		case <-r.Context().Done():
			ended <- r.Context().Err()
		case <-time.After(10 * time.Second):
			ended <- errors.New("the context outlived its client by 10 s")
		}
	})}
	addr := serve(t, s)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "POST /wait HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}")
	<-started
	c.Close()
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

// A request's context is its connection's child, itself BaseContext's: a
// cancel of BaseContext (the daemon's shutdown of long-polls) reaches a
// request under way, and each request's context ends when its handler
// returns while the connection lives on.
func TestContextEndsWithBaseContextAndWithItsHandler(t *testing.T) {
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	started := make(chan struct{}, 1)
	ended := make(chan error, 1)
	first := make(chan context.Context, 1)
	s := &Server{BaseContext: base, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/first" {
			first <- r.Context()
			echo(w, r)
			return
		}
		started <- struct{}{}
		select {
		case <-r.Context().Done():
			ended <- r.Context().Err()
		case <-time.After(10 * time.Second):
			ended <- errors.New("the request's context outlived BaseContext's cancel by 10 s")
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})}
	addr := serve(t, s)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	io.WriteString(c, "GET /first HTTP/1.1\r\nHost: h\r\n\r\n")
	r, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	bodyOf(r)
	// Its context ends once serveRequest returns, which may be just
	// after the answer reached us.
	select {
	case <-(<-first).Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the first request's context outlived its handler by 5 s")
	}
	io.WriteString(c, "GET /wait HTTP/1.1\r\nHost: h\r\n\r\n")
	<-started
	cancelBase()
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if r, err := http.ReadResponse(br, nil); err != nil || r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("the waiting request's answer on the same connection: %v, %v; want its 503", r, err)
	}
}

// A long request whose client stays keeps its connection: the watch's
// read of the next request's first byte is handed back.
func TestWatchKeepsThePipelinedByte(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(4 * reapEvery)
		}
		echo(w, r)
	})}
	addr := serve(t, s)
	c := dial(t, addr)
	io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: h\r\n\r\n")
	time.Sleep(2 * reapEvery) // the watch is reading by now
	io.WriteString(c, "GET /next HTTP/1.1\r\nHost: h\r\n\r\n")
	br := bufio.NewReader(c)
	for _, want := range []string{"GET /slow host=h x= len=0 body=", "GET /next host=h x= len=0 body="} {
		r, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := bodyOf(r); got != want {
			t.Fatalf("%q, want %q", got, want)
		}
	}
}

func TestShutdownClosesQuietConnectionsAndWaitsForRequests(t *testing.T) {
	release := make(chan struct{})
	inHandler := make(chan struct{})
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			close(inHandler)
			<-release
		}
		io.WriteString(w, "done")
	})}
	addr := serve(t, s)
	idle, _ := net.Dial("tcp", addr)
	defer idle.Close()
	busy, _ := net.Dial("tcp", addr)
	defer busy.Close()
	io.WriteString(busy, "GET /hold HTTP/1.1\r\nHost: h\r\n\r\n")
	<-inHandler
	var wg sync.WaitGroup
	var serr error
	wg.Go(func() { serr = s.Shutdown(context.Background()) })
	_ = idle.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := idle.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("quiet connection during shutdown: %v, want closed at once", err)
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Error("a connection was accepted after Shutdown")
	}
	close(release)
	_ = busy.SetReadDeadline(time.Now().Add(5 * time.Second))
	r, err := http.ReadResponse(bufio.NewReader(busy), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := bodyOf(r); got != "done" || !r.Close {
		t.Fatalf("request in flight: %q close=%v; want answered and closed", got, r.Close)
	}
	wg.Wait()
	if serr != nil {
		t.Fatal(serr)
	}
}

// TestStressWatchAndPipelining runs many keep-alive clients at once, some
// requests long enough for the disconnect watch to start, some pipelined
// behind them, some clients going away mid-request: every answer a client
// reads is its own request's, in order (run with -race).
func TestStressWatchAndPipelining(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d, err := time.ParseDuration(r.URL.Query().Get("sleep")); err == nil {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		echo(w, r)
	}), ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second}
	addr := serve(t, s)
	const clients, rounds = 12, 40
	var wg sync.WaitGroup
	for g := 0; g < clients; g++ {
		wg.Go(func() {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(60 * time.Second))
			br := bufio.NewReader(c)
			for i := 0; i < rounds; i++ {
				sleep := "0s"
				if (g+i)%7 == 0 {
					sleep = "120ms" // the watch starts
				}
				body := fmt.Sprintf("g%d-i%d", g, i)
				req := fmt.Sprintf("POST /s?sleep=%s HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n%s", sleep, len(body), body)
				pipelined := i%3 == 0
				if pipelined {
					req += fmt.Sprintf("GET /p%d HTTP/1.1\r\nHost: h\r\n\r\n", i)
				}
				if g == 0 && i == rounds-1 {
					// Going away during a long request: nothing to read.
					io.WriteString(c, "GET /s?sleep=5s HTTP/1.1\r\nHost: h\r\n\r\n")
					return
				}
				if _, err := io.WriteString(c, req); err != nil {
					t.Error(err)
					return
				}
				want := []string{fmt.Sprintf("POST /s?sleep=%s host=h x= len=%d body=%s", sleep, len(body), body)}
				if pipelined {
					want = append(want, fmt.Sprintf("GET /p%d host=h x= len=0 body=", i))
				}
				for _, w := range want {
					r, err := http.ReadResponse(br, nil)
					if err != nil {
						t.Errorf("client %d round %d: %v", g, i, err)
						return
					}
					if got := bodyOf(r); got != w {
						t.Errorf("client %d round %d: %q, want %q", g, i, got, w)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// The disconnect watch starts only for a request that ran across a whole
// reaper period: the phase's start is the reaper's clock, which may be
// almost a period old, so a request running at the first tick after it
// began may be microseconds old.
func TestWatchOnlyForALongRequest(t *testing.T) {
	s := &Server{}
	start := time.Unix(1000, 0)
	s.tick(start)
	server, client := net.Pipe()
	defer client.Close()
	c := newConn(s, server)
	defer c.close()
	c.cancel = func() {}
	c.bodyDone.Store(true)
	c.setPhase(phaseActive)
	watching := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.watching
	}
	c.check(start.Add(reapEvery).UnixNano())
	if watching() {
		t.Fatal("a request that began in the last reaper period is watched; want a watch only after a whole period")
	}
	c.check(start.Add(2 * reapEvery).UnixNano())
	if !watching() {
		t.Fatal("a request running across a whole reaper period is not watched")
	}
	if gone := c.stopWatch(); gone {
		t.Fatal("stopWatch reports the client gone; it is still connected")
	}
}
