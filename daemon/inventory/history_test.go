package inventory

import (
	"testing"
	"time"
)

func TestPickupHistory(t *testing.T) {
	var h pickupHistory
	t0 := time.Unix(1_700_000_000, 0)
	h.observe(t0, "c", map[string]int64{"claimed": 1})
	h.observe(t0.Add(5*time.Second), "c", map[string]int64{"claimed": 3}) // within historyStep: not kept
	got := h.recent(t0.Add(20*time.Second), "c", map[string]int64{"claimed": 5})
	if got.WindowSeconds != 20 || got.Events["claimed"] != 4 {
		t.Errorf("recent after 20s = %+v, want 4 claims over 20s", got)
	}
	// Samples older than the window are dropped.
	for i := 1; i <= 40; i++ {
		h.observe(t0.Add(time.Duration(i)*historyStep), "c", map[string]int64{"claimed": int64(10 + i)})
	}
	now := t0.Add(40 * historyStep)
	got = h.recent(now, "c", map[string]int64{"claimed": 50})
	if got.WindowSeconds > historyWindow.Seconds() || got.WindowSeconds < historyWindow.Seconds()-historyStep.Seconds() {
		t.Errorf("window = %vs, want about %v", got.WindowSeconds, historyWindow)
	}
	// A new manager's counters start over: the history does too.
	got = h.recent(now.Add(time.Second), "c", map[string]int64{"claimed": 2})
	if got.WindowSeconds != 0 || got.Events["claimed"] != 0 {
		t.Errorf("after a reset = %+v, want an empty window", got)
	}
	// A new manager starts the class's history over.
	h.start(now.Add(2*time.Second), "c", map[string]int64{"claimed": 0})
	if got := h.recent(now.Add(12*time.Second), "c", map[string]int64{"claimed": 3}); got.WindowSeconds != 10 || got.Events["claimed"] != 3 {
		t.Errorf("after start = %+v, want 3 claims over 10s", got)
	}
	h.forget("c")
	if len(h.byClass) != 0 {
		t.Errorf("forget kept %v", h.byClass)
	}
}
