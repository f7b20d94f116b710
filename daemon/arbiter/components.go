package arbiter

import (
	"context"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/daemon/internal/component"
)

// components are the daemon's sets. No reload ever drops a held slot,
// permit or claim: an object removed from the configuration while in use
// is kept ("retained", and reported) and removed by sweep once idle.
type components struct {
	pools    *poolSet
	budgets  *budgetSet
	ceilings *ceilingSet
}

func (c *components) sets() []component.Set {
	return []component.Set{c.pools, c.budgets, c.ceilings}
}

// commit applies prepared changes, then sweeps.
func (c *components) commit(ctx context.Context, commits []component.CommitFunc) ([]string, error) {
	changes, err := component.Commit(commits)
	c.sweep(ctx)
	return changes, err
}

// sweep removes components that were dropped from the configuration and
// have become idle. The daemon calls it after every reload and periodically.
func (c *components) sweep(ctx context.Context) {
	for _, s := range c.sets() {
		s.Sweep(ctx)
	}
}

// snapshot reports every component for /v1/status.
func (c *components) snapshot() api.Components {
	out := api.Components{
		Pools: []api.PoolStatus{}, Budgets: []api.BudgetStatus{}, Ceilings: []api.CeilingStatus{},
		Classes: []api.ClassStatus{}, Priorities: map[string]int{},
	}
	for _, s := range c.sets() {
		s.Status(&out)
	}
	return out
}

// close stops every background loop.
func (c *components) close() {
	for _, s := range c.sets() {
		s.Close()
	}
}
