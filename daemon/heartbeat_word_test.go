package daemon

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/runtime/pools"
)

// switchPools fails PutLease while fail is set.
type switchPools struct {
	pools.Store
	fail atomic.Bool
}

func (s *switchPools) PutLease(ctx context.Context, rec pools.LeaseRecord) error {
	if s.fail.Load() {
		return errors.New("injected: backend stalled")
	}
	return s.Store.PutLease(ctx, rec)
}

// A heartbeat whose extended expiry cannot be recorded is not answered 200:
// the client is told 503 and retries, and the record (what a new leader
// restores) still holds the expiry of the last 200, so no answer promises
// more than the next leader will honour. Pool leases and budget permits alike.
func TestHeartbeatNotRecordedIsNotAnswered200(t *testing.T) {
	ctx := ctxT(t)
	td := startDaemon(t, "pool \"p\" {\n  slots = 1\n}\nbudget \"b\" {}\n")
	sw := &switchPools{Store: td.d.arb.LeaseStore()}
	td.d.arb.SetLeaseStore(sw)
	grantsStore := td.d.arb.GrantStore()

	lease, err := td.c.Acquire(ctx, "p", api.AcquireRequest{TaskID: "a", TTLSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	perm, err := td.c.AcquirePermit(ctx, "b", api.PermitRequest{ScanRingBytes: 1 << 20, TTLSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	recorded := func() time.Time {
		t.Helper()
		recs, err := sw.Store.LoadLeases(ctx)
		if err != nil || len(recs) != 1 {
			t.Fatalf("lease records: %v, %v", recs, err)
		}
		return recs[0].ExpiresAt
	}
	before := recorded()
	// So that an extension would move the expiry.
	waitFor(t, "the clock to pass the grant", func() bool { return time.Now().After(lease.ExpiresAt.Add(-60 * time.Second)) })

	sw.fail.Store(true)
	td.d.arb.SetGrantStore(failingGrants{grantsStore})
	for _, id := range []string{lease.LeaseID, perm.LeaseID} {
		_, err := td.c.Heartbeat(ctx, id)
		ae := apiErr(t, err)
		if ae.Status != http.StatusServiceUnavailable || ae.Code != api.CodeNotReady || !strings.Contains(ae.Message, "could not be recorded") {
			t.Fatalf("heartbeat of %s with the record unwritable: %v, want 503 not_ready", id, err)
		}
	}
	if got := recorded(); !got.Equal(before) {
		t.Fatalf("the record's expiry moved from %v to %v without an answered heartbeat", before, got)
	}

	// Once the backend takes writes again, the heartbeat is answered with
	// the expiry its record now holds.
	sw.fail.Store(false)
	td.d.arb.SetGrantStore(grantsStore)
	hb, err := td.c.Heartbeat(ctx, lease.LeaseID)
	if err != nil {
		t.Fatal(err)
	}
	if got := recorded(); !got.Equal(hb.ExpiresAt) || !got.After(before) {
		t.Fatalf("answered expiry %v, recorded %v (was %v)", hb.ExpiresAt, got, before)
	}
	if _, err := td.c.Heartbeat(ctx, perm.LeaseID); err != nil {
		t.Fatal(err)
	}
}
