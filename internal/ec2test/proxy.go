package ec2test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Proxy is a fault-injecting HTTP proxy in front of moto_server: it passes
// EC2 calls through, except those its faults rewrite into the error
// shapes EC2 returns (throttling, refused calls, spot capacity errors in
// CreateFleet's answer) or delay. Safe for concurrent use.
type Proxy struct {
	URL string // http://127.0.0.1:PORT, the endpoint to give rpd

	target *url.URL
	client *http.Client

	mu       sync.Mutex
	throttle map[string]int // action -> calls left to answer RequestLimitExceeded
	refuse   map[string]refusal
	spot     int // -1: no limit; else spot CreateFleet capacity is clamped to it
	delay    map[string]time.Duration
	calls    map[string]int
	arrived  map[string]chan struct{} // action -> closed at its next call
}

type refusal struct {
	code string
	n    int
}

// NewProxy starts a proxy to endpoint on a free loopback port; it stops in
// t.Cleanup.
func NewProxy(t testing.TB, endpoint string) *Proxy {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{URL: "http://" + l.Addr().String(), target: target, client: &http.Client{Timeout: 60 * time.Second},
		throttle: map[string]int{}, refuse: map[string]refusal{}, spot: -1, delay: map[string]time.Duration{},
		calls: map[string]int{}, arrived: map[string]chan struct{}{}}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return p
}

// Throttle answers the next n calls of action with RequestLimitExceeded
// (HTTP 503), as EC2 does when a caller exceeds its request rate.
func (p *Proxy) Throttle(action string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.throttle[action] = n
}

// Refuse answers the next n calls of action with the client error code.
func (p *Proxy) Refuse(action, code string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse[action] = refusal{code: code, n: n}
}

// SpotCapacity makes spot CreateFleet calls start at most n instances (the
// request's capacity is clamped before moto sees it) and reports the rest
// as InsufficientInstanceCapacity in the answer's errorSet; -1 lifts it.
func (p *Proxy) SpotCapacity(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.spot = n
}

// Delay holds every call of action for d before passing it on.
func (p *Proxy) Delay(action string, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay[action] = d
}

// Arrived returns a channel closed when the next call of action arrives.
func (p *Proxy) Arrived(action string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch := make(chan struct{})
	p.arrived[action] = ch
	return ch
}

// Calls reports how many calls of action arrived.
func (p *Proxy) Calls(action string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[action]
}

var capacityRE = regexp.MustCompile(`(TargetCapacitySpecification\.(?:TotalTargetCapacity|SpotTargetCapacity))=(\d+)`)

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	form, _ := url.ParseQuery(string(body))
	action := form.Get("Action")
	p.mu.Lock()
	p.calls[action]++
	if ch, ok := p.arrived[action]; ok {
		close(ch)
		delete(p.arrived, action)
	}
	delay := p.delay[action]
	throttled := p.throttle[action] > 0
	if throttled {
		p.throttle[action]--
	}
	ref, refused := p.refuse[action]
	if refused && ref.n > 0 {
		ref.n--
		p.refuse[action] = ref
	} else {
		refused = false
	}
	spot := p.spot
	p.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay)
	}
	switch {
	case throttled:
		writeError(w, http.StatusServiceUnavailable, "RequestLimitExceeded", "Request limit exceeded.")
		return
	case refused:
		writeError(w, http.StatusBadRequest, ref.code, "refused by the test proxy")
		return
	}
	missing := 0
	if action == "CreateFleet" && spot >= 0 && form.Get("TargetCapacitySpecification.DefaultTargetCapacityType") == "spot" {
		asked, _ := strconv.Atoi(form.Get("TargetCapacitySpecification.TotalTargetCapacity"))
		if asked > spot {
			missing = asked - spot
			if spot == 0 {
				writeFleet(w, missing)
				return
			}
			body = capacityRE.ReplaceAll(body, []byte(fmt.Sprintf("${1}=%d", spot)))
		}
	}
	// Detached from the caller: a call whose caller died (kill -9) still
	// reaches EC2, as a real one in flight would.
	req, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, p.target.String()+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	req.Header.Del("Content-Length")
	resp, err := p.client.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if missing > 0 && resp.StatusCode == http.StatusOK {
		out = bytes.Replace(out, []byte("</CreateFleetResponse>"), []byte(errorSet(missing)+"</CreateFleetResponse>"), 1)
	}
	for k, vs := range resp.Header {
		if k != "Content-Length" {
			w.Header()[k] = vs
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(out)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>ec2test-proxy</RequestID></Response>`, code, msg)
}

func errorSet(n int) string {
	return fmt.Sprintf(`<errorSet><item><errorCode>InsufficientInstanceCapacity</errorCode><errorMessage>There is no Spot capacity available that matches your request (%d instances not launched).</errorMessage><lifecycle>spot</lifecycle></item></errorSet>`, n)
}

// writeFleet answers a CreateFleet that started nothing, as EC2 does when
// spot has no capacity at all.
func writeFleet(w http.ResponseWriter, missing int) {
	w.Header().Set("Content-Type", "text/xml")
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<CreateFleetResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>ec2test-proxy</requestId><fleetId>fleet-ec2test</fleetId>%s<fleetInstanceSet/></CreateFleetResponse>`, errorSet(missing))
}
