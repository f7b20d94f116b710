package pickup

import (
	"context"
	"sync"
	"time"
)

// Holding misfits (docs/pickup.md, "No false exhaustion").
//
// The seed gives every misfit back with the re-queue delay, so a request of
// one kind hides, for that long, the runners another kind of request is
// looking for: with two kinds of requests most of the queue is hidden at
// any time and both are told "exhausted" while their runners are idle. The
// manager instead keeps received misfits in flight, under the visibility
// timeout they were received with, in a bounded list, and offers them to
// every request that joins before it asks the queue. A held misfit is given
// back visible at once (never with the delay) when the list is full (the
// oldest first), when it has been held for half its visibility timeout, or
// when GiveBack is called; if the process dies, the visibility timeout
// returns it. So a held runner is never hidden from a request of this
// manager, and hidden from other consumers of the queue for at most
// Visibility/2 (and 15 s).

// held is a misfit kept received for later requests.
type held struct {
	msg   Message
	entry Entry
	until time.Time // given back by then
}

// minTidy is the shortest delay of the hold timer.
const minTidy = 10 * time.Millisecond

// takeHeldLocked removes and returns the oldest held misfit that meets req.
func (m *Manager) takeHeldLocked(req Requirements) (held, bool) {
	for i, h := range m.held {
		if req.Matches(h.entry) {
			m.held = append(m.held[:i], m.held[i+1:]...)
			return h, true
		}
	}
	return held{}, false
}

// holdLocked keeps msg (a valid entry e that meets no waiting request) for
// later requests. It returns the messages to give back at once (the oldest
// held ones, when bounded and the list is over cfg.HoldMisfits) and the
// ones to delete: a second message of an instance already held is a
// duplicate, and the older of the two goes.
func (m *Manager) holdLocked(cfg *Config, msg Message, e Entry, now time.Time, bounded bool) (giveBack, drop []Message) {
	h := held{msg: msg, entry: e, until: now.Add(cfg.holdFor())}
	for i := range m.held {
		if m.held[i].entry.InstanceID != e.InstanceID {
			continue
		}
		// The same message again (its visibility ran out while held: the
		// old handle is stale), or a duplicate.
		if m.held[i].msg.ID != msg.ID {
			m.stats.duplicates.Add(1)
			drop = append(drop, m.held[i].msg)
		}
		m.held[i] = h
		return nil, drop
	}
	m.held = append(m.held, h)
	if bounded {
		giveBack = m.trimHeldLocked(cfg.HoldMisfits)
	}
	m.armLocked()
	return giveBack, nil
}

// trimHeldLocked removes the oldest held misfits beyond limit and returns
// their messages, to be given back at once.
func (m *Manager) trimHeldLocked(limit int) []Message {
	n := len(m.held) - limit
	if n <= 0 {
		return nil
	}
	out := make([]Message, n)
	for i := range n {
		out[i] = m.held[i].msg
	}
	m.held = append(m.held[:0], m.held[n:]...)
	m.stats.returned.Add(uint64(n))
	return out
}

// expireHeldLocked removes the misfits held until now or earlier and
// returns their messages, to be given back at once.
func (m *Manager) expireHeldLocked(now time.Time) []Message {
	out := m.removeHeldLocked(func(h held) bool { return !h.until.After(now) })
	m.stats.returned.Add(uint64(len(out)))
	return out
}

// removeHeldLocked removes the held misfits drop selects and returns their
// messages.
func (m *Manager) removeHeldLocked(drop func(held) bool) []Message {
	var out []Message
	kept := m.held[:0]
	for _, h := range m.held {
		if drop(h) {
			out = append(out, h.msg)
		} else {
			kept = append(kept, h)
		}
	}
	clear(m.held[len(kept):])
	m.held = kept
	return out
}

// giveBackUnlock unlocks m.mu (held by the caller) and makes msgs visible
// again at once, counted in returning meanwhile.
func (m *Manager) giveBackUnlock(ctx context.Context, msgs []Message) {
	m.returning.add()
	m.mu.Unlock()
	defer m.returning.done()
	m.settle(ctx, m.config(), msgs, false)
}

// armLocked starts the hold timer when something is held and it is not
// running: while requests come, rounds give back what was held too long;
// the timer does it when none come.
func (m *Manager) armLocked() {
	if m.holdTimer != nil || len(m.held) == 0 {
		return
	}
	oldest := m.held[0].until
	for _, h := range m.held[1:] {
		if h.until.Before(oldest) {
			oldest = h.until
		}
	}
	m.holdTimer = time.AfterFunc(max(oldest.Sub(m.clock.Now()), minTidy), m.tidy)
}

// tidy gives back the misfits held too long, and re-arms the timer.
func (m *Manager) tidy() {
	m.mu.Lock()
	m.holdTimer = nil
	out := m.expireHeldLocked(m.clock.Now())
	m.armLocked()
	m.giveBackUnlock(context.Background(), out)
}

// GiveBack returns every held misfit to the queue at once, visible to any
// consumer. Call it when the manager will serve no more requests (the
// daemon stops, or drops the class); the manager stays usable. A process
// that dies instead loses nothing: the messages come back when their
// visibility timeout runs out.
func (m *Manager) GiveBack(ctx context.Context) {
	m.mu.Lock()
	if m.holdTimer != nil {
		m.holdTimer.Stop()
		m.holdTimer = nil
	}
	m.giveBackUnlock(ctx, m.trimHeldLocked(0))
}

// Held is the number of misfits held right now.
func (m *Manager) Held() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.held)
}

// inflight counts operations that make messages invisible without holding
// them (give-backs on their way, scan receives): wait returns once none is
// in progress.
type inflight struct {
	mu   sync.Mutex
	n    int
	zero chan struct{}
}

func (f *inflight) add() {
	f.mu.Lock()
	if f.n == 0 {
		f.zero = make(chan struct{})
	}
	f.n++
	f.mu.Unlock()
}

func (f *inflight) done() {
	f.mu.Lock()
	f.n--
	if f.n == 0 {
		close(f.zero)
	}
	f.mu.Unlock()
}

func (f *inflight) wait(ctx context.Context) {
	f.mu.Lock()
	if f.n == 0 {
		f.mu.Unlock()
		return
	}
	zero := f.zero
	f.mu.Unlock()
	select {
	case <-zero:
	case <-ctx.Done():
	}
}
