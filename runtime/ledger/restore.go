package ledger

import (
	"fmt"
	"math"
	"time"
)

// RestoredClaim is a claim that was held before a restart, as the process
// that granted it recorded it (see Ledger.Restore).
type RestoredClaim struct {
	ID        ClaimID
	WorkerID  string
	Count     int
	GrantedAt time.Time
	ExpiresAt time.Time
	// ConfirmedAt is when the claim was confirmed; zero if it was not.
	ConfirmedAt time.Time
}

// Restore re-creates a claim held before a restart, under its ID, so that the
// VMs it covers keep counting: without it a restarted process would grant
// them again while the provider's figure does not show them yet — the
// over-booking this package exists to prevent.
//
// An unconfirmed claim counts until its ExpiresAt, as it would have; a
// confirmed one counts until a usage figure taken after its ConfirmedAt is
// accepted (any figure the new process takes). A restored claim counts even
// above Max (it was granted under the figures of its time; lowering Max
// revokes nothing either); new requests wait until there is room.
//
// New claims skip the IDs of restored claims while those count. To keep a
// new process from reusing the IDs of claims that ended before it started
// (which a client may still quote), start it at another ID with
// WithFirstClaimID, as the daemon does.
//
// Restore fails with ErrInvalidRequest for a Count outside 1..MaxCount, a
// zero ID or an ID already in use, and with ErrClaimEnded for an unconfirmed claim whose
// ExpiresAt has passed (it would no longer count).
func (l *Ledger) Restore(rc RestoredClaim) (*Claim, error) {
	if rc.Count < 1 || rc.Count > MaxCount || rc.ID == 0 {
		return nil, fmt.Errorf("%w: restore claim %s of %q: count %d (must be in 1..%d, with a non-zero ID)", ErrInvalidRequest, rc.ID, rc.WorkerID, rc.Count, MaxCount)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	l.sweepLocked(now)
	if rc.ConfirmedAt.IsZero() && !rc.ExpiresAt.After(now) {
		return nil, fmt.Errorf("ledger: restore claim %s: it expired unconfirmed at %s; %w", rc.ID, rc.ExpiresAt.Format(time.RFC3339), ErrClaimEnded)
	}
	if l.claims[rc.ID] != nil {
		return nil, fmt.Errorf("%w: restore claim %s: the ID is already in use", ErrInvalidRequest, rc.ID)
	}
	if l.local > math.MaxInt-rc.Count {
		return nil, fmt.Errorf("%w: restore claim %s: %d VMs are already held by claims; no more can be counted", ErrInvalidRequest, rc.ID, l.local)
	}
	c := &Claim{
		l:         l,
		id:        rc.ID,
		workerID:  rc.WorkerID,
		count:     rc.Count,
		grantedAt: rc.GrantedAt,
		expiresAt: rc.ExpiresAt,
		heapIndex: -1,
	}
	l.claims[c.id] = c
	l.local += c.count
	if rc.ConfirmedAt.IsZero() {
		l.expiry.push(c)
	} else {
		c.state = claimConfirmed
		c.confirmedAt = rc.ConfirmedAt
		l.confirmed = append(l.confirmed, c)
	}
	l.stats.Restored++
	return c, nil
}

// ConfirmedAt returns when the claim was confirmed, or the zero time.
func (c *Claim) ConfirmedAt() time.Time {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	return c.confirmedAt
}
