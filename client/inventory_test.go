package client_test

import (
	"context"
	"testing"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/client"
)

func TestInventoryRequests(t *testing.T) {
	ctx := context.Background()
	c, req := fake(t, 200, `{"leases":[{"kind":"pool","id":"db.x-1","component":"db","task_id":"t/1","expires_at":null}]}`)
	got, err := c.Leases(ctx, client.LeaseFilter{Pool: "db", TaskID: "t/1"})
	if err != nil || len(got) != 1 || got[0].TaskID != "t/1" || got[0].ExpiresAt != nil {
		t.Fatalf("Leases = %+v, %v", got, err)
	}
	if req.Method != "GET" || req.URL.Path != "/v1/leases" || req.URL.RawQuery != "pool=db&task_id=t%2F1" {
		t.Errorf("Leases sent %s %s?%s", req.Method, req.URL.Path, req.URL.RawQuery)
	}
	if _, err := c.Leases(ctx, client.LeaseFilter{}); err != nil || req.URL.RawQuery != "" {
		t.Errorf("an empty filter sent ?%s (%v)", req.URL.RawQuery, err)
	}

	c, req = fake(t, 200, `{"instances":[{"instance_id":"i-1","state":"claimed","owner":"w"}]}`)
	insts, err := c.Instances(ctx, "med ium", "claimed")
	if err != nil || len(insts) != 1 || insts[0].Owner != "w" {
		t.Fatalf("Instances = %+v, %v", insts, err)
	}
	if req.URL.EscapedPath() != "/v1/classes/med%20ium/instances" || req.URL.RawQuery != "state=claimed" {
		t.Errorf("Instances sent %s?%s", req.URL.EscapedPath(), req.URL.RawQuery)
	}

	c, req = fake(t, 200, `{"classes":[{"name":"m","depth":{"visible":2,"in_flight":1,"delayed":0},"instances":{"idle":2,"claimed":1,"retired":0}}]}`)
	cls, err := c.Classes(ctx)
	if err != nil || len(cls) != 1 || cls[0].Depth != (api.QueueDepth{Visible: 2, InFlight: 1}) || cls[0].Instances.Claimed != 1 {
		t.Fatalf("Classes = %+v, %v", cls, err)
	}
	if req.URL.Path != "/v1/classes" {
		t.Errorf("Classes sent %s", req.URL.Path)
	}

	c, _ = fake(t, 404, `{"error":{"code":"not_found","message":"no instance"}}`)
	if _, err := c.Instance(ctx, "i-9"); !client.IsCode(err, api.CodeNotFound) {
		t.Errorf("Instance of a missing one = %v, want not_found", err)
	}
	if _, err := c.Class(ctx, "nope"); !client.IsCode(err, api.CodeNotFound) {
		t.Errorf("Class of a missing one = %v, want not_found", err)
	}
}
