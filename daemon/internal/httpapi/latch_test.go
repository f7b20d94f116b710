package httpapi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRequestLatchSerialisesOneKey(t *testing.T) {
	var rl RequestLatch
	ctx := context.Background()
	a, err := rl.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	other, err := rl.Lock(ctx, "other") // another key does not wait
	if err != nil {
		t.Fatal(err)
	}
	other.Unlock()
	got := make(chan Held)
	go func() {
		b, err := rl.Lock(ctx, "k")
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	select {
	case <-got:
		t.Fatal("a second request with the same key got it while the first held it")
	case <-time.After(50 * time.Millisecond):
	}
	a.Unlock()
	select {
	case b := <-got:
		b.Unlock()
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting request did not get the key after Unlock")
	}
}

func TestRequestLatchWaiterGivesUp(t *testing.T) {
	var rl RequestLatch
	a, _ := rl.Lock(context.Background(), "k")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := rl.Lock(ctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with an ended ctx: %v, want DeadlineExceeded", err)
	}
	a.Unlock()
	var zero Held
	zero.Unlock() // holds nothing: no effect
	b, err := rl.Lock(context.Background(), "k")
	if err != nil {
		t.Fatalf("Lock after the holder left: %v", err)
	}
	b.Unlock()
}

// TestRequestLatchStress: many requests on few keys, some giving up; at
// most one holds a key at any time, and every key ends free.
func TestRequestLatchStress(t *testing.T) {
	var rl RequestLatch
	const keys, workers, rounds = 4, 16, 300
	var inUse [keys]atomic.Int32
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				k := (w + i) % keys
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%3)*time.Millisecond+time.Millisecond)
				h, err := rl.Lock(ctx, fmt.Sprint(k))
				cancel()
				if err != nil {
					continue // gave up waiting
				}
				if n := inUse[k].Add(1); n != 1 {
					t.Errorf("key %d held %d times at once", k, n)
				}
				time.Sleep(time.Duration(i%2) * 100 * time.Microsecond)
				inUse[k].Add(-1)
				h.Unlock()
			}
		}()
	}
	wg.Wait()
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if len(rl.inflight) != 0 {
		t.Fatalf("%d keys still held after every request left", len(rl.inflight))
	}
}

func TestRequestLatchReusesEntries(t *testing.T) {
	var rl RequestLatch
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		h, err := rl.Lock(ctx, "pool/db/r1")
		if err != nil {
			t.Fatal(err)
		}
		h.Unlock()
	})
	if allocs != 0 {
		t.Fatalf("Lock+Unlock of a key nobody waits for: %v allocations, want 0", allocs)
	}
}
