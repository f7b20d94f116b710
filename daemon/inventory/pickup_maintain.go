package inventory

import (
	"context"
	"time"

	"github.com/rpdhq/rpd/runtime/pickup"
)

// maxMaintainEvery is how often each runner class's pickup manager runs its
// maintenance pass (pickup.Manager.Maintain: lapse unconfirmed claims,
// re-offer idle runners without a message) at the longest; a class with
// claim_ttl runs it every claim_ttl/4 when that is shorter, at least each
// second, so an unconfirmed claim is back at most a quarter of claim_ttl
// late.
const maxMaintainEvery = 30 * time.Second

// maintainEvery is the pass interval of a class.
func maintainEvery(claimTTL time.Duration) time.Duration {
	if claimTTL > 0 {
		return min(maxMaintainEvery, max(claimTTL/4, time.Second))
	}
	return maxMaintainEvery
}

// maintainLoop runs every class's pass at start (a crash of the previous
// daemon may have left idle runners without a message, or claims nobody
// will confirm) and then on its interval, until ctx is done; then it gives
// the misfits every manager holds back to their queues.
func (a *Inventory) maintainLoop(ctx context.Context) {
	next := map[*pickup.Manager]time.Time{}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		now := time.Now()
		live := map[*pickup.Manager]bool{}
		for _, cl := range a.comp.classes.declared() {
			live[cl.mgr] = true
			if due, ok := next[cl.mgr]; ok && now.Before(due) {
				continue
			}
			next[cl.mgr] = now.Add(maintainEvery(cl.mgr.Config().ClaimTTL))
			pctx, cancel := context.WithTimeout(ctx, maxMaintainEvery)
			rep, err := cl.mgr.Maintain(pctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				a.log.Warn("pickup maintenance pass failed; the next pass retries", "runner_class", cl.name, "err", err)
			}
			if rep.Lapsed+rep.Reoffered > 0 {
				a.log.Info("pickup maintenance pass", "runner_class", cl.name, "lapsed", rep.Lapsed, "reoffered", rep.Reoffered, "scanned", rep.Scanned)
			}
		}
		for m := range next { // forget replaced and dropped classes
			if !live[m] {
				delete(next, m)
			}
		}
		select {
		case <-ctx.Done():
			for _, cl := range a.comp.classes.snapshot() {
				gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				cl.mgr.GiveBack(gctx)
				cancel()
			}
			return
		case <-tick.C:
		}
	}
}
