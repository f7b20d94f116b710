package daemon

import (
	"context"
	"net/http"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/daemon/internal/httpapi"
)

// This file is the API's edge onto the arbiter and the inventory: every
// route of a grant or a runner decodes its request, asks them, and
// answers. A grant whose answer cannot be delivered (the client is gone)
// is given back: nobody would heartbeat or release it.

// componentRoutes registers the routes of the pools, budgets, VM ceilings,
// runner classes and their grants. docs/api.md documents each.
func (d *Daemon) componentRoutes(sm *http.ServeMux) {
	mux := notingMux{sm}
	a, inv := d.arb, d.inv
	mux.HandleFunc("GET /v1/pools", list(d, func() any { return api.PoolList{Pools: a.Pools()} }))
	mux.HandleFunc("GET /v1/pools/{name}", read(d, "name", a.Pool))
	mux.HandleFunc("POST /v1/pools/{name}/acquire", grant(d, "name", a.AcquireLease))
	mux.HandleFunc("GET /v1/leases", d.listLeases)
	mux.HandleFunc("POST /v1/leases/{id}/heartbeat", call(d, "id", func(ctx context.Context, id string, _ struct{}) (api.Lease, error) {
		return a.Heartbeat(ctx, id)
	}))
	mux.HandleFunc("DELETE /v1/leases/{id}", end(d, func(r *http.Request) error { return a.Release(r.Context(), r.PathValue("id")) }))

	mux.HandleFunc("GET /v1/budgets", list(d, func() any { return api.BudgetList{Budgets: a.Budgets()} }))
	mux.HandleFunc("GET /v1/budgets/{name}", read(d, "name", a.Budget))
	mux.HandleFunc("POST /v1/budgets/{name}/permits", grant(d, "name", a.AcquirePermit))
	mux.HandleFunc("DELETE /v1/budgets/{name}/permits/{id}", end(d, func(r *http.Request) error {
		return a.ReleasePermit(r.Context(), r.PathValue("name"), r.PathValue("id"))
	}))

	mux.HandleFunc("GET /v1/ceilings", list(d, func() any { return api.CeilingList{Ceilings: a.Ceilings()} }))
	mux.HandleFunc("GET /v1/ceilings/{name}", read(d, "name", a.Ceiling))
	mux.HandleFunc("POST /v1/ceilings/{name}/claims", grant(d, "name", a.RequestClaim))
	mux.HandleFunc("POST /v1/ceilings/{name}/claims/{id}/confirm", func(w http.ResponseWriter, r *http.Request) {
		if err := httpapi.Decode(w, r, &struct{}{}); err != nil {
			d.fail(w, r, err)
			return
		}
		c, err := a.ConfirmClaim(r.Context(), r.PathValue("name"), r.PathValue("id"))
		d.answer(w, r, c, err)
	})
	mux.HandleFunc("DELETE /v1/ceilings/{name}/claims/{id}", end(d, func(r *http.Request) error {
		return a.CancelClaim(r.Context(), r.PathValue("name"), r.PathValue("id"))
	}))
	mux.HandleFunc("PUT /v1/ceilings/{name}/usage", call(d, "name", a.PutUsage))

	mux.HandleFunc("GET /v1/classes", func(w http.ResponseWriter, r *http.Request) {
		_ = httpapi.WriteJSONConditional(w, r, api.ClassList{Classes: inv.Classes(r.Context())})
	})
	mux.HandleFunc("GET /v1/classes/{class}", read(d, "class", inv.Class))
	mux.HandleFunc("POST /v1/classes/{class}/pickup", grant(d, "class", inv.Pickup))
	mux.HandleFunc("GET /v1/classes/{class}/instances", d.listInstances)
	mux.HandleFunc("POST /v1/classes/{class}/instances", call(d, "class", inv.Offer))
	mux.HandleFunc("GET /v1/instances/{id}", read(d, "id", inv.Instance))
	mux.HandleFunc("POST /v1/instances/{id}/release", call(d, "id", inv.ReleaseInstance))
	mux.HandleFunc("POST /v1/instances/{id}/confirm", call(d, "id", inv.ConfirmInstance))
}

// notingMux registers handlers that tell observe the request the mux
// routed (noteRoute).
type notingMux struct{ *http.ServeMux }

func (m notingMux) HandleFunc(pattern string, h http.HandlerFunc) {
	m.ServeMux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		noteRoute(w, r)
		h(w, r)
	})
}

// list answers what fn reports.
func list(d *Daemon, fn func() any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { d.answer(w, r, fn(), nil) }
}

// read answers fn of the path's {param}.
func read[T any](d *Daemon, param string, fn func(ctx context.Context, name string) (T, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := fn(r.Context(), r.PathValue(param))
		d.answer(w, r, v, err)
	}
}

// call decodes the body into a Req and answers fn of the path's {param}
// and it.
func call[Req, T any](d *Daemon, param string, fn func(ctx context.Context, name string, req Req) (T, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Req
		if err := httpapi.Decode(w, r, &req); err != nil {
			d.fail(w, r, err)
			return
		}
		v, err := fn(r.Context(), r.PathValue(param), req)
		d.answer(w, r, v, err)
	}
}

// grant is call for a grant: when its answer cannot be written, the grant
// is given back.
func grant[Req, G any](d *Daemon, param string, fn func(ctx context.Context, name string, req Req) (G, func(), error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Req
		if err := httpapi.Decode(w, r, &req); err != nil {
			d.fail(w, r, err)
			return
		}
		g, giveBack, err := fn(r.Context(), r.PathValue(param), req)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		if err := httpapi.WriteJSON(w, http.StatusOK, g); err != nil && giveBack != nil {
			giveBack()
		}
	}
}

// end answers 204 once fn ended what the path names.
func end(d *Daemon, fn func(r *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := fn(r); err != nil {
			d.fail(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
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
