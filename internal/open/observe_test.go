package open

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/internal/poolstest"
	"github.com/rpdhq/rpd/runtime/pools"
)

type batchPools struct{ pools.MemoryStore }

func (b *batchPools) DeleteLeases(ctx context.Context, ids []string) error {
	for _, id := range ids {
		_ = b.DeleteLease(ctx, id)
	}
	return nil
}

// memGrants keeps no records: the test counts calls.
type memGrants struct{}

func (memGrants) PutGrant(context.Context, string, []byte) error        { return nil }
func (memGrants) DeleteGrant(context.Context, string) error             { return nil }
func (memGrants) LoadGrants(context.Context) (map[string][]byte, error) { return nil, nil }

type batchGrants struct{ memGrants }

func (b batchGrants) DeleteGrants(ctx context.Context, ids []string) error {
	for _, id := range ids {
		_ = b.DeleteGrant(ctx, id)
	}
	return nil
}

// A batch of deletes is one observation when the store deletes it in one
// call, and one per delete when the store has no batch delete.
func TestObservedBatchDeletes(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var ops []string
	fn := func(op string, _ time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		ops = append(ops, fmt.Sprint(op, " ", err))
	}
	ids := []string{"a", "b", "c"}
	for _, tc := range []struct {
		name string
		del  func() error
		want []string
	}{
		{"batch pools", func() error { return pools.DeleteLeases(ctx, observedPools{&batchPools{}, fn}, ids) }, []string{"pools.delete_leases <nil>"}},
		{"plain pools", func() error { return pools.DeleteLeases(ctx, observedPools{&pools.MemoryStore{}, fn}, ids) }, slices.Repeat([]string{"pools.delete_lease <nil>"}, 3)},
		{"batch grants", func() error { return backend.DeleteGrants(ctx, observedGrants{batchGrants{memGrants{}}, fn}, ids) }, []string{"grants.delete_batch <nil>"}},
		{"plain grants", func() error { return backend.DeleteGrants(ctx, observedGrants{memGrants{}, fn}, ids) }, slices.Repeat([]string{"grants.delete <nil>"}, 3)},
	} {
		ops = nil
		if err := tc.del(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(ops, tc.want) {
			t.Errorf("%s: observed %v; want %v", tc.name, ops, tc.want)
		}
	}
}

// A grant's record reaches a store that has CreateLease as one, observed
// as a put.
func TestObservedCreateLease(t *testing.T) {
	var ops []string
	fn := func(op string, _ time.Duration, err error) { ops = append(ops, fmt.Sprint(op, " ", err)) }
	inner := &poolstest.CreatingStore{}
	if err := pools.CreateLease(context.Background(), observedPools{inner, fn}, pools.LeaseRecord{LeaseID: "a"}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(inner.Created, []string{"a"}) || !slices.Equal(ops, []string{"pools.put_lease <nil>"}) {
		t.Errorf("created %v, observed %v; want [a], [pools.put_lease <nil>]", inner.Created, ops)
	}
}
