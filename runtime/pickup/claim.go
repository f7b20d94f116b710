package pickup

import (
	"context"
	"errors"
	"fmt"
)

// errStale: the claim's condition failed, so the message was a stale hint
// (someone else claimed the instance, or it is no longer idle or has
// expired). The message was dropped; the request picks again.
var errStale = errors.New("pickup: stale hint")

// claim is the Claim Worker: the atomic idle → claimed transition of the
// candidate's instance, conditioned on state idle, no owner and threshold
// not past. A failed condition means the hint was stale: the message is
// dropped and errStale returned. A transient error is retried with backoff
// while the message stays held (in flight in lease mode, in memory in delete
// mode); when the retries run out or ctx ends, a claim that may have
// committed meanwhile is undone and the message is given back, so the
// runner is never lost to a backend hiccup.
func (m *Manager) claim(ctx context.Context, w *waiter, c candidate) (Instance, error) {
	cfg := m.config()
	tr := Transition{ID: c.entry.InstanceID, From: StateIdle, To: StateClaimed, Owner: w.owner}
	ambiguous := false // an earlier attempt failed without saying whether it committed
	for attempt := 1; ; attempt++ {
		tr.Now = m.clock.Now()
		if cfg.ClaimTTL > 0 {
			tr.ClaimExpires = tr.Now.Add(cfg.ClaimTTL)
		}
		inst, err := m.t.Transition(ctx, tr)
		if err == nil {
			return m.claimed(ctx, cfg, w, c, inst), nil
		}
		if errors.Is(err, ErrConditionFailed) {
			if ambiguous {
				if inst, ok := m.heldBy(ctx, cfg, tr.ID, w.owner); ok {
					return m.claimed(ctx, cfg, w, c, inst), nil
				}
			}
			m.stats.claimLostRace.Add(1)
			m.log.Debug("pickup: claim lost; dropping the stale message", "class", cfg.Class, "instance", tr.ID, "err", err)
			if cfg.Mode == ModeLease {
				m.settle(ctx, cfg, []Message{c.msg}, true)
			}
			return Instance{}, errStale
		}
		ambiguous = true
		if ctx.Err() == nil && attempt < cfg.ClaimAttempts {
			m.stats.claimRetried.Add(1)
			m.log.Warn("pickup: claim failed; retrying and keeping the message", "class", cfg.Class, "instance", tr.ID, "attempt", attempt, "err", err)
			if m.sleep(ctx, backoff(cfg, attempt)) == nil {
				continue
			}
		}
		m.stats.gaveUp.Add(1)
		if uerr := m.giveBack(ctx, cfg, c, w.owner); uerr != nil {
			return Instance{}, &UncertainClaimError{InstanceID: tr.ID, Owner: w.owner, Err: errors.Join(err, uerr)}
		}
		if ctx.Err() != nil {
			return Instance{}, ctx.Err()
		}
		return Instance{}, fmt.Errorf("pickup: claiming instance %s of class %q failed %d times; its message was given back, retry the pickup later: %w", tr.ID, cfg.Class, attempt, err)
	}
}

// claimed completes a committed claim: the message is deleted (lease mode;
// in delete mode it already is), by the leader's next batch when there is a
// leader. Should the delete fail or never happen, the message reappears and
// its next claim fails as stale, so it is harmless.
func (m *Manager) claimed(ctx context.Context, cfg *Config, w *waiter, c candidate, inst Instance) Instance {
	m.stats.claimed.Add(1)
	m.lat.observe(m.clock.Now().Sub(w.start))
	if cfg.Mode == ModeLease {
		m.mu.Lock()
		led := m.leader != nil
		if led {
			m.settled = append(m.settled, c.msg)
		}
		m.mu.Unlock()
		if led {
			return inst
		}
		m.settle(ctx, cfg, []Message{c.msg}, true)
	}
	return inst
}

// heldBy reports whether owner holds the claim on id: after an ambiguous
// error, the transition may have committed.
func (m *Manager) heldBy(ctx context.Context, cfg *Config, id, owner string) (Instance, bool) {
	var inst Instance
	err := m.retry(ctx, cfg, "get", func() error {
		var err error
		inst, err = m.t.Get(ctx, id)
		return err
	})
	return inst, err == nil && inst.State == StateClaimed && inst.Owner == owner
}

// giveBack returns a candidate the request will not use: a claim owner may
// hold after an ambiguous error is undone (owner "" skips that), then the
// message is made visible again (lease) or re-sent (delete). It runs on a
// detached context because it typically runs after ctx ended.
//
// It returns an error only when a claim by owner may still be recorded: the
// undo (or the check) failed beyond its retries.
func (m *Manager) giveBack(ctx context.Context, cfg *Config, c candidate, owner string) error {
	rel := releaseCtx(ctx, cfg)
	defer rel.cancel()
	var undoErr error
	if owner != "" {
		undoErr = m.undoClaim(rel.ctx, cfg, c.entry.InstanceID, owner)
		if undoErr != nil {
			m.stats.releaseErrors.Add(1)
			m.log.Error("pickup: undoing an abandoned claim failed; Release the instance", "class", cfg.Class, "instance", c.entry.InstanceID, "owner", owner, "err", undoErr)
		}
	}
	if cfg.Mode == ModeLease {
		m.batch(rel.ctx, cfg, []Message{c.msg}, 0, false)
	} else {
		m.resend(rel.ctx, cfg, c.msg, 0)
	}
	return undoErr
}

// undoClaim returns id to idle if owner holds its claim. A failed
// condition means owner does not hold it (any more): nothing to undo.
func (m *Manager) undoClaim(ctx context.Context, cfg *Config, id, owner string) error {
	return m.retry(ctx, cfg, "undo claim", func() error {
		_, err := m.t.Transition(ctx, Transition{ID: id, From: StateClaimed, To: StateIdle, ExpectOwner: owner})
		if errors.Is(err, ErrConditionFailed) {
			return nil
		}
		return err
	})
}

// Confirm records that owner has received its claim on instance id and
// uses it: the claim no longer lapses after Config.ClaimTTL and stays until
// Release. Confirming a confirmed claim succeeds again, and so does a
// confirmation that arrives after the deadline but before Maintain returned
// the instance. It fails, changing nothing, when owner does not hold the
// claim (released, lapsed, or never made): the error wraps
// ErrConditionFailed.
func (m *Manager) Confirm(ctx context.Context, id, owner string) (Instance, error) {
	cfg := m.config()
	if owner == "" {
		return Instance{}, fmt.Errorf("pickup: confirming instance %s: owner is empty: name the claimant the pickup was made for", id)
	}
	inst, err := m.transition(ctx, cfg, Transition{ID: id, From: StateClaimed, To: StateClaimed, ExpectOwner: owner, Owner: owner})
	if err != nil {
		return Instance{}, fmt.Errorf("pickup: confirming instance %s for %q: %w", id, owner, err)
	}
	m.stats.confirmed.Add(1)
	return inst, nil
}

// transition applies tr, retrying transient errors. A failed condition
// after an attempt that failed ambiguously is checked against the record:
// if it shows tr's result, the earlier attempt committed and transition
// returns the record. Otherwise a failed condition wraps
// ErrConditionFailed.
func (m *Manager) transition(ctx context.Context, cfg *Config, tr Transition) (Instance, error) {
	var inst Instance
	ambiguous := false
	err := m.retry(ctx, cfg, "transition", func() error {
		got, err := m.t.Transition(ctx, tr)
		switch {
		case err == nil:
			inst = got
			return nil
		case errors.Is(err, ErrConditionFailed):
			if ambiguous {
				if cur, gerr := m.t.Get(ctx, tr.ID); gerr == nil && cur.State == tr.To && cur.Owner == tr.Owner && cur.ClaimExpires.Equal(tr.ClaimExpires) {
					inst = cur
					return nil
				}
			}
			return permanent{err}
		}
		ambiguous = true
		return err
	})
	return inst, err
}
