package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/runtime/fatjob"
)

func (d *Daemon) listBudgets(w http.ResponseWriter, r *http.Request) {
	_ = writeJSON(w, http.StatusOK, api.BudgetList{Budgets: d.budgetStatuses()})
}

func (d *Daemon) budgetStatuses() []api.BudgetStatus {
	list := d.comp.snapshotBudgets()
	counts := d.permits.count()
	for i := range list {
		list[i].Permits = counts[list[i].Name]
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	return list
}

func (c *components) snapshotBudgets() []api.BudgetStatus {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]api.BudgetStatus, 0, len(c.budgets))
	for _, b := range c.budgets {
		out = append(out, budgetStatus(b))
	}
	return out
}

func (d *Daemon) getBudget(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	b, ok := d.comp.budget(name)
	if !ok {
		d.fail(w, r, notFound("no budget %q: declare it with a budget block", name))
		return
	}
	st := budgetStatus(b)
	st.Permits = d.permits.count()[name]
	_ = writeJSON(w, http.StatusOK, st)
}

func (d *Daemon) acquirePermit(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var req api.PermitRequest
	if err := decode(w, r, &req); err != nil {
		d.fail(w, r, err)
		return
	}
	wait, err := waitDuration(req.WaitSeconds)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	ttl, err := ttlDuration(req.TTLSeconds, api.DefaultTTLSeconds*1e9)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if req.ScanRingBytes > fatjob.MaxBudgetBytes || req.DeltaCacheBytes > fatjob.MaxBudgetBytes {
		d.fail(w, r, badRequest("scan_ring_bytes %d and delta_cache_bytes %d: each must be at most %d", req.ScanRingBytes, req.DeltaCacheBytes, fatjob.MaxBudgetBytes))
		return
	}
	if req.ScanRingBytes == 0 && req.DeltaCacheBytes == 0 && !req.Spill {
		d.fail(w, r, badRequest("the permit asks for nothing: set scan_ring_bytes, delta_cache_bytes or spill"))
		return
	}
	b, ok := d.comp.budget(name)
	if !ok || b.retained {
		d.fail(w, r, notFound("no budget %q: declare it with a budget block", name))
		return
	}
	fr := fatjob.Request{ScanRingBytes: req.ScanRingBytes, DeltaCacheBytes: req.DeltaCacheBytes, NeedsSpillSlot: req.Spill}
	var perm *fatjob.Permit
	if wait == 0 {
		var ok bool
		if perm, ok = b.pool.TryAcquire(fr); !ok {
			if exceeds(b.pool, fr) {
				d.fail(w, r, &httpError{status: http.StatusConflict, code: api.CodeUnavailable, msg: "the permit asks for more than budget " + name + " holds in total; it can never be granted"})
				return
			}
			d.fail(w, r, &httpError{status: http.StatusConflict, code: api.CodeUnavailable, msg: "budget " + name + " cannot grant the permit now; retry, or pass wait_seconds to wait in its queue"})
			return
		}
	} else {
		ctx, cancelWait := context.WithTimeout(r.Context(), wait)
		defer cancelWait()
		perm, err = b.pool.Acquire(ctx, fr)
		if err != nil {
			switch {
			case errors.Is(err, fatjob.ErrExceedsCapacity):
				err = &httpError{status: http.StatusConflict, code: api.CodeUnavailable, msg: err.Error()}
			case errors.Is(err, context.DeadlineExceeded):
				err = waitTimedOut(fmt.Sprintf("budget %s: a permit for %d scan-ring bytes, %d delta-cache bytes (spill %v)", name, fr.ScanRingBytes, fr.DeltaCacheBytes, fr.NeedsSpillSlot), wait)
			case d.stopping.Load() && errors.Is(err, context.Canceled):
				err = errShuttingDown
			}
			d.fail(w, r, err)
			return
		}
	}
	l, err := d.permits.add(r.Context(), api.Lease{
		Budget: name, ScanRingBytes: perm.ScanRingBytes(), DeltaCacheBytes: perm.DeltaCacheBytes(), Spill: perm.CanSpill(),
	}, ttl, perm.Release)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if err := writeJSON(w, http.StatusOK, l); err != nil {
		_ = d.permits.release(l.LeaseID, "")
	}
}

// exceeds reports whether r can never fit p's totals.
func exceeds(p *fatjob.Pool, r fatjob.Request) bool {
	if r.ScanRingBytes > p.ScanRingTotal() || r.DeltaCacheBytes > p.DeltaCacheTotal() {
		return true
	}
	return false
}

func (d *Daemon) releasePermit(w http.ResponseWriter, r *http.Request) {
	if err := d.permits.release(r.PathValue("id"), r.PathValue("name")); err != nil {
		d.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
