package pickup

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// withdrawnFor is how long the manager deletes the messages of a withdrawn
// instance on sight; a message older than that still fails its claim (the
// record is not idle) and is dropped as a stale hint.
const withdrawnFor = time.Hour

// maxWithdrawn bounds the withdrawn set: beyond it the oldest entries go
// (their messages are then dropped as stale hints instead).
const maxWithdrawn = 10000

// Withdraw takes idle instances out of the pool for good, so that no pickup
// can claim them: the conditional transition idle → to (StateTerminating
// when the caller terminates them next, StateRetired when they are already
// gone) of each record, then their messages are deleted: the held ones at
// once, the queued ones by one scan of the queue (received and given back
// like a repair scan, Maintain) and, for copies the scan could not see,
// whenever this manager receives them later.
//
// It returns the IDs it withdrew; an instance that was not idle (claimed
// meanwhile, or missing) is left alone and is not in the list. The error
// joins the transitions that failed for another reason (retry them) and a
// scan that did not complete (the messages left are deleted when received,
// or dropped as stale hints: the records are no longer idle, so no claim
// can succeed).
func (m *Manager) Withdraw(ctx context.Context, ids []string, to State) ([]string, error) {
	if to == StateIdle || to == StateClaimed || to == "" {
		return nil, fmt.Errorf("pickup: cannot withdraw instances into state %q: use StateTerminating or StateRetired", to)
	}
	cfg := m.config()
	var done []string
	var errs []error
	for _, id := range ids {
		_, err := m.transition(ctx, cfg, Transition{ID: id, From: StateIdle, To: to})
		switch {
		case errors.Is(err, ErrConditionFailed), errors.Is(err, ErrNotFound):
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("pickup: withdrawing idle instance %s: %w", id, err))
			continue
		}
		done = append(done, id)
	}
	if len(done) == 0 {
		return nil, errors.Join(errs...)
	}
	now := m.clock.Now()
	gone := map[string]bool{}
	m.mu.Lock()
	if m.withdrawn == nil {
		m.withdrawn = map[string]time.Time{}
	}
	for _, id := range done {
		m.withdrawn[id] = now.Add(withdrawnFor)
		gone[id] = true
	}
	m.trimWithdrawnLocked(now)
	drop := m.removeHeldLocked(func(h held) bool { return gone[h.entry.InstanceID] })
	m.mu.Unlock()
	m.settle(ctx, cfg, drop, true)

	// One scan: every message it receives passes admit, which deletes the
	// withdrawn instances' messages; the rest is given back at once.
	var rep MaintainReport
	_, scanned, err := m.scan(ctx, cfg, &rep)
	m.mu.Lock()
	m.giveBackUnlock(ctx, m.removeHeldLocked(func(h held) bool { return scanned[h.msg.ID] }))
	if err != nil {
		errs = append(errs, fmt.Errorf("pickup: deleting the messages of withdrawn instances (they are deleted when next received): %w", err))
	}
	m.log.Info("pickup: instances withdrawn from the pool", "class", cfg.Class, "instances", done, "state", string(to), "scanned", rep.Scanned)
	return done, errors.Join(errs...)
}

// withdrawnLocked reports whether id was withdrawn and its messages are
// still deleted on sight.
func (m *Manager) withdrawnLocked(id string, now time.Time) bool {
	until, ok := m.withdrawn[id]
	return ok && now.Before(until)
}

// trimWithdrawnLocked forgets expired entries, and the oldest beyond
// maxWithdrawn.
func (m *Manager) trimWithdrawnLocked(now time.Time) {
	for id, until := range m.withdrawn {
		if !now.Before(until) {
			delete(m.withdrawn, id)
		}
	}
	for len(m.withdrawn) > maxWithdrawn {
		var oldest string
		var at time.Time
		for id, until := range m.withdrawn {
			if oldest == "" || until.Before(at) {
				oldest, at = id, until
			}
		}
		delete(m.withdrawn, oldest)
	}
}
