package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/daemon/internal/component"
	"github.com/rpdhq/rpd/reconcile"
	"github.com/rpdhq/rpd/spec"
)

// reconcileApply is watch mode's push to the backend: plan the validated
// configuration against live state and, when it changes anything, apply
// it under the state lock (held only for the apply). A reload applies all
// or nothing: any guard's refusal (a non-empty queue to delete) fails the
// plan, or the apply before anything changes. Pools with holders are not
// guarded here: the daemon keeps a dropped pool until it is idle.
func (d *Daemon) reconcileApply(ctx context.Context, cfg *spec.Config) error {
	live := reconcile.Live{Queues: d.backend.Queues, State: d.backend.State, Lock: d.backend.Lock, Tables: d.backend.Tables, Budgets: d,
		Held: reconcile.HeldSlotsFunc(func(context.Context) (map[string]int, error) { return d.heldSlots(cfg), nil })}
	p, err := reconcile.MakePlan(ctx, cfg, live, reconcile.PlanOptions{Backend: reconcile.BackendConfigOf(cfg.Backend)})
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	for _, w := range p.Warnings {
		d.log.Warn("configuration change with live impact", "address", w.Address.String(), "warning", w.Summary)
	}
	if !p.HasChanges() {
		// Already applied (rpd apply, then rpd watch): the state's version
		// is the plan's.
		d.stateVersion.Store(p.StateVersion)
		return nil
	}
	res, err := reconcile.Apply(ctx, p, live, reconcile.ApplyOptions{Who: reconcile.DefaultWho(), Operation: "watch", LockTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	d.stateVersion.Store(res.StateVersion)
	return nil
}

// BudgetsInUse reports what each budget has handed out, for the plan's
// live-impact warnings.
func (d *Daemon) BudgetsInUse(ctx context.Context) (map[string]reconcile.BudgetUse, error) {
	return d.arb.BudgetsInUse(), nil
}

var _ reconcile.BudgetUsageReader = (*Daemon)(nil)

// heldSlots reports the slots held in each pool cfg still declares, as
// this daemon (the leader: only it applies) counts them, so that the plan
// warns about shrinking below them. A pool cfg removes is left out: the
// daemon retains it until idle rather than refuse the reload (the plan's
// guard would).
func (d *Daemon) heldSlots(cfg *spec.Config) map[string]int {
	declared := map[string]bool{}
	for _, p := range cfg.Pools {
		declared[p.Name] = true
	}
	held := map[string]int{}
	for _, p := range d.arb.Pools() {
		if p.Used > 0 && declared[p.Name] {
			held[p.Name] = p.Used
		}
	}
	return held
}

// followLoop is serve mode: read the state store's version every
// StatePoll and hot-apply a new runtime document.
func (d *Daemon) followLoop(ctx context.Context) {
	component.Every(ctx, d.opts.StatePoll, func(ctx context.Context) { d.reload(ctx, false) })
}

// follow reads the runtime document and applies it when its version
// differs from the one last attempted (or always, when forced).
func (d *Daemon) follow(ctx context.Context, force bool) api.ReloadResult {
	start := time.Now()
	prev := d.reloader.state()
	doc, version, err := d.backend.State.ReadState(ctx)
	if err != nil {
		// Nothing was attempted: forget the last document, so that the next
		// successful read applies it again and reports the reload healthy.
		return d.reject(prev, "", start, fmt.Errorf("read the runtime document: %w", err))
	}
	sum := sha256.Sum256(doc)
	hash := hex.EncodeToString(sum[:])
	if !force && hash == prev.attempted && prev.version > 0 {
		return prev.last
	}
	var rd *reconcile.RuntimeDoc
	if doc == nil {
		rd = reconcile.NewRuntimeDoc(d.stack)
	} else if rd, err = reconcile.DecodeRuntimeDoc(doc); err != nil {
		return d.reject(prev, hash, start, fmt.Errorf("runtime document version %d: %w", version, err))
	}
	if rd.Stack != "" && rd.Stack != d.stack {
		return d.reject(prev, hash, start, fmt.Errorf("runtime document version %d belongs to stack %q, not %q", version, rd.Stack, d.stack))
	}
	res := d.applyDoc(ctx, prev, component.DocInput(rd, d.base), hash, start)
	if res.OK {
		// Status reports the version of the document in force, not of one
		// that was rejected.
		d.stateVersion.Store(version)
	}
	return res
}
