package pools

import (
	"context"
	"fmt"
	"math"
)

// RestoreReport says what Restore did with each stored record.
type RestoreReport struct {
	Restored int // leases now held again
	Expired  int // records whose ExpiresAt had passed: deleted, counted as expired
	Known    int // records of leases this Manager already holds: left alone
	// Orphaned lists IDs of records naming a pool that does not exist or
	// that are malformed (empty ID, slots < 1). They stay in the store; a
	// later Restore, once the pool is configured, picks them up.
	Orphaned []string
}

// Restore re-counts the slots recorded in the Store, so that slots held by
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
func (m *Manager) Restore(ctx context.Context) (RestoreReport, error) {
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
		x := &leaseExt{id: rec.LeaseID, grantedAt: rec.GrantedAt, expiresAt: rec.ExpiresAt}
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
		p.insertLocked(l)
		p.mu.Unlock()
		rep.Restored++
	}
	m.log.Info("pools: restored leases", "restored", rep.Restored, "expired", rep.Expired, "known", rep.Known, "orphaned", len(rep.Orphaned))
	return rep, nil
}
