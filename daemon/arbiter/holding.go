package arbiter

import (
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/daemon/internal/httpapi"
	"github.com/rpdhq/rpd/runtime/ledger"
	"github.com/rpdhq/rpd/runtime/pools"
)

// grantFilter selects grants; an empty field matches everything.
type grantFilter struct {
	kind, component, taskID string
}

func (f grantFilter) match(g api.Grant) bool {
	return (f.kind == "" || g.Kind == f.kind) && (f.component == "" || g.Component == f.component) &&
		(f.taskID == "" || g.TaskID == f.taskID || g.WorkerID == f.taskID)
}

// leaseFilter reads ?kind=, ?pool=, ?budget=, ?ceiling= and ?task_id=.
func leaseFilter(q url.Values) (grantFilter, error) {
	f := grantFilter{kind: q.Get("kind"), taskID: q.Get("task_id")}
	switch f.kind {
	case "", api.KindPool, api.KindPermit, api.KindClaim:
	default:
		return f, httpapi.BadRequest("kind %q: use %s, %s or %s", f.kind, api.KindPool, api.KindPermit, api.KindClaim)
	}
	for param, kind := range map[string]string{"pool": api.KindPool, "budget": api.KindPermit, "ceiling": api.KindClaim} {
		name := q.Get(param)
		if name == "" {
			continue
		}
		if f.component != "" || (f.kind != "" && f.kind != kind) {
			return f, httpapi.BadRequest("?%s= names a %s component; it cannot be combined with ?kind=%s or another of ?pool=, ?budget=, ?ceiling=", param, kind, f.kind)
		}
		f.kind, f.component = kind, name
	}
	return f, nil
}

func poolGrant(pool string, h pools.Holder) api.Grant {
	return api.Grant{
		Kind: api.KindPool, ID: externalLeaseID(h.ID), Component: pool, Principal: h.Owner, TaskID: h.TaskID,
		Priority: h.Priority, Slots: h.Slots,
		GrantedAt: httpapi.TimePtr(h.GrantedAt), HeartbeatAt: httpapi.TimePtr(h.RenewedAt), ExpiresAt: httpapi.TimePtr(h.ExpiresAt),
	}
}

func permitGrant(l api.Lease) api.Grant {
	ttl := time.Duration(l.TTLSeconds * float64(time.Second))
	return api.Grant{
		Kind: api.KindPermit, ID: l.LeaseID, Component: l.Budget,
		ScanRingBytes: l.ScanRingBytes, DeltaCacheBytes: l.DeltaCacheBytes, Spill: l.Spill,
		// A heartbeat sets the expiry to now+TTL, so this is its time.
		GrantedAt: httpapi.TimePtr(l.GrantedAt), HeartbeatAt: httpapi.TimePtr(l.ExpiresAt.Add(-ttl)), ExpiresAt: httpapi.TimePtr(l.ExpiresAt),
	}
}

func claimGrant(ceiling string, c ledger.ClaimInfo) api.Grant {
	g := api.Grant{
		Kind: api.KindClaim, ID: c.ID.String(), Component: ceiling, WorkerID: c.WorkerID, VMs: c.Count,
		Confirmed: !c.ConfirmedAt.IsZero(), GrantedAt: httpapi.TimePtr(c.GrantedAt),
	}
	if !g.Confirmed {
		g.ExpiresAt = httpapi.TimePtr(c.ExpiresAt) // a confirmed claim ends with a usage figure, not a time
	}
	return g
}

// list returns the permits held, oldest first.
func (t *permitTable) list() []api.Lease {
	t.mu.Lock()
	out := make([]api.Lease, 0, len(t.leases))
	for _, pl := range t.leases {
		out = append(out, pl.lease)
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b api.Lease) int {
		if c := a.GrantedAt.Compare(b.GrantedAt); c != 0 {
			return c
		}
		return strings.Compare(a.LeaseID, b.LeaseID)
	})
	return out
}

// holdersURL is the GET /v1/leases query listing a component's holders.
func holdersURL(param, name string) string {
	return "/v1/leases?" + url.Values{param: {name}}.Encode()
}

// withPoolCounts adds the holder count, link and waiters by priority to
// st without listing the holders (a status read: O(waiters), not
// O(holders)).
func withPoolCounts(mgr *pools.Manager, st *api.PoolStatus) {
	st.HoldersURL = holdersURL("pool", st.Name)
	st.QueuedByPriority = []api.QueuedPriority{}
	n, queue, err := mgr.Waiting(st.Name)
	if err != nil {
		return // deleted meanwhile: nobody holds it
	}
	st.Leases = n
	st.QueuedByPriority = queuedByPriority(queue)
}

func queuedByPriority(queue []pools.QueuedPriority) []api.QueuedPriority {
	out := make([]api.QueuedPriority, 0, len(queue))
	for _, q := range queue {
		out = append(out, api.QueuedPriority{Priority: q.Priority, Requests: q.Requests, Slots: q.Slots, OldestWaitSeconds: q.Oldest.Seconds(), TaskIDs: q.TaskIDs})
	}
	return out
}

// withPoolHolding adds the holder count, link and waiters by priority to
// st, and returns the holders.
func withPoolHolding(mgr *pools.Manager, st *api.PoolStatus) []api.Grant {
	st.HoldersURL = holdersURL("pool", st.Name)
	st.QueuedByPriority = []api.QueuedPriority{}
	holders, queue, err := mgr.Holders(st.Name)
	if err != nil {
		return []api.Grant{} // deleted meanwhile: nobody holds it
	}
	st.Leases = len(holders)
	st.QueuedByPriority = queuedByPriority(queue)
	out := make([]api.Grant, 0, len(holders))
	for _, h := range holders {
		out = append(out, poolGrant(st.Name, h))
	}
	return out
}

// withBudgetHolding adds the permit count, link and waiters to st from
// permits (the permits held, every budget's), and returns st's.
func withBudgetHolding(st *api.BudgetStatus, permits []api.Lease) []api.Grant {
	st.HoldersURL = holdersURL("budget", st.Name)
	st.QueuedByPriority = fifoQueue(st.Queued)
	out := []api.Grant{}
	for _, l := range permits {
		if l.Budget == st.Name {
			out = append(out, permitGrant(l))
		}
	}
	st.Permits = len(out)
	return out
}

// withCeilingHolding adds the claim count, link and waiters to st from its
// ledger, and returns the claims.
func withCeilingHolding(st *api.CeilingStatus, l *ledger.Ledger) []api.Grant {
	st.HoldersURL = holdersURL("ceiling", st.Name)
	st.QueuedByPriority = fifoQueue(st.Queued)
	claims := l.Claims()
	st.Claims = len(claims)
	out := make([]api.Grant, 0, len(claims))
	for _, c := range claims {
		out = append(out, claimGrant(st.Name, c))
	}
	return out
}

// fifoQueue is the queued_by_priority of a FIFO component: everyone at 0.
func fifoQueue(queued int) []api.QueuedPriority {
	if queued == 0 {
		return []api.QueuedPriority{}
	}
	return []api.QueuedPriority{{Priority: 0, Requests: queued}}
}

// grantsMatching adds the grants f selects to win: pool leases by pool,
// then permits, then claims, each oldest first. Only those inside win are
// converted to api.Grant (unless f filters by task ID, which needs them
// all): a page of 100 of 10,000 holders costs the counting, not 10,000
// answers.
func (a *Arbiter) grantsMatching(f grantFilter, win *httpapi.Window[api.Grant]) {
	consider := func(kind, component string, build func() api.Grant) {
		if (f.kind != "" && f.kind != kind) || (f.component != "" && f.component != component) {
			return
		}
		if f.taskID == "" {
			win.Add(build)
			return
		}
		if g := build(); f.match(g) {
			win.Add(func() api.Grant { return g })
		}
	}
	if f.kind == "" || f.kind == api.KindPool {
		names, byPool := a.comp.pools.holders(f.component)
		for _, name := range names {
			for _, h := range byPool[name] {
				consider(api.KindPool, name, func() api.Grant { return poolGrant(name, h) })
			}
		}
	}
	if f.kind == "" || f.kind == api.KindPermit {
		for _, l := range a.permits.list() {
			consider(api.KindPermit, l.Budget, func() api.Grant {
				g := permitGrant(l)
				_, g.Principal, _ = a.permits.get(l.LeaseID)
				return g
			})
		}
	}
	if f.kind == "" || f.kind == api.KindClaim {
		for _, ce := range a.comp.ceilings.snapshot() {
			if f.component != "" && ce.name != f.component {
				continue
			}
			for _, c := range ce.ledger.Claims() {
				consider(api.KindClaim, ce.name, func() api.Grant {
					g := claimGrant(ce.name, c)
					g.Principal = a.grants.claimOwner(ce.name, c.ID)
					return g
				})
			}
		}
	}
}

// Grants adds the grants the query q selects (?kind=, ?pool=, ?budget=,
// ?ceiling=, ?task_id=) to win.
func (a *Arbiter) Grants(q url.Values, win *httpapi.Window[api.Grant]) error {
	f, err := leaseFilter(q)
	if err != nil {
		return err
	}
	a.grantsMatching(f, win)
	return nil
}
