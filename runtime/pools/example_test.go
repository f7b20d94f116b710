package pools_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/rpdhq/rpd/runtime/pools"
)

func Example() {
	m, err := pools.NewManager(pools.Options{})
	if err != nil {
		panic(err)
	}
	if err := m.CreatePool("database_pool", 3, "at most 3 concurrent heavy queries"); err != nil {
		panic(err)
	}
	ctx := context.Background()
	lease, err := m.Acquire(ctx, "database_pool", pools.Request{TaskID: "heavy_query_1", Priority: 10, Slots: 2})
	if err != nil {
		panic(err)
	}
	st, _ := m.PoolStatus("database_pool")
	fmt.Printf("%s: total %d, used %d, available %d, queued %d\n", st.Name, st.Total, st.Used, st.Available, st.Queued)

	// Asking for more than the pool could ever give fails at once.
	_, err = m.Acquire(ctx, "database_pool", pools.Request{TaskID: "huge", Slots: 4})
	fmt.Println(errors.Is(err, pools.ErrExceedsCapacity))

	lease.Release()
	lease.Release() // idempotent
	st, _ = m.PoolStatus("database_pool")
	fmt.Printf("after release: used %d, granted %d, released %d\n", st.Used, st.Stats.Granted, st.Stats.Released)
	// Output:
	// database_pool: total 3, used 2, available 1, queued 0
	// true
	// after release: used 0, granted 1, released 1
}

func ExampleManager_UpdatePool() {
	m, _ := pools.NewManager(pools.Options{DefaultPoolSlots: 4})
	ctx := context.Background()
	lease, _ := m.Acquire(ctx, "", pools.Request{TaskID: "build", Slots: 3}) // "" is default_pool
	// Shrinking never preempts the holder; Available stays at 0 until it releases.
	if err := m.UpdatePool(pools.DefaultPool, 2); err != nil {
		panic(err)
	}
	st, _ := m.PoolStatus(pools.DefaultPool)
	fmt.Printf("total %d, used %d, available %d\n", st.Total, st.Used, st.Available)
	lease.Release()
	st, _ = m.PoolStatus(pools.DefaultPool)
	fmt.Printf("total %d, used %d, available %d\n", st.Total, st.Used, st.Available)
	// Output:
	// total 2, used 3, available 0
	// total 2, used 0, available 2
}

func ExampleManager_Restore() {
	store := &pools.MemoryStore{} // the daemon passes its SQLite or DynamoDB store
	ctx := context.Background()

	before, _ := pools.NewManager(pools.Options{Store: store})
	lease, _ := before.Acquire(ctx, "", pools.Request{TaskID: "remote-worker", Slots: 2})
	id := lease.ID()

	// The process restarts while the worker keeps running.
	after, _ := pools.NewManager(pools.Options{Store: store})
	rep, err := after.Restore(ctx)
	if err != nil {
		panic(err)
	}
	st, _ := after.PoolStatus(pools.DefaultPool)
	fmt.Printf("restored %d lease(s); used %d of %d\n", rep.Restored, st.Used, st.Total)

	// The worker releases through the daemon, by lease ID.
	l, err := after.Lease(id)
	if err != nil {
		panic(err)
	}
	fmt.Println(l.TaskID(), l.Slots())
	l.Release()
	recs, _ := store.LoadLeases(ctx)
	fmt.Println("records left:", len(recs))
	// Output:
	// restored 1 lease(s); used 2 of 16
	// remote-worker 2
	// records left: 0
}
