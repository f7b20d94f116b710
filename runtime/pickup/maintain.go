package pickup

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// repairGrace is how long an idle record must have been left alone before
// the repair publishes a message for it: Offer and Release write the
// record first and publish second, and the repair must not race them.
const repairGrace = 10 * time.Second

// MaintainReport is what one Maintain pass did.
type MaintainReport struct {
	// Lapsed: unconfirmed claims whose deadline passed, returned to idle
	// (and offered again) or retired when their threshold had passed.
	Lapsed int
	// Scanned: messages the repair scan received; Complete: it reached the
	// end of the queue, so the comparison with the table was made.
	Scanned  int
	Complete bool
	// Reoffered: idle instances with no message in the queue, published
	// again (at most MaxReoffer per pass).
	Reoffered int
}

// Maintain runs one pass of the manager's upkeep; the daemon calls it when
// it starts and then periodically. It
//
//   - returns to idle, and offers again, every claim whose ClaimExpires has
//     passed without a Confirm (Config.ClaimTTL);
//   - repairs the pool: it receives the class queue (at most MaxScan
//     messages, held like misfits while it runs, so requests meanwhile
//     still find them, and given back at once after) and publishes a message for every idle instance of the table that
//     has none (at most MaxReoffer), which closes the gap a crash between
//     Offer's (or Release's) table write and its publish leaves.
//
// A message the scan could not see (in flight at another consumer, or
// delayed) makes a duplicate, which is harmless: the second claim of an
// instance fails its condition and drops it, and a held duplicate is
// deleted. Each change is logged; the error joins what failed.
func (m *Manager) Maintain(ctx context.Context) (MaintainReport, error) {
	var rep MaintainReport
	lapseErr := m.lapse(ctx, &rep)
	repairErr := m.repair(ctx, &rep)
	return rep, errors.Join(lapseErr, repairErr)
}

// lapse returns the claims whose deadline passed.
func (m *Manager) lapse(ctx context.Context, rep *MaintainReport) error {
	cfg := m.config()
	claimed, err := m.list(ctx, cfg, StateClaimed)
	if err != nil {
		return err
	}
	now := m.clock.Now()
	var errs []error
	for _, inst := range claimed {
		if inst.ClaimExpires.IsZero() || inst.ClaimExpires.After(now) {
			continue
		}
		to := StateIdle
		if !inst.Threshold.After(now) {
			to = StateRetired
		}
		got, err := m.transition(ctx, cfg, Transition{ID: inst.ID, From: StateClaimed, To: to, ExpectOwner: inst.Owner, LapsedBy: now})
		if errors.Is(err, ErrConditionFailed) {
			continue // confirmed or released meanwhile
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("pickup: returning the unconfirmed claim of instance %s by %q: %w", inst.ID, inst.Owner, err))
			continue
		}
		rep.Lapsed++
		m.stats.claimLapsed.Add(1)
		m.log.Info("pickup: claim not confirmed in time; the instance is free again", "class", cfg.Class,
			"instance", inst.ID, "owner", inst.Owner, "deadline", inst.ClaimExpires, "state", string(to))
		if to == StateIdle {
			if err := m.publish(ctx, cfg, got); err != nil {
				errs = append(errs, fmt.Errorf("pickup: instance %s is idle again but its message was not published (the next repair publishes it): %w", inst.ID, err))
			}
		}
	}
	return errors.Join(errs...)
}

// repair publishes a message for every idle instance the queue has none for.
func (m *Manager) repair(ctx context.Context, rep *MaintainReport) error {
	cfg := m.config()
	seen, scanned, err := m.scan(ctx, cfg, rep)
	// What the scan received and is still held goes back now: the scan
	// holds only while it runs.
	m.mu.Lock()
	m.giveBackUnlock(ctx, m.removeHeldLocked(func(h held) bool { return scanned[h.msg.ID] }))
	if err != nil {
		return fmt.Errorf("pickup: repair scan of class %q: %w", cfg.Class, err)
	}
	if !rep.Complete {
		m.log.Warn("pickup: the queue holds more messages than one repair scan reads; idle instances without a message were not looked for",
			"class", cfg.Class, "scanned", rep.Scanned, "limit", MaxScan)
		return nil
	}
	idle, err := m.list(ctx, cfg, StateIdle)
	if err != nil {
		return err
	}
	now := m.clock.Now()
	var errs []error
	for _, inst := range idle {
		if seen[inst.ID] || now.Sub(inst.UpdatedAt) < repairGrace || !inst.Threshold.After(now) {
			continue
		}
		if rep.Reoffered == MaxReoffer {
			m.log.Warn("pickup: more idle instances without a message than one repair pass re-offers; the next pass continues", "class", cfg.Class, "limit", MaxReoffer)
			break
		}
		if err := m.publish(ctx, cfg, inst); err != nil {
			errs = append(errs, fmt.Errorf("pickup: re-offering idle instance %s: %w", inst.ID, err))
			continue
		}
		rep.Reoffered++
		m.stats.reoffered.Add(1)
		m.log.Info("pickup: idle instance had no message in the queue; offered it again", "class", cfg.Class, "instance", inst.ID, "idle_since", inst.UpdatedAt)
	}
	return errors.Join(errs...)
}

// scan receives the queue until it is empty (or MaxScan messages), and
// returns the instance IDs that have a message (received now, or held) and
// the IDs of the messages it held. Each received message is decided as a
// round would, but nothing is re-queued: a valid entry goes to the first
// waiting request it meets, or is held (beyond the bound, until the scan
// ends), so a request never misses a runner because the scan has its
// message in flight.
func (m *Manager) scan(ctx context.Context, cfg *Config, rep *MaintainReport) (seen, scanned map[string]bool, err error) {
	seen, scanned = map[string]bool{}, map[string]bool{}
	for rep.Scanned < MaxScan {
		m.returning.add()
		msgs, err := m.receiveRetry(ctx, cfg, maxBatch, cfg.ReceiveWait)
		if err == nil && len(msgs) == 0 {
			msgs, err = m.receiveRetry(ctx, cfg, maxBatch, cfg.confirmWait())
		}
		if err != nil {
			m.returning.done()
			return seen, scanned, err
		}
		if len(msgs) == 0 {
			m.returning.done()
			rep.Complete = true
			break
		}
		rep.Scanned += len(msgs)
		now := m.clock.Now()
		var drop []Message
		var discarded []*DiscardError
		m.mu.Lock()
		for _, msg := range msgs {
			e, d := m.admit(cfg, msg, now)
			if d != nil {
				drop = append(drop, msg)
				discarded = append(discarded, d)
				continue
			}
			seen[e.InstanceID] = true
			if w := m.firstMatchLocked(e); w != nil {
				m.unlistLocked(w)
				m.stats.passed.Add(1)
				w.send(event{kind: evAssigned, cand: candidate{msg: msg, entry: e}})
				continue
			}
			_, dup := m.holdLocked(cfg, msg, e, now, false)
			drop = append(drop, dup...)
			scanned[msg.ID] = true
		}
		m.mu.Unlock()
		m.returning.done()
		for _, d := range discarded {
			m.log.Warn("pickup: discarded message", "class", cfg.Class, "reason", d.Reason.String(), "instance", d.InstanceID, "detail", d.Detail)
		}
		m.settle(ctx, cfg, drop, true)
	}
	m.mu.Lock()
	for _, h := range m.held {
		seen[h.entry.InstanceID] = true
	}
	m.mu.Unlock()
	return seen, scanned, nil
}

func (m *Manager) list(ctx context.Context, cfg *Config, state State) ([]Instance, error) {
	var out []Instance
	err := m.retry(ctx, cfg, "list", func() error {
		var err error
		out, err = m.t.List(ctx, cfg.Class, state)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pickup: listing the %s instances of class %q: %w", state, cfg.Class, err)
	}
	return out, nil
}

// publish sends inst's message.
func (m *Manager) publish(ctx context.Context, cfg *Config, inst Instance) error {
	body := EntryFor(inst).Body()
	return m.retry(ctx, cfg, "send", func() error { return m.q.Send(ctx, body, 0) })
}
