// Package gcfloor keeps the garbage collector's heap goal from falling
// below a floor while the live heap is small: after each collection it
// sets GOGC (runtime/debug.SetGCPercent) to the larger of a base percent
// and the one at which the next collection starts when the heap reaches
// the floor. A daemon whose live heap is a few MB and whose every request
// allocates then collects every floor's worth of allocation instead of
// every few MB, and a large live heap is collected at the base percent as
// before. It is the GOGC tuner of services that trade a bounded amount of
// memory for fewer collections (each one's assists and pauses land in the
// latency tail).
package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Tuner is a running floor; Stop ends it.
type Tuner struct {
	base  int
	floor uint64

	mu      sync.Mutex
	stopped bool
	percent int // the GOGC it set last
	prev    int // GOGC before Start
	sample  []metrics.Sample
}

// Start sets GOGC to base and then, after every collection, to
// max(base, floor/live - 1 in percent). base must be positive.
func Start(base int, floor uint64) *Tuner {
	t := &Tuner{base: base, floor: floor, percent: base,
		sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	t.prev = debug.SetGCPercent(base)
	t.arm()
	return t
}

// Percent is the GOGC the tuner set last.
func (t *Tuner) Percent() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.percent
}

// Stop ends the tuning and restores the GOGC Start found.
func (t *Tuner) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	t.stopped = true
	debug.SetGCPercent(t.prev)
}

// sentinel is garbage whose finalizer runs after the collection that found
// it unreachable: the tuner's hook into each cycle.
type sentinel struct {
	_ *byte // a pointer: never in the tiny allocator, whose objects may not be finalized
	_ [8]byte
}

// arm leaves a sentinel for the next collection.
func (t *Tuner) arm() {
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) { t.collected() })
}

// collected runs on the finalizer goroutine after a collection.
func (t *Tuner) collected() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	metrics.Read(t.sample)
	if p := Percent(t.base, t.floor, t.sample[0].Value.Uint64()); p != t.percent {
		debug.SetGCPercent(p)
		t.percent = p
	}
	t.arm()
}

// Percent is the GOGC for a live heap of live bytes: base, or more when
// the heap goal live*(1+GOGC/100) would be below floor.
func Percent(base int, floor, live uint64) int {
	if live == 0 || live >= floor {
		return base
	}
	return max(base, int(floor*100/live)-100)
}
