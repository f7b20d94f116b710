package ledger

import (
	"cmp"
	"slices"
	"time"
)

// ClaimInfo is a snapshot of one claim that still counts.
type ClaimInfo struct {
	ID        ClaimID
	WorkerID  string
	Count     int
	GrantedAt time.Time
	// ExpiresAt is when an unconfirmed claim stops counting.
	ExpiresAt time.Time
	// ConfirmedAt is when Confirm was called (zero before): the claim then
	// counts until a later usage figure retires it.
	ConfirmedAt time.Time
}

// Claims reports every claim that still counts (expiring due claims first),
// oldest grant first. It costs O(c log c), O(c) of it under the ledger's
// lock.
func (l *Ledger) Claims() []ClaimInfo {
	l.mu.Lock()
	l.sweepLocked(l.clock.Now())
	out := make([]ClaimInfo, 0, len(l.claims))
	for _, c := range l.claims {
		out = append(out, ClaimInfo{ID: c.id, WorkerID: c.workerID, Count: c.count, GrantedAt: c.grantedAt, ExpiresAt: c.expiresAt, ConfirmedAt: c.confirmedAt})
	}
	l.mu.Unlock()
	slices.SortFunc(out, func(a, b ClaimInfo) int {
		if c := a.GrantedAt.Compare(b.GrantedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out
}
