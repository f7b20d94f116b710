package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/rpdhq/rpd/api"
)

// LeaseFilter selects grants in Leases; empty fields match everything. At
// most one of Pool, Budget and Ceiling may be set, and it implies Kind.
type LeaseFilter struct {
	Kind    string // api.KindPool, api.KindPermit or api.KindClaim
	Pool    string
	Budget  string
	Ceiling string
	// TaskID matches a pool lease's task ID or a claim's worker ID.
	TaskID string
}

func (f LeaseFilter) query() string {
	q := url.Values{}
	for k, v := range map[string]string{"kind": f.Kind, "pool": f.Pool, "budget": f.Budget, "ceiling": f.Ceiling, "task_id": f.TaskID} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// Leases is GET /v1/leases: every pool lease, budget permit and VM-ceiling
// claim the daemon counts, with its holder.
func (c *Client) Leases(ctx context.Context, f LeaseFilter) ([]api.Grant, error) {
	var l api.GrantList
	err := c.do(ctx, http.MethodGet, "/v1/leases"+f.query(), nil, &l)
	return l.Leases, err
}

// Classes is GET /v1/classes: every runner class's queue depth, instances
// by state and pickup events.
func (c *Client) Classes(ctx context.Context) ([]api.ClassDetail, error) {
	var l api.ClassList
	err := c.do(ctx, http.MethodGet, "/v1/classes", nil, &l)
	return l.Classes, err
}

// Class is GET /v1/classes/{class}.
func (c *Client) Class(ctx context.Context, class string) (api.ClassDetail, error) {
	var d api.ClassDetail
	err := c.do(ctx, http.MethodGet, "/v1/classes/"+seg(class), nil, &d)
	return d, err
}

// Instances is GET /v1/classes/{class}/instances: the class's instances in
// state ("idle", "claimed", "retired"; "" for all), ordered by ID.
func (c *Client) Instances(ctx context.Context, class, state string) ([]api.Instance, error) {
	path := "/v1/classes/" + seg(class) + "/instances"
	if state != "" {
		path += "?" + url.Values{"state": {state}}.Encode()
	}
	var l api.InstanceList
	err := c.do(ctx, http.MethodGet, path, nil, &l)
	return l.Instances, err
}

// Instance is GET /v1/instances/{id}.
func (c *Client) Instance(ctx context.Context, id string) (api.Instance, error) {
	var in api.Instance
	err := c.do(ctx, http.MethodGet, "/v1/instances/"+seg(id), nil, &in)
	return in, err
}
