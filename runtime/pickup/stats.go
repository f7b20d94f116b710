package pickup

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Stats is a snapshot of one manager's counters since it was created.
type Stats struct {
	Class string
	// Decisions, by outcome. Passed counts pass-on decisions (handed to a
	// claim), Requeued misfits given back, Discarded unusable messages.
	Passed    uint64
	Requeued  uint64
	Discarded map[DiscardReason]uint64
	// Requests that ended exhausted.
	ExhaustedGlobal uint64
	ExhaustedLocal  uint64
	// Claims: committed, lost to someone else (stale hint dropped), retried
	// after a transient error, abandoned (message given back after the
	// retries ran out or the request was cancelled).
	Claimed       uint64
	ClaimLostRace uint64
	ClaimRetried  uint64
	ClaimGaveUp   uint64
	// Backend calls that failed and were retried or given up on.
	ReceiveErrors uint64
	ReleaseErrors uint64
	// Holding (hold.go): misfits held right now, held misfits given back
	// (bound, time, GiveBack), duplicate messages of a held instance deleted.
	Held       int
	Returned   uint64
	Duplicates uint64
	// Resumed: pickups answered with the claim their owner already held (a
	// retried request). Confirmed: Confirm calls that succeeded. Lapsed:
	// unconfirmed claims returned after Config.ClaimTTL. Reoffered: idle
	// instances without a message that Maintain published again.
	Resumed   uint64
	Confirmed uint64
	Lapsed    uint64
	Reoffered uint64
	// Latency from Pickup's start to the claim's commit.
	Latency LatencySummary
	// QueueDepth is set when Options.Depth is; DepthErr when it failed.
	QueueDepth *int
	DepthErr   error
}

// Decisions is the number of messages classified.
func (s Stats) Decisions() uint64 {
	n := s.Passed + s.Requeued
	for _, d := range s.Discarded {
		n += d
	}
	return n
}

// LatencySummary summarises the most recent pickup latencies (up to
// latencyWindow of them).
type LatencySummary struct {
	Count         uint64 // all pickups ever measured
	P50, P90, P99 time.Duration
	Max           time.Duration // of the window
}

type counters struct {
	passed, requeued                             atomic.Uint64
	discarded                                    [numReasons]atomic.Uint64
	exhaustedGlobal, exhaustedLocal              atomic.Uint64
	claimed, claimLostRace, claimRetried, gaveUp atomic.Uint64
	receiveErrors, releaseErrors                 atomic.Uint64
	returned, duplicates                         atomic.Uint64
	resumed, confirmed, claimLapsed, reoffered   atomic.Uint64
}

const latencyWindow = 1024

// latencies is a ring of the last latencyWindow samples.
type latencies struct {
	mu    sync.Mutex
	ring  [latencyWindow]time.Duration
	count uint64
}

func (l *latencies) observe(d time.Duration) {
	l.mu.Lock()
	l.ring[l.count%latencyWindow] = d
	l.count++
	l.mu.Unlock()
}

func (l *latencies) summary() LatencySummary {
	l.mu.Lock()
	n := min(l.count, latencyWindow)
	s := slices.Clone(l.ring[:n])
	count := l.count
	l.mu.Unlock()
	out := LatencySummary{Count: count}
	if n == 0 {
		return out
	}
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[int(q*float64(n-1)+0.5)] }
	out.P50, out.P90, out.P99, out.Max = at(0.5), at(0.9), at(0.99), s[n-1]
	return out
}

// Decisions returns the number of messages classified so far (Stats'
// Decisions, without the rest of the snapshot).
func (m *Manager) Decisions() uint64 {
	c := &m.stats
	n := c.passed.Load() + c.requeued.Load()
	for r := range numReasons {
		n += c.discarded[r].Load()
	}
	return n
}

// Stats returns the manager's counters; with Options.Depth set it also asks
// the backend for the queue's depth, bounded by ctx.
func (m *Manager) Stats(ctx context.Context) Stats {
	s := m.Counters()
	if m.depth != nil {
		if d, err := m.depth(ctx); err != nil {
			s.DepthErr = err
		} else {
			s.QueueDepth = &d
		}
	}
	return s
}

// Counters returns the manager's counters without asking the backend
// anything (QueueDepth stays nil): cheap enough to sample every second.
func (m *Manager) Counters() Stats {
	c := &m.stats
	s := Stats{
		Class:           m.config().Class,
		Passed:          c.passed.Load(),
		Requeued:        c.requeued.Load(),
		Discarded:       make(map[DiscardReason]uint64, numReasons),
		ExhaustedGlobal: c.exhaustedGlobal.Load(),
		ExhaustedLocal:  c.exhaustedLocal.Load(),
		Claimed:         c.claimed.Load(),
		ClaimLostRace:   c.claimLostRace.Load(),
		ClaimRetried:    c.claimRetried.Load(),
		ClaimGaveUp:     c.gaveUp.Load(),
		ReceiveErrors:   c.receiveErrors.Load(),
		ReleaseErrors:   c.releaseErrors.Load(),
		Held:            m.Held(),
		Returned:        c.returned.Load(),
		Duplicates:      c.duplicates.Load(),
		Resumed:         c.resumed.Load(),
		Confirmed:       c.confirmed.Load(),
		Lapsed:          c.claimLapsed.Load(),
		Reoffered:       c.reoffered.Load(),
		Latency:         m.lat.summary(),
	}
	for r := range numReasons {
		if n := c.discarded[r].Load(); n > 0 {
			s.Discarded[r] = n
		}
	}
	return s
}
