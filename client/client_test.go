package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/client"
)

// fake answers every route with a canned response and records what it got.
func fake(t *testing.T, status int, body string) (*client.Client, *http.Request) {
	t.Helper()
	var got http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = *r.Clone(context.Background())
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, client.WithToken("tok"))
	if err != nil {
		t.Fatal(err)
	}
	return c, &got
}

func TestErrorsCarryStatusCodeAndKind(t *testing.T) {
	c, req := fake(t, 404, `{"error":{"code":"exhausted","kind":"global","message":"queue empty"}}`)
	_, err := c.Pickup(context.Background(), "medium/x", api.PickupRequest{MinCPU: 2})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != 404 || ae.Code != api.CodeExhausted || ae.Kind != api.ExhaustedGlobal {
		t.Fatalf("err = %#v", err)
	}
	if !client.IsCode(err, api.CodeExhausted) || client.IsCode(err, api.CodeNotFound) {
		t.Fatal("IsCode disagrees with the error's code")
	}
	if req.Method != "POST" || req.URL.EscapedPath() != "/v1/classes/medium%2Fx/pickup" || req.Header.Get("Authorization") != "Bearer tok" {
		t.Fatalf("request = %s %s auth %q", req.Method, req.URL.EscapedPath(), req.Header.Get("Authorization"))
	}
}

func TestNonJSONErrorBody(t *testing.T) {
	c, _ := fake(t, 502, "bad gateway from a proxy")
	_, err := c.Status(context.Background())
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != 502 || !strings.Contains(ae.Message, "proxy") {
		t.Fatalf("err = %#v", err)
	}
}

func TestReloadRejected(t *testing.T) {
	b, _ := json.Marshal(api.ReloadResult{OK: false, Error: "main.hcl:2,3: bad", ConfigVersion: 4})
	c, _ := fake(t, 422, string(b))
	res, err := c.Reload(context.Background())
	if err == nil || res.OK || res.ConfigVersion != 4 || res.Error != "main.hcl:2,3: bad" {
		t.Fatalf("Reload = %+v, %v", res, err)
	}
}

func TestUndecodableSuccess(t *testing.T) {
	c, _ := fake(t, 200, "not json")
	if _, err := c.Pools(context.Background()); err == nil || !strings.Contains(err.Error(), "decode") {
		t.Fatalf("Pools with a non-JSON answer = %v", err)
	}
}

func TestNew(t *testing.T) {
	for _, bad := range []string{"", "ftp://h:1", "http://"} {
		if _, err := client.New(bad); err == nil {
			t.Errorf("New(%q) succeeded", bad)
		}
	}
	for _, good := range []string{"127.0.0.1:7070", "http://localhost:7070/", "https://rpd.example:443"} {
		if _, err := client.New(good); err != nil {
			t.Errorf("New(%q): %v", good, err)
		}
	}
}

// The hot answers decode by hand as encoding/json would: a lease with
// members the client does not know, and a malformed one (an error naming
// the call, never a panic).
func TestLeaseAnswers(t *testing.T) {
	c, _ := fake(t, 200, `{"lease_id":"p.r-1","kind":"pool","pool":"p","priority":2,"slots":1,"ttl_seconds":60,"expires_at":"2026-11-27T05:00:00Z","future":{"x":[1]}}`)
	l, err := c.Acquire(context.Background(), "p", api.AcquireRequest{})
	if err != nil || l.LeaseID != "p.r-1" || l.Pool != "p" || l.Priority != 2 || l.TTLSeconds != 60 || l.ExpiresAt.Year() != 2026 {
		t.Fatalf("Acquire = %+v, %v", l, err)
	}
	c, _ = fake(t, 200, `{"lease_id":"p.r-1",`)
	if _, err := c.Heartbeat(context.Background(), "p.r-1"); err == nil || !strings.Contains(err.Error(), "POST /v1/leases/p.r-1/heartbeat: decode the response") {
		t.Fatalf("Heartbeat with a cut answer = %v", err)
	}
	c, _ = fake(t, 409, `{"error":{"code":"unavailable","message":"no free slot in pool \"p\" now"}}`)
	_, err = c.Acquire(context.Background(), "p", api.AcquireRequest{})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != 409 || ae.Code != api.CodeUnavailable || ae.Message != `no free slot in pool "p" now` {
		t.Fatalf("Acquire refused = %#v", err)
	}
}
