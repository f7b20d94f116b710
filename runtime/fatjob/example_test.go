package fatjob_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/rpdhq/rpd/runtime/fatjob"
)

func Example() {
	pool, err := fatjob.New(fatjob.Config{
		ScanRingBytes:   200 << 20,
		DeltaCacheBytes: 400 << 20,
		SpillSlots:      fatjob.LimitedSpill(8),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	req, err := fatjob.GitRepo(50, 100, true) // MiB
	if err != nil {
		fmt.Println(err)
		return
	}
	perm, ok := pool.TryAcquire(req)
	if !ok {
		fmt.Println("pool full: re-enqueue the job with backoff")
		return
	}
	defer perm.Release()

	fmt.Println("holding", perm.TotalBytes()>>20, "MiB, may spill:", perm.CanSpill(), "limited:", perm.SpillIsLimited())
	fmt.Println("scan ring left:", pool.ScanRingAvailable()>>20, "MiB")
	slots, limited := pool.SpillSlotsAvailable()
	fmt.Println("spill slots left:", slots, limited)
	// Output:
	// holding 150 MiB, may spill: true limited: true
	// scan ring left: 150 MiB
	// spill slots left: 7 true
}

func ExamplePool_Acquire() {
	pool, _ := fatjob.New(fatjob.Config{ScanRingBytes: 100, DeltaCacheBytes: 100})

	// A request larger than the whole pool fails at once instead of waiting forever.
	_, err := pool.Acquire(context.Background(), fatjob.Archive(101, false))
	fmt.Println(errors.Is(err, fatjob.ErrExceedsCapacity))

	held, _ := pool.TryAcquire(fatjob.Archive(80, false))
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error)
	go func() {
		perm, err := pool.Acquire(ctx, fatjob.Archive(50, true)) // waits: only 20 free
		perm.Release()                                           // nil-safe
		result <- err
	}()
	cancel()
	fmt.Println(<-result)
	held.Release()
	fmt.Println(pool.ScanRingAvailable(), pool.Stats().Cancelled)
	// Output:
	// true
	// context canceled
	// 100 1
}

func ExamplePool_Reconfigure() {
	pool, _ := fatjob.New(fatjob.DefaultConfig())
	perm, _ := pool.TryAcquire(fatjob.Archive(200<<20, false))

	// Shrink below what is held: nothing is revoked, nothing new fits.
	smaller := fatjob.DefaultConfig()
	smaller.ScanRingBytes = 100 << 20
	if err := pool.Reconfigure(smaller); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(pool.ScanRingAvailable(), pool.Stats().ScanRingInUse>>20)

	perm.Release()
	fmt.Println(pool.ScanRingAvailable() >> 20)

	smaller.SpillSlots = fatjob.LimitedSpill(0)
	fmt.Println(pool.Reconfigure(smaller))
	// Output:
	// 0 200
	// 100
	// fatjob: invalid config: 0 spill slots; use 1..16384, or nil for unlimited spilling
}
