package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/internal/waitfor"
	"github.com/rpdhq/rpd/runtime/pickup"
)

// A grant shows in the request, grant-wait and backend-call series, under
// the route's pattern, never under the raw path.
func TestRequestAndBackendMetrics(t *testing.T) {
	td := startDaemon(t, "pool \"p\" {\n  slots = 1\n}\n")
	l, err := td.c.Acquire(context.Background(), "p", api.AcquireRequest{TaskID: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := td.c.Heartbeat(context.Background(), l.LeaseID); err != nil {
		t.Fatal(err)
	}
	if code, _ := td.raw(t, http.MethodGet, "/v1/no-such-route", ""); code != http.StatusNotFound {
		t.Fatalf("unknown route: %d", code)
	}
	// An answer sent early (the acquire's, the heartbeat's) reaches the
	// client before its handler returns and the request is counted.
	var m string
	waitfor.Within(t, 5*time.Second, "the heartbeat counted", func() bool {
		_, m = td.raw(t, http.MethodGet, "/metrics", "")
		return strings.Contains(m, `rpd_http_requests_total{code="200",route="POST /v1/leases/{id}/heartbeat"} 1`) &&
			strings.Contains(m, `rpd_http_requests_total{code="200",route="POST /v1/pools/{name}/acquire"} 1`)
	})
	for _, want := range []string{
		`rpd_http_requests_total{code="200",route="POST /v1/pools/{name}/acquire"} 1`,
		`rpd_http_requests_total{code="404",route="unmatched"} 1`,
		`rpd_http_request_duration_seconds_count{route="POST /v1/pools/{name}/acquire"} 1`,
		`rpd_grant_wait_seconds_count{kind="pool",name="p"} 1`,
		`rpd_backend_calls_total{op="pools.put_lease",result="ok"}`,
		`rpd_backend_call_duration_seconds_count{op="leader.acquire"}`,
		`rpd_build_info{goversion="go`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(m, l.LeaseID) {
		t.Error("/metrics carries a lease ID in a label: the route label must be the pattern")
	}
}

func TestCallResult(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{nil, "ok"},
		{fmt.Errorf("put: %w", backend.ErrFenced), "condition"},
		{fmt.Errorf("claim: %w", pickup.ErrConditionFailed), "condition"},
		{context.Canceled, "canceled"},
		{errors.New("disk I/O error"), "error"},
	} {
		if got := callResult(tt.err); got != tt.want {
			t.Errorf("callResult(%v) = %q; want %q", tt.err, got, tt.want)
		}
	}
}

// A cached child is made once, whoever asks first, and is the one every
// later lookup returns.
func TestChildrenMadeOnce(t *testing.T) {
	var c children[string, *int]
	var made atomic.Int32
	var wg sync.WaitGroup
	got := make([][2]*int, 8)
	for g := range got {
		wg.Go(func() {
			for i, k := range []string{"a", "b"} {
				got[g][i] = c.get(k, func() *int { made.Add(1); return new(int) })
			}
		})
	}
	wg.Wait()
	if made.Load() != 2 {
		t.Fatalf("%d children made for 2 keys", made.Load())
	}
	for _, g := range got {
		if g != got[0] || g[0] == g[1] {
			t.Fatalf("lookups disagree: %v", got)
		}
	}
}

// With tokens the middleware hands the mux a copy of the request (its
// context carries the principal): a grant is still counted as this
// daemon's, in the grant-wait series.
func TestGrantWaitWithTokens(t *testing.T) {
	td, _ := startSecured(t)
	if code, body := td.as(t, "worker", http.MethodPost, "/v1/pools/db/acquire", `{"task_id":"m"}`); code != http.StatusOK {
		t.Fatalf("acquire: %d %s", code, body)
	}
	_, m := td.as(t, "reader", http.MethodGet, "/metrics", "")
	for _, want := range []string{
		`rpd_http_requests_total{code="200",route="POST /v1/pools/{name}/acquire"} 1`,
		`rpd_grant_wait_seconds_count{kind="pool",name="db"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
