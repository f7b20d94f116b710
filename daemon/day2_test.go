package daemon

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/rpdhq/rpd/api"
)

// A hot reload that shrinks a pool below what is held says so in the log,
// as rpd plan does; removing a pool in use is still no refusal (the daemon
// keeps it until idle).
func TestReloadWarnsAboutShrinkingBelowHeld(t *testing.T) {
	var logs syncBuffer
	td := startDaemon(t, "pool \"db\" { slots = 5 }\n", func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	for range 3 {
		if _, err := td.c.Acquire(context.Background(), "db", api.AcquireRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	td.edit(t, "pool \"db\" { slots = 1 }\n")
	if want := "pool.db: 3 slots held; shrinking to 1 makes new requests wait until 2 are released"; !strings.Contains(logs.String(), want) {
		t.Fatalf("the log lacks %q:\n%s", want, logs.String())
	}
	td.edit(t, "")
	if st := td.d.Status(); !st.LastReload.OK {
		t.Fatalf("removing the pool in use was refused: %s", st.LastReload.Error)
	}
}

// GET /v1/leases pages with ?offset= and ?limit=, and the polled routes
// answer 304 to a client that has the current body.
func TestLeasesPageAndETag(t *testing.T) {
	td := startDaemon(t, "pool \"db\" { slots = 5 }\n")
	for range 5 {
		if _, err := td.c.Acquire(context.Background(), "db", api.AcquireRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(path string, header ...string) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+td.addr+path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	var all, p1, p3 api.GrantList
	for path, into := range map[string]*api.GrantList{"/v1/leases": &all, "/v1/leases?pool=db&limit=2": &p1, "/v1/leases?pool=db&limit=2&offset=4": &p3} {
		code, _, body := get(path)
		if code != http.StatusOK || json.Unmarshal([]byte(body), into) != nil {
			t.Fatalf("GET %s = %d %s", path, code, body)
		}
	}
	if len(all.Leases) != 5 || all.Total != 5 || all.NextOffset != 0 {
		t.Errorf("all: %d leases, total %d, next %d; want 5, 5, none", len(all.Leases), all.Total, all.NextOffset)
	}
	if len(p1.Leases) != 2 || p1.Total != 5 || p1.NextOffset != 2 || p1.Leases[0].ID != all.Leases[0].ID {
		t.Errorf("first page: %d leases, total %d, next %d; want the first 2 of 5, next 2", len(p1.Leases), p1.Total, p1.NextOffset)
	}
	if len(p3.Leases) != 1 || p3.NextOffset != 0 || p3.Leases[0].ID != all.Leases[4].ID {
		t.Errorf("last page: %+v; want the fifth lease alone", p3)
	}
	for _, bad := range []string{"?limit=0", "?limit=x", "?offset=-1", "?limit=100000"} {
		if code, _, _ := get("/v1/leases" + bad); code != http.StatusBadRequest {
			t.Errorf("GET /v1/leases%s = %d; want 400", bad, code)
		}
	}
	for _, path := range []string{"/v1/leases?pool=db", "/v1/status", "/v1/classes"} {
		code, h, _ := get(path)
		etag := h.Get("ETag")
		if code != http.StatusOK || etag == "" {
			t.Fatalf("GET %s = %d, ETag %q", path, code, etag)
		}
		if code, _, body := get(path, "If-None-Match", etag); code != http.StatusNotModified || body != "" {
			t.Errorf("GET %s with its ETag = %d %q; want 304 and no body", path, code, body)
		}
	}
}
