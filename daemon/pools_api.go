package daemon

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/runtime/pools"
)

// A pool lease's external ID is the pools package's "<pool>/<id>" with the
// slash made a dot, so that it fits one URL path segment (pool names cannot
// contain dots). Budget permits use "~" instead (see permits.go).
func externalLeaseID(id string) string { return strings.Replace(id, "/", ".", 1) }
func internalLeaseID(id string) string { return strings.Replace(id, ".", "/", 1) }

func (d *Daemon) listPools(w http.ResponseWriter, r *http.Request) {
	_ = writeJSON(w, http.StatusOK, api.PoolList{Pools: d.comp.poolStatuses()})
}

func (d *Daemon) getPool(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	st, err := d.comp.pools.PoolStatus(name)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.comp.mu.RLock()
	retained := d.comp.poolGone[name]
	d.comp.mu.RUnlock()
	_ = writeJSON(w, http.StatusOK, poolStatus(st, retained))
}

// poolRequest validates an acquire body and converts it.
func (d *Daemon) poolRequest(req api.AcquireRequest) (pools.Request, time.Duration, error) {
	var pr pools.Request
	wait, err := waitDuration(req.WaitSeconds)
	if err != nil {
		return pr, 0, err
	}
	ttl, err := ttlDuration(req.TTLSeconds, 0) // 0: the pool's lease_ttl (default 60 s)
	if err != nil {
		return pr, 0, err
	}
	if req.Slots < 0 {
		return pr, 0, badRequest("slots %d must be at least 1 (0 or absent means 1)", req.Slots)
	}
	prio := 0
	switch {
	case req.Priority != nil && req.PriorityName != "":
		return pr, 0, badRequest("give priority or priority_name, not both")
	case req.Priority != nil:
		prio = *req.Priority
	case req.PriorityName != "":
		w, ok := d.comp.priority(req.PriorityName)
		if !ok {
			return pr, 0, badRequest("unknown priority_name %q: declare it with a priority block, or pass a numeric priority", req.PriorityName)
		}
		prio = w
	}
	pr = pools.Request{TaskID: req.TaskID, Priority: prio, Slots: max(req.Slots, 1), TTL: ttl, Timeout: wait}
	if wait == 0 {
		// Answer at once: a request that cannot be granted immediately
		// times out on the next clock tick instead of waiting.
		pr.Timeout = time.Nanosecond
	}
	return pr, wait, nil
}

func (d *Daemon) acquire(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var req api.AcquireRequest
	if err := decode(w, r, &req); err != nil {
		d.fail(w, r, err)
		return
	}
	pr, wait, err := d.poolRequest(req)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if d.comp.poolRemoved(name) {
		d.fail(w, r, notFound("pool %q was removed from the configuration; it is kept only until its holders release", name))
		return
	}
	ctx := r.Context()
	lease, err := d.comp.pools.Acquire(ctx, name, pr)
	if err != nil {
		switch {
		case wait == 0 && errors.Is(err, pools.ErrTimeout):
			err = &httpError{status: http.StatusConflict, code: api.CodeUnavailable,
				msg: "no free slot in pool " + name + " now; retry, or pass wait_seconds to wait for one"}
		case d.stopping.Load() && ctx.Err() != nil && !errors.Is(err, pools.ErrTimeout):
			err = errShuttingDown
		}
		d.fail(w, r, err)
		return
	}
	if err := writeJSON(w, http.StatusOK, poolLease(lease)); err != nil {
		// The client is gone: nobody will heartbeat or release the lease.
		_ = lease.Release()
	}
}

func poolLease(l *pools.Lease) api.Lease {
	return api.Lease{
		LeaseID:    externalLeaseID(l.ID()),
		Kind:       api.KindPool,
		Pool:       l.Pool(),
		TaskID:     l.TaskID(),
		Priority:   l.Priority(),
		Slots:      l.Slots(),
		TTLSeconds: l.TTL().Seconds(),
		ExpiresAt:  l.ExpiresAt(),
	}
}

func (d *Daemon) heartbeat(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := decode(w, r, &struct{}{}); err != nil {
		d.fail(w, r, err)
		return
	}
	if isPermitID(id) {
		l, err := d.permits.heartbeat(id)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		if err := d.permits.recordHeartbeat(r.Context(), l); err != nil {
			// As for pool leases: extended here, not in its record.
			d.log.Warn("permit heartbeated but its record was not extended", "lease", id, "err", err)
		}
		_ = writeJSON(w, http.StatusOK, l)
		return
	}
	l, err := d.comp.pools.Lease(internalLeaseID(id))
	if err != nil {
		d.fail(w, r, notFound("no lease %s: it was released, expired, or never existed; acquire again", id))
		return
	}
	if err := l.Heartbeat(r.Context()); err != nil {
		if !errors.Is(err, pools.ErrStore) {
			d.fail(w, r, err)
			return
		}
		// The lease is extended here; only its durable record is not, so a
		// daemon restarted before the next heartbeat may see it expired.
		d.log.Warn("lease heartbeated but its record was not extended", "lease", id, "err", err)
	}
	_ = writeJSON(w, http.StatusOK, poolLease(l))
}

func (d *Daemon) releaseLease(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if isPermitID(id) {
		if err := d.permits.release(id, ""); err != nil {
			d.fail(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	l, err := d.comp.pools.Lease(internalLeaseID(id))
	if err != nil {
		d.fail(w, r, notFound("no lease %s: it was released, expired, or never existed", id))
		return
	}
	if err := l.Release(); err != nil {
		// The slots are free; only the durable record's delete failed, and
		// its TTL or the next Restore drops it.
		d.log.Warn("lease released but its record was not deleted", "lease", id, "err", err)
	}
	w.WriteHeader(http.StatusNoContent)
}
