package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/client"
)

// Acquire a pool slot, heartbeat it, and release it. The stand-in server
// here plays the daemon; point New at "127.0.0.1:7070" for a real one.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "POST" && r.URL.Path == "/v1/pools/db/acquire":
			_ = json.NewEncoder(w).Encode(api.Lease{LeaseID: "db.0a1b-1", Kind: api.KindPool, Pool: "db", Slots: 1, TTLSeconds: 60})
		case r.Method == "POST" && r.URL.Path == "/v1/leases/db.0a1b-1/heartbeat":
			_ = json.NewEncoder(w).Encode(api.Lease{LeaseID: "db.0a1b-1", Kind: api.KindPool, Pool: "db", Slots: 1, TTLSeconds: 60})
		case r.Method == "DELETE" && r.URL.Path == "/v1/leases/db.0a1b-1":
			w.WriteHeader(http.StatusNoContent)
		default:
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: api.Error{Code: api.CodeNotFound, Message: "no such route"}})
		}
	}))
	defer srv.Close()

	ctx := context.Background()
	c, _ := client.New(srv.URL)
	lease, err := c.Acquire(ctx, "db", api.AcquireRequest{TaskID: "nightly-migration", WaitSeconds: 30})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("holding", lease.Slots, "slot of", lease.Pool, "as", lease.LeaseID)
	if _, err := c.Heartbeat(ctx, lease.LeaseID); err != nil {
		fmt.Println(err)
	}
	fmt.Println("release:", c.Release(ctx, lease.LeaseID))
	_, err = c.Acquire(ctx, "nope", api.AcquireRequest{})
	fmt.Println(client.IsCode(err, api.CodeNotFound))
	// Output:
	// holding 1 slot of db as db.0a1b-1
	// release: <nil>
	// true
}
