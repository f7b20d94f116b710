package ledger

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestHTTPSource(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		field   string
		want    int
		wantErr string // substring; "" = success
	}{
		{"flat", 200, `{"active": 7}`, "", 7, ""},
		{"zero is a real figure", 200, `{"active": 0}`, "", 0, ""},
		{"nested path", 200, `{"usage": {"vms": {"active": 42}}, "other": 1}`, "usage.vms.active", 42, ""},
		{"203 is 2xx", 203, `{"active": 3}`, "", 3, ""},
		{"not JSON", 200, `active=7`, "", 0, "not valid JSON"},
		{"empty body", 200, ``, "", 0, "not valid JSON"},
		{"trailing garbage", 200, `{"active": 1} {"active": 2}`, "", 0, "data after the JSON value"},
		{"missing field", 200, `{"running": 7}`, "", 0, `field "active" is missing`},
		{"missing nested", 200, `{"usage": {}}`, "usage.active", 0, `field "usage.active" is missing`},
		{"path through non-object", 200, `{"usage": 5}`, "usage.active", 0, "not inside a JSON object"},
		{"negative", 200, `{"active": -1}`, "", 0, "cannot be negative"},
		{"fraction", 200, `{"active": 3.5}`, "", 0, "want a JSON integer count"},
		{"exponent", 200, `{"active": 1e2}`, "", 0, "want a JSON integer count"},
		{"string number", 200, `{"active": "7"}`, "", 0, `the string "7"`},
		{"null", 200, `{"active": null}`, "", 0, "is null"},
		{"bool", 200, `{"active": true}`, "", 0, "a boolean"},
		{"huge", 200, `{"active": 99999999999999999999999}`, "", 0, "want a JSON integer count"},
		{"500", 500, `{"active": 0}`, "", 0, "status 500"},
		{"404", 404, `not found`, "", 0, "status 404"},
		{"304 is not 2xx", 304, ``, "", 0, "status 304"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet {
					t.Errorf("method %s, want GET", r.Method)
				}
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			src := &HTTPSource{URL: srv.URL, Field: tt.field, Timeout: 5 * time.Second}
			got, err := src.Usage(context.Background())
			if tt.wantErr == "" {
				if err != nil || got.Active != tt.want {
					t.Fatalf("Usage = %+v, %v; want %d", got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Usage = %+v, %v; want error containing %q", got, err, tt.wantErr)
			}
		})
	}
}

func TestHTTPSourceTimeoutAndTransportErrors(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	start := time.Now()
	_, err := (&HTTPSource{URL: slow.URL, Timeout: 50 * time.Millisecond}).Usage(context.Background())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow server = %v, want context.DeadlineExceeded", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Fatalf("timeout not enforced: took %v", elapsed)
	}

	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"active": 1, "pad": "`))
		_, _ = w.Write([]byte(strings.Repeat("x", maxUsageBody)))
		_, _ = w.Write([]byte(`"}`))
	}))
	defer big.Close()
	if _, err := (&HTTPSource{URL: big.URL}).Usage(context.Background()); err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("oversized body = %v, want a size error", err)
	}

	closed := httptest.NewServer(http.NotFoundHandler())
	url := closed.URL
	closed.Close()
	if _, err := (&HTTPSource{URL: url}).Usage(context.Background()); err == nil {
		t.Fatal("connection refused read as a figure")
	}
	if _, err := (&HTTPSource{URL: "://bad"}).Usage(context.Background()); err == nil {
		t.Fatal("bad URL accepted")
	}
}

// TestBadFigureIsAnErrorInStatus checks the whole path: a broken endpoint
// leaves the last good figure in place, shows up as LastError, counts as a
// source error and never unlocks the ceiling as a silent zero.
func TestBadFigureIsAnErrorInStatus(t *testing.T) {
	var body string
	status := 200
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	l, clk := newTestLedger(t, Config{Max: 5, Grant: GrantImmediate})
	src := &HTTPSource{URL: srv.URL, Timeout: 5 * time.Second}
	ctx := context.Background()

	body = `{"active": 5}`
	l.Poll(ctx, src)
	if st := l.Status(); st.ProviderActive != 5 || st.LastError != "" || st.Stale {
		t.Fatalf("after good poll: %+v", st)
	}
	bad := []struct {
		status int
		body   string
	}{{200, `<html>`}, {200, `{}`}, {200, `{"active": -2}`}, {200, `{"active": 3.5}`}, {200, `{"active": "7"}`}, {500, `{"active": 0}`}}
	for i, b := range bad {
		status, body = b.status, b.body
		clk.Advance(5 * time.Second)
		l.Poll(ctx, src)
		st := l.Status()
		if st.ProviderActive != 5 || st.Available != 0 || st.LastError == "" {
			t.Fatalf("after bad figure %q (status %d): %+v; want last good figure kept and an error shown", b.body, b.status, st)
		}
		if got := l.Stats().SourceErrors; got != uint64(i+1) {
			t.Fatalf("SourceErrors = %d, want %d", got, i+1)
		}
	}
	clk.Advance(time.Second)
	if st := l.Status(); !st.Stale {
		t.Fatalf("31s of failures: %+v, want stale", st)
	}
	status, body = 200, `{"active": 1}`
	clk.Advance(5 * time.Second)
	l.Poll(ctx, src)
	if st := l.Status(); st.ProviderActive != 1 || st.LastError != "" || st.Stale || st.Available != 4 {
		t.Fatalf("after recovery: %+v", st)
	}
}
