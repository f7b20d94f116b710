package fatjob

import "time"

// Stats is a snapshot of a pool's counters (monotonic since New) and gauges
// (current values), for export as metrics.
type Stats struct {
	// Granted counts permits granted by TryAcquire, Acquire and Restore; a
	// grant that raced a cancellation and was handed back does not count.
	Granted uint64
	// Denied counts TryAcquire calls that returned false and Acquire calls
	// that failed with ErrExceedsCapacity (at the call or after a shrink)
	// or ErrQueueFull.
	Denied uint64
	// Waited counts Acquire calls granted after waiting in the queue, and
	// WaitTime is the total time they waited.
	Waited   uint64
	WaitTime time.Duration
	// Cancelled counts Acquire calls that returned a context error.
	Cancelled uint64

	// In use now. After a shrink these may exceed the totals until enough
	// is released. SpillSlotsInUse counts counted slots only: permits with
	// SpillUnlimited hold none.
	ScanRingInUse   uint64
	DeltaCacheInUse uint64
	SpillSlotsInUse int
	// Queued is the number of Acquire calls waiting.
	Queued int
}

// Stats returns a snapshot of the pool's counters and gauges. The counters
// are read one by one, not as one atomic snapshot.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	s := Stats{
		ScanRingInUse:   uint64(int64(p.cfg.ScanRingBytes) - p.scan.Load()),
		DeltaCacheInUse: uint64(int64(p.cfg.DeltaCacheBytes) - p.delta.Load()),
		SpillSlotsInUse: int(p.cfg.spillTotal() - p.spillAvailable()),
		Queued:          p.queue.Len(),
	}
	p.mu.Unlock()
	s.Waited = p.waited.Load()
	// Read unclaimed first: it never exceeds the claims made before it.
	unclaimed := p.unclaimed.Load()
	s.Granted = p.claimed() - unclaimed
	s.Denied = p.denied.Load()
	s.WaitTime = time.Duration(p.waitNanos.Load())
	s.Cancelled = p.cancelled.Load()
	return s
}
