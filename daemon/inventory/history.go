package inventory

import (
	"sync"
	"time"

	"github.com/rpdhq/rpd/api"
)

// pickupHistory keeps, per class, samples of its cumulative pickup
// counters at least historyStep apart and at most historyWindow old.
type pickupHistory struct {
	mu      sync.Mutex
	byClass map[string][]outcomeSample // oldest first
}

type outcomeSample struct {
	at     time.Time
	counts map[string]int64
}

func (h *pickupHistory) observe(now time.Time, class string, counts map[string]int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.observeLocked(now, class, counts)
}

func (h *pickupHistory) observeLocked(now time.Time, class string, counts map[string]int64) {
	if h.byClass == nil {
		h.byClass = map[string][]outcomeSample{}
	}
	s := h.byClass[class]
	if n := len(s); n > 0 {
		if decreased(s[n-1].counts, counts) {
			s = nil // a new pickup manager (the class's queue changed): its counters start over
		} else if now.Sub(s[n-1].at) < historyStep {
			return
		}
	}
	s = append(s, outcomeSample{at: now, counts: counts})
	for len(s) > 1 && now.Sub(s[0].at) > historyWindow {
		s = s[1:]
	}
	h.byClass[class] = s
}

// recent reports the events since the oldest sample of class (counts are
// its counters now), recording counts as a sample when one is due.
func (h *pickupHistory) recent(now time.Time, class string, counts map[string]int64) api.RecentPickups {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.observeLocked(now, class, counts)
	base := h.byClass[class][0]
	out := api.RecentPickups{WindowSeconds: now.Sub(base.at).Seconds(), Events: make(map[string]int64, len(counts))}
	for k, n := range counts {
		out.Events[k] = n - base.counts[k]
	}
	return out
}

// start records a new manager's counters: its figures begin here.
func (h *pickupHistory) start(now time.Time, class string, counts map[string]int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byClass == nil {
		h.byClass = map[string][]outcomeSample{}
	}
	h.byClass[class] = []outcomeSample{{at: now, counts: counts}}
}

func (h *pickupHistory) forget(class string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.byClass, class)
}

func decreased(before, after map[string]int64) bool {
	for k, n := range before {
		if after[k] < n {
			return true
		}
	}
	return false
}

// Recent pickup events are the difference between the counters now and
// the oldest sample inside historyWindow.
const (
	historyStep   = 10 * time.Second
	historyWindow = 5 * time.Minute
)
