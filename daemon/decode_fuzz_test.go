package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/rpdhq/rpd/api"
)

// FuzzDecodeRequests feeds arbitrary bodies to the decoder of every request
// type, and to the validation that follows it: no input may panic, and
// every failure must be a 400 or 413 in the error model.
func FuzzDecodeRequests(f *testing.F) {
	for _, s := range []string{
		`{}`, ``, `{"task_id":"a","slots":2,"wait_seconds":1.5,"ttl_seconds":30}`, `{"priority":-5}`,
		`{"priority_name":"critical"}`, `{"scan_ring_bytes":1,"delta_cache_bytes":2,"spill":true}`,
		`{"worker_id":"w","count":3}`, `{"active":7}`, `{"instance_types":["c6i.*"],"min_cpu":2}`,
		`{"slots":1e309}`, `{"wait_seconds":NaN}`, `{"a":1} x`, `[`, `"\u0000"`, `{"slots":-1}`,
	} {
		f.Add([]byte(s))
	}
	d := &Daemon{comp: &components{pools: newPoolSet(nil, nil, nil)}}
	d.comp.pools.prios["critical"] = 100
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(err error) {
			if err == nil {
				return
			}
			var he *httpError
			if !errors.As(err, &he) || (he.status != http.StatusBadRequest && he.status != http.StatusRequestEntityTooLarge) || he.msg == "" {
				t.Fatalf("decode error %v is not a 400/413 httpError", err)
			}
		}
		var ar api.AcquireRequest
		if err := decodeBody(bytes.NewReader(body), &ar); err != nil {
			check(err)
		} else {
			_, _, err := d.poolRequest(ar)
			check(err)
		}
		var pr api.PermitRequest
		if err := decodeBody(bytes.NewReader(body), &pr); err != nil {
			check(err)
		} else {
			_, err := waitDuration(pr.WaitSeconds)
			check(err)
			_, err = ttlDuration(pr.TTLSeconds, 0)
			check(err)
		}
		check(decodeBody(bytes.NewReader(body), &api.ClaimRequest{}))
		check(decodeBody(bytes.NewReader(body), &api.UsageRequest{}))
		check(decodeBody(bytes.NewReader(body), &api.PickupRequest{}))
		check(decodeBody(bytes.NewReader(body), &api.Instance{}))
		check(decodeBody(bytes.NewReader(body), &api.ReleaseInstanceRequest{}))
	})
}

// FuzzCheckJSONFastPath holds checkJSON's allocation-free scan to the
// token walk that defines it: same verdict, same words, for any body.
func FuzzCheckJSONFastPath(f *testing.F) {
	for _, s := range []string{
		`{}`, ``, ` {"task_id":"a","slots":2,"wait_seconds":1.5e0,"ttl_seconds":-0.5E+3} `,
		`{"a":1,"a":2}`, `{"a":{"a":1},"b":[{"a":1,"a":2}]}`, `{"a":tru,"a":1}`, `{"a":1}{"a":1}`,
		`{"a":"` + strings.Repeat("x", api.MaxIDBytes+1) + `"}`, `{"a":"\u0061","\u0061":1}`,
		`{"a":01}`, `{"a":1.}`, `{"a":-}`, `[1,2,[3,{"k":null,"k":false}]]`, `{"é":1,"é":2}`,
		`{"a" 1}`, `{"a":1,}`, `[1,]`, `"` + strings.Repeat("y", api.MaxIDBytes) + `"`,
		strings.Repeat("[", 40) + strings.Repeat("]", 40),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, slow := checkJSON(body), checkJSONTokens(body)
		if fmt.Sprint(fast) != fmt.Sprint(slow) {
			t.Fatalf("checkJSON(%q) = %v; the token walk says %v", body, fast, slow)
		}
		if scanJSON(body) && slow != nil {
			t.Fatalf("scanJSON passed %q, which the token walk refuses: %v", body, slow)
		}
	})
}
