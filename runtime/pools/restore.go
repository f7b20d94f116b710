package pools

import (
	"context"
	"fmt"
	"math"
	"time"
)

// RestoreReport says what Restore did with each stored record.
type RestoreReport struct {
	Restored int // leases now held again
	Expired  int // records whose ExpiresAt had passed: deleted, counted as expired
	Known    int // records of leases this Manager already holds: left alone
	// Extended counts the leases restored with RestoreOptions.Grace
	// instead of their recorded expiry (see RestoreOptions).
	Extended int
	// Orphaned lists IDs of records naming a pool that does not exist or
	// that are malformed (empty ID, slots < 1). They stay in the store; a
	// later Restore, once the pool is configured, picks them up.
	Orphaned []string
}

// RestoreOptions tune RestoreWith.
type RestoreOptions struct {
	// Since and Grace spare the holders that had nobody to heartbeat to.
	// Since is the last instant the previous owner of the records (a
	// daemon that stopped, or lost the backend) is known to have accepted
	// heartbeats; a lease whose recorded expiry is at or after Since, no
	// more than Grace ago, and before now+Grace is restored with the expiry
	// now+Grace, so that its holder's next heartbeat, sent to the new
	// owner, finds it held (etcd's lessor extends every lease on promotion
	// the same way). A lease that ran out longer ago lapses as recorded:
	// after a long outage its holder has given up. Only slots are held
	// longer: nothing is ever handed out twice. A zero Since or Grace
	// restores every lease with its recorded expiry.
	Since time.Time
	Grace time.Duration
}

// Restore is RestoreWith with zero options: every lease keeps its
// recorded expiry.
func (m *Manager) Restore(ctx context.Context) (RestoreReport, error) {
	return m.RestoreWith(ctx, RestoreOptions{})
}

// RestoreWith re-counts the slots recorded in the Store, so that slots held by
// workers that outlived a previous process stay held. Call it at start-up
// after the pools are configured and before serving requests. It is
// idempotent (and calls are serialised): a record whose lease is already
// held is skipped. Restored
// leases keep their IDs (see Manager.Lease), remaining TTL and, for later
// heartbeats, the TTL they were granted with (LeaseRecord.TTL); a record
// without one (written by an older rpd) gets the pool's LeaseTTL, or
// ExpiresAt-GrantedAt if the pool has none. A restored lease may push Used above Total if the pool was
// shrunk meanwhile; it is never preempted. Without a Store it does nothing.
//
// A LoadLeases failure is returned wrapping ErrStore with nothing restored;
// a failure to delete an expired record is logged and the next Restore
// tries again.
func (m *Manager) RestoreWith(ctx context.Context, o RestoreOptions) (RestoreReport, error) {
	var rep RestoreReport
	if m.store == nil {
		return rep, nil
	}
	m.restoreMu.Lock()
	defer m.restoreMu.Unlock()
	recs, err := m.store.LoadLeases(ctx)
	if err != nil {
		return rep, fmt.Errorf("pools: loading lease records: %w: %w", ErrStore, err)
	}
	now := m.clock.Now()
	for _, rec := range recs {
		if rec.LeaseID == "" || rec.Slots < 1 || rec.Slots > MaxSlots {
			rep.Orphaned = append(rep.Orphaned, rec.LeaseID)
			m.log.Warn("pools: ignoring malformed lease record", "lease", rec.LeaseID, "pool", rec.Pool, "slots", rec.Slots)
			continue
		}
		m.idMu.Lock()
		known := m.ids[rec.LeaseID] != nil
		m.idMu.Unlock()
		if known {
			rep.Known++
			continue
		}
		p := m.pools.Load().get(rec.Pool)
		if p == nil {
			rep.Orphaned = append(rep.Orphaned, rec.LeaseID)
			m.log.Warn("pools: lease record names an unknown pool; configure the pool and restore again", "lease", rec.LeaseID, "pool", rec.Pool)
			continue
		}
		if o.Spares(rec.ExpiresAt, now) {
			rec.ExpiresAt = now.Add(o.Grace)
			rep.Extended++
		}
		if !rec.ExpiresAt.IsZero() && !now.Before(rec.ExpiresAt) {
			p.mu.Lock()
			p.stats.Expired++
			p.mu.Unlock()
			rep.Expired++
			if err := m.store.DeleteLease(ctx, rec.LeaseID); err != nil {
				m.log.Error("pools: deleting expired lease record", "lease", rec.LeaseID, "err", err)
			}
			continue
		}
		x := &leaseExt{id: rec.LeaseID, owner: rec.Owner, grantedAt: rec.GrantedAt, expiresAt: rec.ExpiresAt}
		l := &Lease{p: p, taskID: rec.TaskID, priority: rec.Priority, slots: rec.Slots, index: -1, ext: x}
		p.mu.Lock()
		if p.deleted || p.used > math.MaxInt-rec.Slots {
			// (No pool can count more held slots than an int holds.)
			p.mu.Unlock()
			rep.Orphaned = append(rep.Orphaned, rec.LeaseID)
			continue
		}
		if !rec.ExpiresAt.IsZero() {
			x.ttl = rec.TTL
			if x.ttl <= 0 {
				x.ttl = p.leaseTTL
			}
			if x.ttl <= 0 {
				x.ttl = rec.ExpiresAt.Sub(rec.GrantedAt)
			}
			if x.ttl <= 0 {
				x.ttl = rec.ExpiresAt.Sub(now)
			}
		}
		p.insertLocked(l, p.m.clock.Now())
		p.mu.Unlock()
		rep.Restored++
	}
	m.log.Info("pools: restored leases", "restored", rep.Restored, "expired", rep.Expired, "extended", rep.Extended, "known", rep.Known, "orphaned", len(rep.Orphaned))
	return rep, nil
}

// Spares reports whether a grant recorded to expire at expiresAt is
// restored at now with the expiry now+Grace: the rule RestoreWith applies
// to leases, exported for callers that restore grants of their own.
func (o RestoreOptions) Spares(expiresAt, now time.Time) bool {
	return o.Grace > 0 && !o.Since.IsZero() && !expiresAt.IsZero() &&
		!expiresAt.Before(o.Since) && !expiresAt.Before(now.Add(-o.Grace)) && expiresAt.Before(now.Add(o.Grace))
}
