package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rpdhq/rpd/api"
)

// A standby's answer that names the leader (api.LeaderHeader) sends the
// client's next pools/leases requests to the leader directly; reads of the
// replica's own state (status) stay on the configured address; when the
// leader stops answering the client comes back to the configured address at
// once; WithFollowLeader(false) never moves; an https client never follows
// a plain-http name.
func TestFollowLeader(t *testing.T) {
	var atLeader, atStandby atomic.Int64
	lease := `{"lease_id":"p.1","kind":"pool","pool":"p","task_id":"t","slots":1}`
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		atLeader.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(lease))
	}))
	defer leader.Close()
	standby := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		atStandby.Add(1)
		if strings.HasPrefix(r.URL.Path, "/v1/pools") {
			w.Header().Set(api.LeaderHeader, leader.URL)
		}
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/status" {
			_, _ = w.Write([]byte(`{"role":"standby"}`))
			return
		}
		_, _ = w.Write([]byte(lease))
	}))
	defer standby.Close()
	ctx := context.Background()
	acquire := func(c *Client) {
		t.Helper()
		if _, err := c.Acquire(ctx, "p", api.AcquireRequest{TaskID: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	counts := func(wantStandby, wantLeader int64) {
		t.Helper()
		if s, l := atStandby.Load(), atLeader.Load(); s != wantStandby || l != wantLeader {
			t.Fatalf("requests at the standby %d, at the leader %d; want %d and %d", s, l, wantStandby, wantLeader)
		}
	}

	c := newTestClient(t, standby.Listener.Addr().String(), WithRetry(0))
	acquire(c) // forwarded by the standby, which names the leader
	counts(1, 0)
	acquire(c)
	acquire(c)
	counts(1, 2)
	if _, err := c.Status(ctx); err != nil { // the replica's own view
		t.Fatal(err)
	}
	counts(2, 2)

	// The leader stops answering: the same call goes to the standby.
	leader.Close()
	acquire(c)
	counts(3, 2)
	// The standby still names the dead leader: it is not followed again
	// for a while, so no request pays for it twice.
	acquire(c)
	counts(4, 2)
	if c.leader.Load() != nil {
		t.Fatal("the client follows a leader that just failed")
	}

	// Not following: every request stays on the configured address.
	atStandby.Store(0)
	c2 := newTestClient(t, standby.Listener.Addr().String(), WithRetry(0), WithFollowLeader(false))
	acquire(c2)
	acquire(c2)
	if atStandby.Load() != 2 || c2.leader.Load() != nil {
		t.Fatalf("WithFollowLeader(false) moved: %d requests at the standby, leader route %+v", atStandby.Load(), c2.leader.Load())
	}

	// An https base never learns a plain-http leader.
	c3, err := New("https://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	c3.learnLeader("https://127.0.0.1:1", "http://127.0.0.1:2")
	if c3.leader.Load() != nil {
		t.Fatal("an https client followed a plain-http leader")
	}
}
