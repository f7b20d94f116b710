package arbiter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/daemon/internal/httpapi"
	"github.com/rpdhq/rpd/daemon/internal/security"
	"github.com/rpdhq/rpd/runtime/fatjob"
	"github.com/rpdhq/rpd/runtime/pools"
)

// permitTable holds the budget permits granted over HTTP as leases: each
// has a TTL timer that releases the permit unless a heartbeat re-arms it,
// so a client that vanishes gives its bytes and spill slot back. (The
// fatjob package knows nothing of remote holders; this is the daemon's
// half.) With grants set, every permit is recorded in the backend, so a
// restarted daemon restores it (restoreGrants) under the same ID.
type permitTable struct {
	prefix string
	seq    atomic.Uint64
	clock  pools.Clock
	grants *grants // nil: record nothing

	mu      sync.Mutex
	leases  map[string]*permitLease
	expired atomic.Uint64
}

type permitLease struct {
	lease   api.Lease
	owner   string // the principal that took it
	release func()
	timer   pools.Timer
}

func newPermitTable(clock pools.Clock, g *grants) *permitTable {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return &permitTable{prefix: hex.EncodeToString(b[:]), clock: clock, grants: g, leases: map[string]*permitLease{}}
}

// isPermitID reports whether a lease ID names a budget permit.
func isPermitID(id string) bool { return strings.Contains(id, "~") }

// permitRequest is what a permit lease holds, as a fatjob request.
func permitRequest(l api.Lease) fatjob.Request {
	return fatjob.Request{ScanRingBytes: l.ScanRingBytes, DeltaCacheBytes: l.DeltaCacheBytes, NeedsSpillSlot: l.Spill}
}

// add records a granted permit, owned by ctx's principal, and starts its
// TTL; release gives the permit back and must be idempotent. If the permit cannot be recorded in
// the backend, add releases it and fails: a grant a restart would forget
// could over-commit the budget.
func (t *permitTable) add(ctx context.Context, l api.Lease, ttl time.Duration, release func()) (api.Lease, error) {
	l.LeaseID = permitID(l.Budget, l.RequestID)
	if l.LeaseID == "" {
		l.LeaseID = fmt.Sprintf("%s~%s-%d", l.Budget, t.prefix, t.seq.Add(1))
	}
	l.Kind = api.KindPermit
	l.TTLSeconds = ttl.Seconds()
	l.GrantedAt = t.clock.Now().UTC()
	l.ExpiresAt = l.GrantedAt.Add(ttl)
	owner := security.PrincipalOf(ctx).Owner()
	if err := t.grants.putPermit(ctx, l, owner); err != nil {
		release()
		return api.Lease{}, fmt.Errorf("budget %s: the permit was not granted: %w", l.Budget, err)
	}
	t.insert(l, owner, ttl, release)
	return l, nil
}

// permitID is the fixed ID of the permit granted for a request_id, "" for
// none: a retry, or a new leader that restored it, finds it by this ID.
func permitID(budget, requestID string) string {
	if requestID == "" {
		return ""
	}
	return budget + "~r-" + requestID
}

// get returns the held permit id and its owner.
func (t *permitTable) get(id string) (api.Lease, string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pl, ok := t.leases[id]
	if !ok {
		return api.Lease{}, "", false
	}
	return pl.lease, pl.owner, true
}

// holderOnly refuses (403) ctx's principal the permit id when another
// took it (see the function holderOnly); an unknown permit passes, for
// the caller to answer 404.
func (t *permitTable) holderOnly(ctx context.Context, id string) error {
	_, owner, _ := t.get(id)
	return security.HolderOnly(ctx, "permit "+id, owner)
}

// restore re-inserts a permit recorded by an earlier daemon, under its ID,
// for what is left of its TTL.
func (t *permitTable) restore(l api.Lease, owner string, release func()) {
	t.insert(l, owner, l.ExpiresAt.Sub(t.clock.Now()), release)
}

func (t *permitTable) insert(l api.Lease, owner string, timeLeft time.Duration, release func()) {
	pl := &permitLease{lease: l, owner: owner, release: release}
	t.mu.Lock()
	t.leases[l.LeaseID] = pl
	pl.timer = t.clock.AfterFunc(timeLeft, func() { t.expire(l.LeaseID, pl) })
	t.mu.Unlock()
}

func (t *permitTable) expire(id string, pl *permitLease) {
	t.mu.Lock()
	cur, ok := t.leases[id]
	if !ok || cur != pl || t.clock.Now().Before(pl.lease.ExpiresAt) {
		t.mu.Unlock()
		return // released, or heartbeated after the timer fired
	}
	delete(t.leases, id)
	t.mu.Unlock()
	t.expired.Add(1)
	pl.release()
	t.grants.deletePermit(id)
}

// heartbeat extends the permit by its TTL. The caller records the new
// expiry (recordHeartbeat).
func (t *permitTable) heartbeat(id string) (api.Lease, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pl, ok := t.leases[id]
	if !ok {
		return api.Lease{}, httpapi.NotFound("no permit %s: it was released, expired, or never existed; acquire again", id)
	}
	ttl := time.Duration(pl.lease.TTLSeconds * float64(time.Second))
	pl.lease.ExpiresAt = t.clock.Now().UTC().Add(ttl)
	pl.timer.Reset(ttl)
	return pl.lease, nil
}

// recordHeartbeat writes l's new expiry to its record. A release or expiry
// that ran while the record was written may have had its delete land before
// this put, which would leave the record of a released permit behind (the
// next daemon would count it until its TTL); the permit is then gone from
// the table, and its record is deleted again. That delete is queued after
// this put has returned, so it lands after it.
func (t *permitTable) recordHeartbeat(ctx context.Context, l api.Lease) error {
	_, owner, _ := t.get(l.LeaseID)
	if err := t.grants.putPermit(ctx, l, owner); err != nil {
		return err
	}
	t.mu.Lock()
	_, held := t.leases[l.LeaseID]
	t.mu.Unlock()
	if !held {
		t.grants.deletePermit(l.LeaseID)
	}
	return nil
}

// release gives the permit back; budget, when set, must match its budget.
func (t *permitTable) release(id, budget string) error {
	t.mu.Lock()
	pl, ok := t.leases[id]
	if !ok || (budget != "" && pl.lease.Budget != budget) {
		t.mu.Unlock()
		return httpapi.NotFound("no permit %s: it was released, expired, or never existed", id)
	}
	delete(t.leases, id)
	pl.timer.Stop()
	t.mu.Unlock()
	pl.release()
	t.grants.deletePermit(id)
	return nil
}

// count returns the permits held per budget.
func (t *permitTable) count() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]int{}
	for _, pl := range t.leases {
		out[pl.lease.Budget]++
	}
	return out
}
