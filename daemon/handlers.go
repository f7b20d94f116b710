package daemon

import (
	"net/http"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/daemon/internal/httpapi"
)

// This file is the API's edge onto the arbiter: each handler decodes its
// request, asks the arbiter, and answers. A grant whose answer cannot be
// delivered (the client is gone) is given back: nobody would heartbeat or
// release it.

// grantAnswer writes a granted g, giving it back when the answer cannot be
// written.
func (d *Daemon) grantAnswer(w http.ResponseWriter, r *http.Request, g any, giveBack func(), err error) {
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if err := httpapi.WriteJSON(w, http.StatusOK, g); err != nil && giveBack != nil {
		giveBack()
	}
}

// answer writes v, or err.
func (d *Daemon) answer(w http.ResponseWriter, r *http.Request, v any, err error) {
	if err != nil {
		d.fail(w, r, err)
		return
	}
	_ = httpapi.WriteJSON(w, http.StatusOK, v)
}

// noContent answers 204, or err.
func (d *Daemon) noContent(w http.ResponseWriter, r *http.Request, err error) {
	if err != nil {
		d.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// decoded decodes r's body into a new T, answering the error itself.
func decoded[T any](d *Daemon, w http.ResponseWriter, r *http.Request) (T, bool) {
	var v T
	if err := httpapi.Decode(w, r, &v); err != nil {
		d.fail(w, r, err)
		return v, false
	}
	return v, true
}

func (d *Daemon) listPools(w http.ResponseWriter, r *http.Request) {
	d.answer(w, r, api.PoolList{Pools: d.arb.Pools()}, nil)
}

func (d *Daemon) getPool(w http.ResponseWriter, r *http.Request) {
	st, err := d.arb.Pool(r.PathValue("name"))
	d.answer(w, r, st, err)
}

func (d *Daemon) acquire(w http.ResponseWriter, r *http.Request) {
	if req, ok := decoded[api.AcquireRequest](d, w, r); ok {
		l, giveBack, err := d.arb.AcquireLease(r.Context(), r.PathValue("name"), req)
		d.grantAnswer(w, r, l, giveBack, err)
	}
}

func (d *Daemon) heartbeat(w http.ResponseWriter, r *http.Request) {
	if _, ok := decoded[struct{}](d, w, r); ok {
		l, err := d.arb.Heartbeat(r.Context(), r.PathValue("id"))
		d.answer(w, r, l, err)
	}
}

func (d *Daemon) releaseLease(w http.ResponseWriter, r *http.Request) {
	d.noContent(w, r, d.arb.Release(r.Context(), r.PathValue("id")))
}

func (d *Daemon) listBudgets(w http.ResponseWriter, r *http.Request) {
	d.answer(w, r, api.BudgetList{Budgets: d.arb.Budgets()}, nil)
}

func (d *Daemon) getBudget(w http.ResponseWriter, r *http.Request) {
	st, err := d.arb.Budget(r.PathValue("name"))
	d.answer(w, r, st, err)
}

func (d *Daemon) acquirePermit(w http.ResponseWriter, r *http.Request) {
	if req, ok := decoded[api.PermitRequest](d, w, r); ok {
		l, giveBack, err := d.arb.AcquirePermit(r.Context(), r.PathValue("name"), req)
		d.grantAnswer(w, r, l, giveBack, err)
	}
}

func (d *Daemon) releasePermit(w http.ResponseWriter, r *http.Request) {
	d.noContent(w, r, d.arb.ReleasePermit(r.Context(), r.PathValue("name"), r.PathValue("id")))
}

func (d *Daemon) listCeilings(w http.ResponseWriter, r *http.Request) {
	d.answer(w, r, api.CeilingList{Ceilings: d.arb.Ceilings()}, nil)
}

func (d *Daemon) getCeiling(w http.ResponseWriter, r *http.Request) {
	st, err := d.arb.Ceiling(r.PathValue("name"))
	d.answer(w, r, st, err)
}

func (d *Daemon) requestClaim(w http.ResponseWriter, r *http.Request) {
	if req, ok := decoded[api.ClaimRequest](d, w, r); ok {
		c, giveBack, err := d.arb.RequestClaim(r.Context(), r.PathValue("name"), req)
		d.grantAnswer(w, r, c, giveBack, err)
	}
}

func (d *Daemon) confirmClaim(w http.ResponseWriter, r *http.Request) {
	if _, ok := decoded[struct{}](d, w, r); ok {
		c, err := d.arb.ConfirmClaim(r.Context(), r.PathValue("name"), r.PathValue("id"))
		d.answer(w, r, c, err)
	}
}

func (d *Daemon) cancelClaim(w http.ResponseWriter, r *http.Request) {
	d.noContent(w, r, d.arb.CancelClaim(r.Context(), r.PathValue("name"), r.PathValue("id")))
}

func (d *Daemon) putUsage(w http.ResponseWriter, r *http.Request) {
	if req, ok := decoded[api.UsageRequest](d, w, r); ok {
		st, err := d.arb.PutUsage(r.PathValue("name"), req)
		d.answer(w, r, st, err)
	}
}

func (d *Daemon) listLeases(w http.ResponseWriter, r *http.Request) {
	win, err := httpapi.PageBounds[api.Grant](r.URL.Query())
	if err == nil {
		err = d.arb.Grants(r.URL.Query(), &win)
	}
	if err != nil {
		d.fail(w, r, err)
		return
	}
	_ = httpapi.WriteJSONConditional(w, r, api.GrantList{Leases: win.Out, Total: win.Total, NextOffset: win.Next()})
}

func (d *Daemon) pickup(w http.ResponseWriter, r *http.Request) {
	if req, ok := decoded[api.PickupRequest](d, w, r); ok {
		inst, giveBack, err := d.inv.Pickup(r.Context(), r.PathValue("class"), req)
		d.grantAnswer(w, r, inst, giveBack, err)
	}
}

func (d *Daemon) confirmInstance(w http.ResponseWriter, r *http.Request) {
	if req, ok := decoded[api.ConfirmInstanceRequest](d, w, r); ok {
		inst, err := d.inv.ConfirmInstance(r.Context(), r.PathValue("id"), req)
		d.answer(w, r, inst, err)
	}
}

func (d *Daemon) offer(w http.ResponseWriter, r *http.Request) {
	if req, ok := decoded[api.Instance](d, w, r); ok {
		inst, err := d.inv.Offer(r.Context(), r.PathValue("class"), req)
		d.answer(w, r, inst, err)
	}
}

func (d *Daemon) releaseInstance(w http.ResponseWriter, r *http.Request) {
	if req, ok := decoded[api.ReleaseInstanceRequest](d, w, r); ok {
		inst, err := d.inv.ReleaseInstance(r.Context(), r.PathValue("id"), req)
		d.answer(w, r, inst, err)
	}
}

func (d *Daemon) listClasses(w http.ResponseWriter, r *http.Request) {
	_ = httpapi.WriteJSONConditional(w, r, api.ClassList{Classes: d.inv.Classes(r.Context())})
}

func (d *Daemon) getClass(w http.ResponseWriter, r *http.Request) {
	cl, err := d.inv.Class(r.Context(), r.PathValue("class"))
	d.answer(w, r, cl, err)
}

func (d *Daemon) listInstances(w http.ResponseWriter, r *http.Request) {
	win, err := httpapi.PageBounds[api.Instance](r.URL.Query())
	if err == nil {
		err = d.inv.Instances(r.Context(), r.PathValue("class"), r.URL.Query().Get("state"), &win)
	}
	if err != nil {
		d.fail(w, r, err)
		return
	}
	_ = httpapi.WriteJSONConditional(w, r, api.InstanceList{Instances: win.Out, Total: win.Total, NextOffset: win.Next()})
}

func (d *Daemon) getInstance(w http.ResponseWriter, r *http.Request) {
	inst, err := d.inv.Instance(r.Context(), r.PathValue("id"))
	d.answer(w, r, inst, err)
}
