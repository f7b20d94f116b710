package gcfloor

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	for _, tc := range []struct {
		base        int
		floor, live uint64
		want        int
	}{
		{400, 64 << 20, 4 << 20, 1500},   // goal 4 MiB * 16 = the floor
		{400, 64 << 20, 16 << 20, 400},   // 16 MiB * 5 = 80 MiB: above it already
		{400, 64 << 20, 13 << 20, 400},   // 13 * 5 = 65 MiB
		{400, 64 << 20, 12 << 20, 433},   // 12 * 5.33 = the floor
		{400, 64 << 20, 100 << 20, 400},  // live above the floor
		{400, 64 << 20, 0, 400},          // nothing measured yet
		{100, 64 << 20, 64<<20 - 1, 100}, // just under: base wins
	} {
		if got := Percent(tc.base, tc.floor, tc.live); got != tc.want {
			t.Errorf("Percent(%d, %d, %d) = %d, want %d", tc.base, tc.floor, tc.live, got, tc.want)
		}
	}
}

// After a collection the tuner raises GOGC for this test's small live
// heap; Stop puts back what it found.
func TestTunerRaisesGOGCAfterACollection(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	tu := Start(400, 1<<40) // a floor no live heap reaches
	if got := currentGOGC(); got != 400 {
		t.Fatalf("GOGC after Start = %d, want the base 400", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for tu.Percent() == 400 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	p := tu.Percent()
	if p <= 400 {
		t.Fatalf("GOGC still %d after collections; want it raised toward the floor", p)
	}
	if got := currentGOGC(); got != p {
		t.Fatalf("runtime GOGC %d, tuner says %d", got, p)
	}
	tu.Stop()
	tu.Stop() // idempotent
	if got := currentGOGC(); got != 100 {
		t.Fatalf("GOGC after Stop = %d, want the 100 Start found", got)
	}
	runtime.GC()
	time.Sleep(20 * time.Millisecond)
	if got := currentGOGC(); got != 100 {
		t.Fatalf("GOGC changed to %d after Stop", got)
	}
}

func currentGOGC() int {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}
