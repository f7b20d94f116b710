package leader

import (
	"slices"
	"testing"
)

// The fenced store is made once per epoch: again after a takeover, never
// reused across epochs.
func TestFencedStoreFollowsTheEpoch(t *testing.T) {
	var made []int64
	f := NewFenced(func(epoch int64) *int64 {
		made = append(made, epoch)
		return &epoch
	})
	for _, epoch := range []int64{3, 3, 3, 4, 4, 3} {
		if got := f.at(epoch); *got != epoch {
			t.Fatalf("at(%d) = a store fenced at %d", epoch, *got)
		}
	}
	if want := []int64{3, 4, 3}; !slices.Equal(made, want) {
		t.Fatalf("stores made for epochs %v; want %v", made, want)
	}
}
