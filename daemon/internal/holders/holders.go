// Package holders is the API's view of who holds what: each grant as an
// api.Grant, a component's holder count, link and waiters by priority, and
// the filter of GET /v1/leases.
package holders

import (
	"net/url"
	"strings"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/daemon/internal/httpapi"
	"github.com/rpdhq/rpd/runtime/ledger"
	"github.com/rpdhq/rpd/runtime/pools"
)

// Filter selects grants; an empty field matches everything.
type Filter struct {
	Kind, Component, TaskID string
}

func (f Filter) Match(g api.Grant) bool {
	return (f.Kind == "" || g.Kind == f.Kind) && (f.Component == "" || g.Component == f.Component) &&
		(f.TaskID == "" || g.TaskID == f.TaskID || g.WorkerID == f.TaskID)
}

// ParseFilter reads ?kind=, ?pool=, ?budget=, ?ceiling= and ?task_id=.
func ParseFilter(q url.Values) (Filter, error) {
	f := Filter{Kind: q.Get("kind"), TaskID: q.Get("task_id")}
	switch f.Kind {
	case "", api.KindPool, api.KindPermit, api.KindClaim:
	default:
		return f, httpapi.BadRequest("kind %q: use %s, %s or %s", f.Kind, api.KindPool, api.KindPermit, api.KindClaim)
	}
	for param, kind := range map[string]string{"pool": api.KindPool, "budget": api.KindPermit, "ceiling": api.KindClaim} {
		name := q.Get(param)
		if name == "" {
			continue
		}
		if f.Component != "" || (f.Kind != "" && f.Kind != kind) {
			return f, httpapi.BadRequest("?%s= names a %s component; it cannot be combined with ?kind=%s or another of ?pool=, ?budget=, ?ceiling=", param, kind, f.Kind)
		}
		f.Kind, f.Component = kind, name
	}
	return f, nil
}

func PoolGrant(pool string, h pools.Holder) api.Grant {
	return api.Grant{
		Kind: api.KindPool, ID: ExternalLeaseID(h.ID), Component: pool, Principal: h.Owner, TaskID: h.TaskID,
		Priority: h.Priority, Slots: h.Slots,
		GrantedAt: httpapi.TimePtr(h.GrantedAt), HeartbeatAt: httpapi.TimePtr(h.RenewedAt), ExpiresAt: httpapi.TimePtr(h.ExpiresAt),
	}
}

func PermitGrant(l api.Lease) api.Grant {
	ttl := time.Duration(l.TTLSeconds * float64(time.Second))
	return api.Grant{
		Kind: api.KindPermit, ID: l.LeaseID, Component: l.Budget,
		ScanRingBytes: l.ScanRingBytes, DeltaCacheBytes: l.DeltaCacheBytes, Spill: l.Spill,
		// A heartbeat sets the expiry to now+TTL, so this is its time.
		GrantedAt: httpapi.TimePtr(l.GrantedAt), HeartbeatAt: httpapi.TimePtr(l.ExpiresAt.Add(-ttl)), ExpiresAt: httpapi.TimePtr(l.ExpiresAt),
	}
}

func ClaimGrant(ceiling string, c ledger.ClaimInfo) api.Grant {
	g := api.Grant{
		Kind: api.KindClaim, ID: c.ID.String(), Component: ceiling, WorkerID: c.WorkerID, VMs: c.Count,
		Confirmed: !c.ConfirmedAt.IsZero(), GrantedAt: httpapi.TimePtr(c.GrantedAt),
	}
	if !g.Confirmed {
		g.ExpiresAt = httpapi.TimePtr(c.ExpiresAt) // a confirmed claim ends with a usage figure, not a time
	}
	return g
}

// holdersURL is the GET /v1/leases query listing a component's holders.
func holdersURL(param, name string) string {
	return "/v1/leases?" + url.Values{param: {name}}.Encode()
}

// WithPoolCounts adds the holder count, link and waiters by priority to
// st without listing the holders (a status read: O(waiters), not
// O(holders)).
func WithPoolCounts(mgr *pools.Manager, st *api.PoolStatus) {
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

// WithPoolHolding adds the holder count, link and waiters by priority to
// st, and returns the holders.
func WithPoolHolding(mgr *pools.Manager, st *api.PoolStatus) []api.Grant {
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
		out = append(out, PoolGrant(st.Name, h))
	}
	return out
}

// WithBudgetHolding adds the permit count, link and waiters to st from
// permits (the permits held, every budget's), and returns st's.
func WithBudgetHolding(st *api.BudgetStatus, permits []api.Lease) []api.Grant {
	st.HoldersURL = holdersURL("budget", st.Name)
	st.QueuedByPriority = fifoQueue(st.Queued)
	out := []api.Grant{}
	for _, l := range permits {
		if l.Budget == st.Name {
			out = append(out, PermitGrant(l))
		}
	}
	st.Permits = len(out)
	return out
}

// WithCeilingHolding adds the claim count, link and waiters to st from its
// ledger, and returns the claims.
func WithCeilingHolding(st *api.CeilingStatus, l *ledger.Ledger) []api.Grant {
	st.HoldersURL = holdersURL("ceiling", st.Name)
	st.QueuedByPriority = fifoQueue(st.Queued)
	claims := l.Claims()
	st.Claims = len(claims)
	out := make([]api.Grant, 0, len(claims))
	for _, c := range claims {
		out = append(out, ClaimGrant(st.Name, c))
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

// A pool lease's external ID is the pools package's "<pool>/<id>" with the
// slash made a dot, so that it fits one URL path segment (pool names cannot
// contain dots). Budget permits use "~" instead (see permits.go).
func ExternalLeaseID(id string) string { return strings.Replace(id, "/", ".", 1) }

func InternalLeaseID(id string) string { return strings.Replace(id, ".", "/", 1) }
