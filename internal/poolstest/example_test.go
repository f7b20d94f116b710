package poolstest_test

import (
	"context"
	"fmt"

	"github.com/rpdhq/rpd/internal/poolstest"
	"github.com/rpdhq/rpd/runtime/pools"
)

func ExampleCreatingStore() {
	s := &poolstest.CreatingStore{}
	ctx := context.Background()
	_ = pools.CreateLease(ctx, s, pools.LeaseRecord{LeaseID: "l1", Pool: "p"})
	_ = s.PutLease(ctx, pools.LeaseRecord{LeaseID: "l2", Pool: "p"})
	recs, _ := s.LoadLeases(ctx)
	fmt.Println(s.Created, len(recs))
	// Output: [l1] 2
}
