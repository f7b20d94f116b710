package pools

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// slotsNear draws a slot count that is small, near MaxSlots, or near the int
// limits.
func slotsNear(t *rapid.T, label string) int {
	return rapid.OneOf(
		rapid.IntRange(0, 8),
		rapid.IntRange(MaxSlots-8, MaxSlots+8),
		rapid.IntRange(math.MaxInt-8, math.MaxInt),
		rapid.IntRange(math.MinInt, math.MinInt+8),
	).Draw(t, label)
}

// TestPropertyNoOverflowNearLimits acquires, releases, resizes and restores
// with slot counts near the int limits, and checks with exact arithmetic
// that Used is the sum of the held leases, Available is max(0, total -
// used), and an Acquire is granted exactly when it fits.
func TestPropertyNoOverflowNearLimits(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		store := &MemoryStore{}
		m := newTestManager(t, Options{Store: store})
		const pool = "big"
		total := rapid.OneOf(rapid.IntRange(1, 8), rapid.IntRange(MaxSlots-8, MaxSlots)).Draw(t, "total")
		if err := m.ConfigurePool(PoolConfig{Name: pool, Slots: total}); err != nil {
			t.Fatal(err)
		}
		var held []*Lease
		restored := 0
		check := func(what string) {
			st, err := m.PoolStatus(pool)
			if err != nil {
				t.Fatal(err)
			}
			used := new(big.Int)
			for _, l := range held {
				used.Add(used, big.NewInt(int64(l.Slots())))
			}
			if big.NewInt(int64(st.Used)).Cmp(used) != 0 {
				t.Fatalf("after %s: used %d, held leases sum to %v", what, st.Used, used)
			}
			avail := new(big.Int).Sub(big.NewInt(int64(st.Total)), used)
			if avail.Sign() < 0 {
				avail.SetInt64(0)
			}
			if big.NewInt(int64(st.Available)).Cmp(avail) != 0 || st.QueuedSlots != 0 || st.Queued != 0 {
				t.Fatalf("after %s: %+v, want available %v and an empty queue", what, st, avail)
			}
		}
		t.Repeat(map[string]func(*rapid.T){
			"acquire": func(t *rapid.T) {
				slots := slotsNear(t, "slots")
				before, _ := m.PoolStatus(pool)
				l, err := m.Acquire(context.Background(), pool, Request{TaskID: "t", Slots: slots, Timeout: time.Nanosecond})
				want := max(slots, 1) // 0 means 1
				fits := slots >= 0 && want <= before.Total && big.NewInt(int64(before.Used)+int64(want)).Cmp(big.NewInt(int64(before.Total))) <= 0
				switch {
				case err == nil && !fits:
					t.Fatalf("granted %d slot(s) with %d of %d used", slots, before.Used, before.Total)
				case err != nil && fits:
					t.Fatalf("refused %d slot(s) with %d of %d used: %v", slots, before.Used, before.Total, err)
				case err != nil && !errors.Is(err, ErrTimeout) && !errors.Is(err, ErrExceedsCapacity) && !errors.Is(err, ErrInvalidRequest):
					t.Fatalf("Acquire(%d): %v", slots, err)
				case err == nil:
					held = append(held, l)
				}
				check("acquire")
			},
			"release": func(t *rapid.T) {
				if len(held) == 0 {
					t.Skip("nothing held")
				}
				i := rapid.IntRange(0, len(held)-1).Draw(t, "i")
				if err := held[i].Release(); err != nil {
					t.Fatal(err)
				}
				held = append(held[:i], held[i+1:]...)
				check("release")
			},
			"resize": func(t *rapid.T) {
				slots := slotsNear(t, "slots")
				err := m.UpdatePool(pool, slots)
				if (slots >= 1 && slots <= MaxSlots) != (err == nil) {
					t.Fatalf("UpdatePool(%d): %v", slots, err)
				}
				check("resize")
			},
			"restore": func(t *rapid.T) {
				slots := slotsNear(t, "slots")
				restored++
				id := fmt.Sprintf("%s/restored-%d", pool, restored)
				if err := store.PutLease(context.Background(), LeaseRecord{LeaseID: id, Pool: pool, TaskID: "r", Slots: slots}); err != nil {
					t.Fatal(err)
				}
				rep, err := m.Restore(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if rep.Restored == 1 {
					l, err := m.Lease(id)
					if err != nil {
						t.Fatal(err)
					}
					held = append(held, l)
				} else if slots >= 1 && slots <= MaxSlots {
					t.Fatalf("a record of %d slot(s) was not restored: %+v", slots, rep)
				}
				_ = store.DeleteLease(context.Background(), id) // orphaned records stay out of later rounds
				check("restore")
			},
		})
	})
}
