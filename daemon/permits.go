package daemon

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/runtime/pools"
)

// permitTable holds the budget permits granted over HTTP as leases: each
// has a TTL timer that releases the permit unless a heartbeat re-arms it,
// so a client that vanishes gives its bytes and spill slot back. (The
// fatjob package knows nothing of remote holders; this is the daemon's
// half.) Permits live in memory only: a restarted daemon starts with every
// budget full.
type permitTable struct {
	prefix string
	seq    atomic.Uint64
	clock  pools.Clock

	mu      sync.Mutex
	leases  map[string]*permitLease
	expired atomic.Uint64
}

type permitLease struct {
	lease   api.Lease
	release func()
	timer   pools.Timer
}

func newPermitTable(clock pools.Clock) *permitTable {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return &permitTable{prefix: hex.EncodeToString(b[:]), clock: clock, leases: map[string]*permitLease{}}
}

// isPermitID reports whether a lease ID names a budget permit.
func isPermitID(id string) bool { return strings.Contains(id, "~") }

// add records a granted permit and starts its TTL; release gives the
// permit back and must be idempotent.
func (t *permitTable) add(l api.Lease, ttl time.Duration, release func()) api.Lease {
	l.LeaseID = fmt.Sprintf("%s~%s-%d", l.Budget, t.prefix, t.seq.Add(1))
	l.Kind = api.KindPermit
	l.TTLSeconds = ttl.Seconds()
	l.GrantedAt = t.clock.Now().UTC()
	l.ExpiresAt = l.GrantedAt.Add(ttl)
	pl := &permitLease{lease: l, release: release}
	t.mu.Lock()
	t.leases[l.LeaseID] = pl
	pl.timer = t.clock.AfterFunc(ttl, func() { t.expire(l.LeaseID, pl) })
	t.mu.Unlock()
	return l
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
}

func (t *permitTable) heartbeat(id string) (api.Lease, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pl, ok := t.leases[id]
	if !ok {
		return api.Lease{}, notFound("no permit %s: it was released, expired, or never existed; acquire again", id)
	}
	ttl := time.Duration(pl.lease.TTLSeconds * float64(time.Second))
	pl.lease.ExpiresAt = t.clock.Now().UTC().Add(ttl)
	pl.timer.Reset(ttl)
	return pl.lease, nil
}

// release gives the permit back; budget, when set, must match its budget.
func (t *permitTable) release(id, budget string) error {
	t.mu.Lock()
	pl, ok := t.leases[id]
	if !ok || (budget != "" && pl.lease.Budget != budget) {
		t.mu.Unlock()
		return notFound("no permit %s: it was released, expired, or never existed", id)
	}
	delete(t.leases, id)
	pl.timer.Stop()
	t.mu.Unlock()
	pl.release()
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

// releaseAll gives every permit back (shutdown).
func (t *permitTable) releaseAll() {
	t.mu.Lock()
	all := t.leases
	t.leases = map[string]*permitLease{}
	t.mu.Unlock()
	for _, pl := range all {
		pl.timer.Stop()
		pl.release()
	}
}
