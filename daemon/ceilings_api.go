package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/runtime/ledger"
)

func (d *Daemon) listCeilings(w http.ResponseWriter, r *http.Request) {
	_ = writeJSON(w, http.StatusOK, api.CeilingList{Ceilings: d.comp.snapshot().Ceilings})
}

// liveCeiling returns the named ceiling; a retained one (dropped from the
// configuration, still holding claims) serves confirms and cancels but no
// new claims.
func (d *Daemon) liveCeiling(name string, forNew bool) (*ceiling, error) {
	ce, ok := d.comp.ceiling(name)
	if !ok || (forNew && ce.retained) {
		return nil, notFound("no vm_ceiling %q: declare it with a vm_ceiling block", name)
	}
	return ce, nil
}

func (d *Daemon) getCeiling(w http.ResponseWriter, r *http.Request) {
	ce, err := d.liveCeiling(r.PathValue("name"), false)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	_ = writeJSON(w, http.StatusOK, ceilingStatus(ce))
}

func claimJSON(ceilingName string, c *ledger.Claim) api.Claim {
	confirmedAt := c.ConfirmedAt()
	return api.Claim{
		ClaimID: c.ID().String(), Ceiling: ceilingName, WorkerID: c.WorkerID(), Count: c.Count(),
		Confirmed: !confirmedAt.IsZero(), GrantedAt: c.GrantedAt(), ExpiresAt: c.ExpiresAt(), ConfirmedAt: confirmedAt,
	}
}

func (d *Daemon) requestClaim(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var req api.ClaimRequest
	if err := decode(w, r, &req); err != nil {
		d.fail(w, r, err)
		return
	}
	wait, err := waitDuration(req.WaitSeconds)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	switch {
	case req.WorkerID == "":
		d.fail(w, r, badRequest("worker_id is required: it names the worker the VM is for"))
		return
	case req.Count < 0:
		d.fail(w, r, badRequest("count %d must be at least 1 (0 or absent means 1)", req.Count))
		return
	}
	ce, err := d.liveCeiling(name, true)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	lr := ledger.Request{WorkerID: req.WorkerID, Count: max(req.Count, 1)}
	var c *ledger.Claim
	if wait == 0 {
		c, err = ce.ledger.TryRequest(lr)
	} else {
		ctx, cancelWait := context.WithTimeout(r.Context(), wait)
		defer cancelWait()
		c, err = ce.ledger.Request(ctx, lr)
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			err = waitTimedOut(fmt.Sprintf("vm_ceiling %s: worker %q's request for %d VM(s)", name, lr.WorkerID, lr.Count), wait)
		case err != nil && d.stopping.Load() && errors.Is(err, context.Canceled):
			err = errShuttingDown
		}
	}
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if err := d.grants.putClaim(r.Context(), name, c); err != nil {
		c.Cancel() // a claim a restart would forget could over-book
		d.fail(w, r, fmt.Errorf("vm_ceiling %s: the claim was not granted: %w", name, err))
		return
	}
	if err := writeJSON(w, http.StatusOK, claimJSON(name, c)); err != nil {
		c.Cancel()
		d.grants.deleteClaim(name, c.ID())
	}
}

// claim finds a claim by the {name} and {id} of the path.
func (d *Daemon) claim(r *http.Request) (string, *ledger.Claim, error) {
	name, id := r.PathValue("name"), r.PathValue("id")
	ce, err := d.liveCeiling(name, false)
	if err != nil {
		return "", nil, err
	}
	cid, err := ledger.ParseClaimID(id)
	if err != nil {
		return "", nil, notFound("no claim %q in vm_ceiling %q: not a claim ID", id, name)
	}
	c, ok := ce.ledger.Lookup(cid)
	if !ok {
		return "", nil, notFound("no claim %s in vm_ceiling %q: it was cancelled, expired or retired", id, name)
	}
	return name, c, nil
}

func (d *Daemon) confirmClaim(w http.ResponseWriter, r *http.Request) {
	if err := decode(w, r, &struct{}{}); err != nil {
		d.fail(w, r, err)
		return
	}
	name, c, err := d.claim(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if err := c.Confirm(); err != nil {
		d.fail(w, r, err)
		return
	}
	if err := d.grants.putClaim(r.Context(), name, c); err != nil {
		// Confirmed here, not in the record; confirming again is harmless
		// and records it.
		d.fail(w, r, fmt.Errorf("vm_ceiling %s: claim %s is confirmed, but the confirmation was not recorded; confirm again: %w", name, c.ID(), err))
		return
	}
	_ = writeJSON(w, http.StatusOK, claimJSON(name, c))
}

func (d *Daemon) cancelClaim(w http.ResponseWriter, r *http.Request) {
	name, c, err := d.claim(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	c.Cancel()
	if !d.comp.claimLive(name, c.ID()) {
		// A confirmed claim counts on until the next figure; sweepClaims
		// deletes its record then.
		d.grants.deleteClaim(name, c.ID())
	}
	w.WriteHeader(http.StatusNoContent)
}

func (d *Daemon) putUsage(w http.ResponseWriter, r *http.Request) {
	var req api.UsageRequest
	if err := decode(w, r, &req); err != nil {
		d.fail(w, r, err)
		return
	}
	if req.Active == nil || *req.Active < 0 {
		d.fail(w, r, badRequest("active must be given and at least 0: the number of VMs the provider reports running"))
		return
	}
	ce, err := d.liveCeiling(r.PathValue("name"), false)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if err := ce.ledger.ObserveUsage(*req.Active, time.Time{}); err != nil {
		d.fail(w, r, badRequest("%v", err))
		return
	}
	_ = writeJSON(w, http.StatusOK, ceilingStatus(ce))
}
