package watch

import "time"

// debouncer coalesces a burst of events into one trigger: it fires once
// quiet has passed without an event, or max after the burst's first event,
// whichever comes first, so a file rewritten in a loop still reloads at
// least every max.
type debouncer struct {
	quiet, max  time.Duration
	first, last time.Time
	pending     bool
}

// event records an event at now.
func (d *debouncer) event(now time.Time) {
	if !d.pending {
		d.first, d.pending = now, true
	}
	d.last = now
}

// deadline is when the pending burst fires; ok is false when none is pending.
func (d *debouncer) deadline() (t time.Time, ok bool) {
	if !d.pending {
		return time.Time{}, false
	}
	t = d.last.Add(d.quiet)
	if cap := d.first.Add(d.max); cap.Before(t) {
		t = cap
	}
	return t, true
}

// fire ends the pending burst.
func (d *debouncer) fire() { d.pending = false }
