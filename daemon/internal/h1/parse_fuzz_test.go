package h1

import (
	"bufio"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// FuzzParseHead holds the parser to net/http's: a head it accepts, net/http
// accepts too, with the same method, target, Host, header and framing. (It
// may refuse more: folded headers, Transfer-Encoding with Content-Length,
// Transfer-Encoding in HTTP/1.0.)
func FuzzParseHead(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: h\r\n\r\n",
		"POST /v1/pools/db/acquire HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n",
		"DELETE /v1/leases/db%2Fx HTTP/1.1\r\nhost: h\r\nauthorization: Bearer t\r\nx-a: 1\r\nX-A: 2\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n",
		"GET http://other/p?q HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET / HTTP/1.1\nHost: h\n\n",
		"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, head string) {
		n := strings.Count(head, "\n") - 2
		if n < 0 || !strings.HasSuffix(head, "\n\n") && !strings.HasSuffix(head, "\n\r\n") {
			return
		}
		// q served a request before, as a connection's does: nothing of
		// it may show through.
		q := &request{}
		const before = "POST /before?x=1 HTTP/1.1\r\nHost: before\r\nX-A: 0\r\nX-Before: 1\r\nX-Before: 2\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n"
		if perr := q.parse(before, strings.Count(before, "\n")-2); perr != nil {
			t.Fatalf("parse %q: %v", before, perr)
		}
		q.reset()
		if perr := q.parse(head, n); perr != nil {
			if perr.status == 0 {
				t.Fatalf("a parse error without a status: %v", perr)
			}
			return
		}
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(head)))
		if err != nil {
			t.Fatalf("accepted %q, which net/http refuses: %v", head, err)
		}
		if q.method != r.Method || q.target != r.RequestURI || q.host != r.Host || q.url.String() != r.URL.String() {
			t.Fatalf("%q: method %q target %q host %q url %q; net/http %q %q %q %q", head, q.method, q.target, q.host, q.url, r.Method, r.RequestURI, r.Host, r.URL)
		}
		for k, vs := range r.Header {
			if strings.Join(q.header[k], "\x00") != strings.Join(vs, "\x00") {
				t.Fatalf("%q: header %s = %q, net/http %q", head, k, q.header[k], vs)
			}
		}
		if len(q.header) != len(r.Header) {
			t.Fatalf("%q: %d header keys, net/http %d", head, len(q.header), len(r.Header))
		}
		if want := r.ContentLength; q.contentLength != want && !(q.contentLength == 0 && want == 0) {
			t.Fatalf("%q: length %d, net/http %d", head, q.contentLength, want)
		}
		if q.close != r.Close {
			t.Fatalf("%q: close %v, net/http %v", head, q.close, r.Close)
		}
	})
}

// FuzzPlainURL holds the fast path to url.ParseRequestURI.
func FuzzPlainURL(f *testing.F) {
	for _, s := range []string{"/", "/v1/pools/db/acquire", "/a?b=c&d", "/a?", "//x/y", "/a%2Fb", "/é", "/a b", "/a?b c", "*", "http://h/p"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		u := url.URL{Scheme: "http", Host: "before", Path: "/before", RawQuery: "x"} // reused
		if !plainURL(&u, target) {
			return
		}
		want, err := url.ParseRequestURI(target)
		if err != nil {
			t.Fatalf("%q: plain, but ParseRequestURI refuses it: %v", target, err)
		}
		if u != *want {
			t.Fatalf("%q: %#v, ParseRequestURI %#v", target, u, *want)
		}
	})
}
