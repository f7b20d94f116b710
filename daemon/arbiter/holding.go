package arbiter

import (
	"net/url"
	"slices"
	"strings"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/daemon/internal/holders"
	"github.com/rpdhq/rpd/daemon/internal/httpapi"
)

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

// grantsMatching adds the grants f selects to win: pool leases by pool,
// then permits, then claims, each oldest first. Only those inside win are
// converted to api.Grant (unless f filters by task ID, which needs them
// all): a page of 100 of 10,000 holders costs the counting, not 10,000
// answers.
func (a *Arbiter) grantsMatching(f holders.Filter, win *httpapi.Window[api.Grant]) {
	consider := func(kind, component string, build func() api.Grant) {
		if (f.Kind != "" && f.Kind != kind) || (f.Component != "" && f.Component != component) {
			return
		}
		if f.TaskID == "" {
			win.Add(build)
			return
		}
		if g := build(); f.Match(g) {
			win.Add(func() api.Grant { return g })
		}
	}
	if f.Kind == "" || f.Kind == api.KindPool {
		names, byPool := a.comp.pools.holders(f.Component)
		for _, name := range names {
			for _, h := range byPool[name] {
				consider(api.KindPool, name, func() api.Grant { return holders.PoolGrant(name, h) })
			}
		}
	}
	if f.Kind == "" || f.Kind == api.KindPermit {
		for _, l := range a.permits.list() {
			consider(api.KindPermit, l.Budget, func() api.Grant {
				g := holders.PermitGrant(l)
				_, g.Principal, _ = a.permits.get(l.LeaseID)
				return g
			})
		}
	}
	if f.Kind == "" || f.Kind == api.KindClaim {
		for _, ce := range a.comp.ceilings.snapshot() {
			if f.Component != "" && ce.name != f.Component {
				continue
			}
			for _, c := range ce.ledger.Claims() {
				consider(api.KindClaim, ce.name, func() api.Grant {
					g := holders.ClaimGrant(ce.name, c)
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
	f, err := holders.ParseFilter(q)
	if err != nil {
		return err
	}
	a.grantsMatching(f, win)
	return nil
}
