package pickup

import (
	"context"
	"fmt"
	"time"
)

// Offer records inst as idle in the instance table (unconditionally) and
// publishes its message, so the pool can be filled. inst.Class may be empty
// (the manager's class is used); inst.State, Owner and UpdatedAt are set
// here. An instance whose message the manager would discard (wrong specs
// for the class, expired threshold, unknown usage class) is refused. Offer
// is idempotent up to duplicate messages, which are harmless (a second
// claim of the same instance fails its condition and drops the duplicate):
// after an error, call it again.
func (m *Manager) Offer(ctx context.Context, inst Instance) error {
	cfg := m.config()
	if inst.Class == "" {
		inst.Class = cfg.Class
	}
	if inst.Class != cfg.Class {
		return fmt.Errorf("pickup: cannot offer instance %s of class %q to the manager of class %q", inst.ID, inst.Class, cfg.Class)
	}
	now := m.clock.Now()
	body := EntryFor(inst).Body()
	if _, d := validEntry(cfg, body, now); d != nil {
		return fmt.Errorf("pickup: refusing to offer an instance the pool would discard: %w", d)
	}
	inst.State, inst.Owner, inst.UpdatedAt, inst.ClaimExpires = StateIdle, "", now, time.Time{}
	if err := m.retry(ctx, cfg, "put", func() error { return m.t.Put(ctx, inst) }); err != nil {
		return fmt.Errorf("pickup: recording instance %s as idle failed; offer it again: %w", inst.ID, err)
	}
	if err := m.retry(ctx, cfg, "send", func() error { return m.q.Send(ctx, body, 0) }); err != nil {
		return fmt.Errorf("pickup: instance %s is idle in the table but its message was not published; offer it again: %w", inst.ID, err)
	}
	return nil
}

// Disposition says what Release does with a claimed instance.
type Disposition int

const (
	// ReOffer returns the instance to idle and publishes its message again,
	// unless its threshold has passed, in which case it is retired.
	ReOffer Disposition = iota
	// Retire takes the instance out of the pool for good.
	Retire
)

// Release ends owner's claim on instance id and returns the record as it
// now stands. It fails, changing nothing, when owner does not hold the
// claim (the error wraps ErrConditionFailed). After ReOffer, the record is
// idle first and the message published second: an error from the publish
// says so, and Offer with the returned record republishes it.
func (m *Manager) Release(ctx context.Context, id, owner string, d Disposition) (Instance, error) {
	cfg := m.config()
	if d != ReOffer && d != Retire {
		return Instance{}, fmt.Errorf("pickup: unknown disposition %d: use ReOffer or Retire", d)
	}
	var inst Instance
	if err := m.retry(ctx, cfg, "get", func() error {
		var err error
		inst, err = m.t.Get(ctx, id)
		return err
	}); err != nil {
		return Instance{}, fmt.Errorf("pickup: releasing instance %s: %w", id, err)
	}
	now := m.clock.Now()
	to := StateIdle
	if d == Retire || !inst.Threshold.After(now) {
		to = StateRetired
	}
	inst, err := m.transition(ctx, cfg, Transition{ID: id, From: StateClaimed, To: to, ExpectOwner: owner})
	if err != nil {
		return Instance{}, fmt.Errorf("pickup: releasing instance %s held by %q: %w", id, owner, err)
	}
	if to == StateRetired {
		return inst, nil
	}
	if err := m.publish(ctx, cfg, inst); err != nil {
		return inst, fmt.Errorf("pickup: instance %s is idle again but its message was not published (Maintain's repair publishes it; or Offer it): %w", id, err)
	}
	return inst, nil
}
