package statuspage

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Result()
}

func body(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPageAndAssets(t *testing.T) {
	h := New()
	r := get(t, h, "GET", "/")
	page := body(t, r)
	if r.StatusCode != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET / = %d %s", r.StatusCode, r.Header.Get("Content-Type"))
	}
	for _, hdr := range []string{"Content-Security-Policy", "X-Content-Type-Options", "Referrer-Policy"} {
		if r.Header.Get(hdr) == "" {
			t.Errorf("GET / has no %s header", hdr)
		}
	}
	if csp := r.Header.Get("Content-Security-Policy"); strings.Contains(csp, "unsafe") || !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("CSP %q must allow only the page's own script and style", csp)
	}
	if r.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("the page is cached: Cache-Control %q", r.Header.Get("Cache-Control"))
	}
	// The CSP forbids inline code, so the page must have none, and every
	// asset it names must be served.
	if regexp.MustCompile(`<script>|<style|\sstyle=|\son[a-z]+=`).MatchString(page) {
		t.Error("the page has inline script or style, which its CSP blocks")
	}
	refs := regexp.MustCompile(`(?:src|href)="(ui/[^"?]+)\?v=([0-9a-f]{12})"`).FindAllStringSubmatch(page, -1)
	if len(refs) != 3 {
		t.Fatalf("the page names %d versioned assets, want 3 (script, style, icon): %v", len(refs), refs)
	}
	for _, ref := range refs {
		ar := get(t, h, "GET", "/"+ref[1]+"?v="+ref[2])
		b := body(t, ar)
		if ar.StatusCode != 200 || len(b) == 0 || ar.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("GET /%s = %d (%d bytes)", ref[1], ar.StatusCode, len(b))
		}
		if !strings.Contains(ar.Header.Get("Cache-Control"), "immutable") {
			t.Errorf("asset %s is not cached for good: %q", ref[1], ar.Header.Get("Cache-Control"))
		}
	}
	if ct := get(t, h, "GET", "/ui/app.js").Header.Get("Content-Type"); !strings.Contains(ct, "javascript") {
		t.Errorf("app.js served as %q", ct)
	}

	head := get(t, h, "HEAD", "/")
	if head.StatusCode != 200 || body(t, head) != "" || head.Header.Get("Content-Length") == "" {
		t.Errorf("HEAD / = %d with a body or no length", head.StatusCode)
	}
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/ui/nope.js", 404},
		{"GET", "/ui/", 404},
		{"GET", "/ui/index.html", 404}, // the template is served only as /
		{"GET", "/elsewhere", 404},
		{"POST", "/", 405},
	} {
		if got := get(t, h, tc.method, tc.path).StatusCode; got != tc.want {
			t.Errorf("%s %s = %d, want %d", tc.method, tc.path, got, tc.want)
		}
	}
}

func TestPatterns(t *testing.T) {
	got := New().Patterns()
	want := []string{"GET /{$}", "GET /ui/app.css", "GET /ui/app.js", "GET /ui/favicon.svg"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("Patterns = %q, want %q", got, want)
	}
	mux := http.NewServeMux()
	for _, p := range got {
		mux.Handle(p, New()) // the patterns must be valid and distinct
	}
}

func TestPublic(t *testing.T) {
	for path, want := range map[string]bool{
		"/": true, "/ui/app.js": true, "/ui/": true,
		"/v1/status": false, "/metrics": false, "/uix": false, "": false, "/v1/leases": false,
	} {
		if got := Public(path); got != want {
			t.Errorf("Public(%q) = %v, want %v", path, got, want)
		}
	}
}
