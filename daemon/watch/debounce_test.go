package watch

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestDebouncer(t *testing.T) {
	t0 := time.Unix(1000, 0)
	d := debouncer{quiet: 100 * time.Millisecond, max: time.Second}
	if _, ok := d.deadline(); ok {
		t.Fatal("a fresh debouncer has a deadline")
	}
	d.event(t0)
	if got, _ := d.deadline(); !got.Equal(t0.Add(100 * time.Millisecond)) {
		t.Fatalf("deadline after one event = %v, want +100ms", got.Sub(t0))
	}
	d.event(t0.Add(50 * time.Millisecond))
	if got, _ := d.deadline(); !got.Equal(t0.Add(150 * time.Millisecond)) {
		t.Fatalf("deadline after a second event = %v, want +150ms", got.Sub(t0))
	}
	d.event(t0.Add(950 * time.Millisecond))
	if got, _ := d.deadline(); !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("deadline late in a burst = %v, want the 1s cap", got.Sub(t0))
	}
	d.fire()
	if _, ok := d.deadline(); ok {
		t.Fatal("a fired debouncer still has a deadline")
	}
	d.event(t0.Add(2 * time.Second))
	if got, _ := d.deadline(); !got.Equal(t0.Add(2100 * time.Millisecond)) {
		t.Fatalf("a new burst's deadline = %v, want +2.1s", got.Sub(t0))
	}
}

// The deadline is never later than quiet after the last event nor max
// after the burst's first event; a burst whose deadline has passed fires,
// and the next event starts a new one.
func TestDebouncerProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		quiet := time.Duration(rapid.IntRange(1, 500).Draw(t, "quiet")) * time.Millisecond
		max := time.Duration(rapid.IntRange(1, 2000).Draw(t, "max")) * time.Millisecond
		d := debouncer{quiet: quiet, max: max}
		now := time.Unix(0, 0)
		var first time.Time
		pending := false
		for _, g := range rapid.SliceOfN(rapid.IntRange(0, 300), 1, 50).Draw(t, "gaps") {
			now = now.Add(time.Duration(g) * time.Millisecond)
			if dl, ok := d.deadline(); ok && !dl.After(now) {
				d.fire() // the timer would have fired before this event
				pending = false
			}
			if !pending {
				first, pending = now, true
			}
			d.event(now)
			dl, ok := d.deadline()
			if !ok {
				t.Fatal("no deadline after an event")
			}
			if dl.After(now.Add(quiet)) || dl.After(first.Add(max)) {
				t.Fatalf("deadline %v beyond quiet/max bounds (now %v, first %v)", dl, now, first)
			}
			if dl.Before(now) {
				t.Fatalf("deadline %v before the event at %v that extended the burst", dl, now)
			}
		}
	})
}
