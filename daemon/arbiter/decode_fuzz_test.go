package arbiter

import (
	"bytes"
	"errors"
	"net/http"
	"testing"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/daemon/internal/httpapi"
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
	d := &Arbiter{comp: &components{pools: newPoolSet(nil, nil, nil)}}
	d.comp.pools.prios["critical"] = 100
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(err error) {
			if err == nil {
				return
			}
			var he *httpapi.Error
			if !errors.As(err, &he) || (he.Status != http.StatusBadRequest && he.Status != http.StatusRequestEntityTooLarge) || he.Msg == "" {
				t.Fatalf("decode error %v is not a 400/413 httpapi.Error", err)
			}
		}
		var ar api.AcquireRequest
		if err := httpapi.DecodeBody(bytes.NewReader(body), &ar); err != nil {
			check(err)
		} else {
			_, _, err := d.poolRequest(ar)
			check(err)
		}
		var pr api.PermitRequest
		if err := httpapi.DecodeBody(bytes.NewReader(body), &pr); err != nil {
			check(err)
		} else {
			_, err := httpapi.WaitDuration(pr.WaitSeconds)
			check(err)
			_, err = httpapi.TTLDuration(pr.TTLSeconds, 0)
			check(err)
		}
		check(httpapi.DecodeBody(bytes.NewReader(body), &api.ClaimRequest{}))
		check(httpapi.DecodeBody(bytes.NewReader(body), &api.UsageRequest{}))
		check(httpapi.DecodeBody(bytes.NewReader(body), &api.PickupRequest{}))
		check(httpapi.DecodeBody(bytes.NewReader(body), &api.Instance{}))
		check(httpapi.DecodeBody(bytes.NewReader(body), &api.ReleaseInstanceRequest{}))
	})
}
