package arbiter

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rpdhq/rpd/daemon/internal/component"
)

// componentCollector reads every runtime component's status and counters
// at scrape time, so the request paths pay nothing for metrics.
type componentCollector struct{ a *Arbiter }

var (
	poolLabels    = []string{"pool"}
	budgetLabels  = []string{"budget"}
	ceilingLabels = []string{"vm_ceiling"}
	classLabels   = []string{"class"}

	descPoolSlots     = prometheus.NewDesc("rpd_pool_slots", "Configured slots of the pool.", poolLabels, nil)
	descPoolUsed      = prometheus.NewDesc("rpd_pool_slots_used", "Slots held (may exceed the total after a shrink).", poolLabels, nil)
	descPoolAvailable = prometheus.NewDesc("rpd_pool_slots_available", "Slots free now.", poolLabels, nil)
	descPoolQueued    = prometheus.NewDesc("rpd_pool_queued_requests", "Requests waiting for slots.", poolLabels, nil)
	descPoolRetained  = prometheus.NewDesc("rpd_pool_retained", "1 if the pool was removed from the configuration but is kept while in use.", poolLabels, nil)
	descPoolEvents    = prometheus.NewDesc("rpd_pool_events_total", "Pool lease events by kind: granted, released, cancelled, timed_out, expired, rejected.", []string{"pool", "event"}, nil)
	descPoolWaits     = prometheus.NewDesc("rpd_pool_waits_total", "Granted requests that had to wait.", poolLabels, nil)
	descPoolWaitSecs  = prometheus.NewDesc("rpd_pool_wait_seconds_total", "Total time granted requests waited.", poolLabels, nil)

	descBudgetBytes      = prometheus.NewDesc("rpd_budget_bytes", "Budgeted bytes by resource (scan_ring, delta_cache).", []string{"budget", "resource"}, nil)
	descBudgetBytesInUse = prometheus.NewDesc("rpd_budget_bytes_in_use", "Bytes held by permits, by resource.", []string{"budget", "resource"}, nil)
	descBudgetSpill      = prometheus.NewDesc("rpd_budget_spill_slots", "Spill slots of a budget with limited spilling.", budgetLabels, nil)
	descBudgetSpillInUse = prometheus.NewDesc("rpd_budget_spill_slots_in_use", "Counted spill slots held.", budgetLabels, nil)
	descBudgetQueued     = prometheus.NewDesc("rpd_budget_queued_requests", "Permit requests waiting.", budgetLabels, nil)
	descBudgetEvents     = prometheus.NewDesc("rpd_budget_events_total", "Permit events by kind: granted, denied, waited, cancelled.", []string{"budget", "event"}, nil)
	descBudgetWaitSecs   = prometheus.NewDesc("rpd_budget_wait_seconds_total", "Total time granted permits waited.", budgetLabels, nil)
	descPermitsHeld      = prometheus.NewDesc("rpd_budget_remote_permits", "Permits held by remote clients.", budgetLabels, nil)
	descPermitsExpired   = prometheus.NewDesc("rpd_remote_permits_expired_total", "Remote budget permits released because their holder stopped heartbeating.", nil, nil)

	descCeilingMax       = prometheus.NewDesc("rpd_vm_ceiling_max", "The ceiling.", ceilingLabels, nil)
	descCeilingActive    = prometheus.NewDesc("rpd_vm_ceiling_provider_active", "Last usage figure accepted from the provider.", ceilingLabels, nil)
	descCeilingClaims    = prometheus.NewDesc("rpd_vm_ceiling_local_claims", "VMs covered by local claims that still count.", ceilingLabels, nil)
	descCeilingEffective = prometheus.NewDesc("rpd_vm_ceiling_effective", "provider_active + local_claims.", ceilingLabels, nil)
	descCeilingAvailable = prometheus.NewDesc("rpd_vm_ceiling_available", "VMs that may be granted now.", ceilingLabels, nil)
	descCeilingQueued    = prometheus.NewDesc("rpd_vm_ceiling_queued_requests", "Claim requests waiting.", ceilingLabels, nil)
	descCeilingStale     = prometheus.NewDesc("rpd_vm_ceiling_stale", "1 while no fresh usage figure: nothing is granted.", ceilingLabels, nil)
	descCeilingEvents    = prometheus.NewDesc("rpd_vm_ceiling_events_total", "Ledger events by kind: granted, queued, expired_unconfirmed, denied_stale, source_errors, figures, confirmed, retired, cancelled.", []string{"vm_ceiling", "event"}, nil)
)

func (c *componentCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPoolSlots, descPoolUsed, descPoolAvailable, descPoolQueued, descPoolRetained, descPoolEvents, descPoolWaits, descPoolWaitSecs,
		descBudgetBytes, descBudgetBytesInUse, descBudgetSpill, descBudgetSpillInUse, descBudgetQueued, descBudgetEvents, descBudgetWaitSecs, descPermitsHeld, descPermitsExpired,
		descCeilingMax, descCeilingActive, descCeilingClaims, descCeilingEffective, descCeilingAvailable, descCeilingQueued, descCeilingStale, descCeilingEvents} {
		ch <- d
	}
}

// Collect exports the pools, budgets and ceilings only on the leader: a
// standby's copies hold nothing, and their zeros would make a sum over the
// replicas' series wrong (and a max or a per-pod panel lie). Runner
// classes are every replica's own (each serves pickup).
func (c *componentCollector) Collect(ch chan<- prometheus.Metric) {
	comp := c.a.comp
	if c.a.opts.Arbitrating() {
		comp.pools.collect(ch)
		comp.budgets.collect(ch, c.a.permits.count())
		component.Counter(ch, descPermitsExpired, float64(c.a.permits.expired.Load()))
		comp.ceilings.collect(ch)
	}
}
