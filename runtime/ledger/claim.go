package ledger

import (
	"fmt"
	"strconv"
	"time"
)

// ClaimID names a claim within one ledger, for APIs that confirm or cancel by
// ID (see Ledger.Lookup). IDs are sequential, not secret.
type ClaimID uint64

// String formats id as 16 hex digits, the form ParseClaimID reads.
func (id ClaimID) String() string { return fmt.Sprintf("%016x", uint64(id)) }

// ParseClaimID reads an ID written by ClaimID.String.
func ParseClaimID(s string) (ClaimID, error) {
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil || len(s) != 16 {
		return 0, fmt.Errorf("ledger: claim ID %q is not 16 hex digits", s)
	}
	return ClaimID(v), nil
}

type claimState uint8

const (
	claimCounting  claimState = iota // granted, unconfirmed, expires at expiresAt
	claimConfirmed                   // counts until a figure taken after confirmedAt
	claimExpired
	claimCancelled
	claimRetired
)

func (s claimState) String() string {
	switch s {
	case claimCounting:
		return "counting"
	case claimConfirmed:
		return "confirmed"
	case claimExpired:
		return "expired"
	case claimCancelled:
		return "cancelled"
	default:
		return "retired"
	}
}

// Claim is a grant of Count VMs. It counts against the ceiling until it is
// cancelled, expires unconfirmed, or is confirmed and then retired by a usage
// figure taken after the confirmation.
type Claim struct {
	l         *Ledger
	id        ClaimID
	workerID  string
	count     int
	grantedAt time.Time
	expiresAt time.Time

	// Guarded by l.mu.
	state       claimState
	confirmedAt time.Time
	heapIndex   int // in l.expiry, or -1
}

// ID returns the claim's ID.
func (c *Claim) ID() ClaimID { return c.id }

// WorkerID returns the worker the claim was granted to.
func (c *Claim) WorkerID() string { return c.workerID }

// Count returns the number of VMs the claim covers.
func (c *Claim) Count() int { return c.count }

// GrantedAt returns when the claim was granted.
func (c *Claim) GrantedAt() time.Time { return c.grantedAt }

// ExpiresAt returns when the claim stops counting if it is not confirmed.
func (c *Claim) ExpiresAt() time.Time { return c.expiresAt }

// Confirm tells the ledger the claim's VMs are up at the provider. The claim
// keeps counting (and no longer expires) until a usage figure taken strictly
// after this call is accepted; only then can the figure be trusted to include
// the VMs. Confirming again is a no-op. Confirming a claim that already
// expired or was cancelled returns an error wrapping ErrClaimEnded and changes
// nothing: the VMs are no longer covered by the ledger.
func (c *Claim) Confirm() error {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	l.sweepLocked(now)
	switch c.state {
	case claimCounting:
		l.expiry.remove(c.heapIndex)
		c.state = claimConfirmed
		c.confirmedAt = now
		l.confirmed = append(l.confirmed, c)
		l.stats.Confirmed++
		return nil
	case claimConfirmed, claimRetired:
		return nil
	default:
		return fmt.Errorf("ledger: confirm claim %s: it %s before confirmation; %w", c.id, c.state, ErrClaimEnded)
	}
}

// Cancel returns an unconfirmed claim at once (its VMs were never started);
// in GrantImmediate mode waiting requests may be granted right away. Cancel is
// idempotent and a no-op on a claim that has ended or been confirmed (a
// confirmed VM is accounted for by the provider's figure).
func (c *Claim) Cancel() {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cancelLocked(c, l.clock.Now())
}

// claimHeap is a min-heap of counting claims by expiresAt; each claim knows
// its index so Confirm and Cancel remove it in O(log n).
type claimHeap []*Claim

func (h *claimHeap) push(c *Claim) {
	c.heapIndex = len(*h)
	*h = append(*h, c)
	h.up(c.heapIndex)
}

func (h *claimHeap) remove(i int) {
	old := *h
	n := len(old) - 1
	removed := old[i]
	if i != n {
		old[i] = old[n]
		old[i].heapIndex = i
	}
	old[n] = nil
	*h = old[:n]
	if i != n {
		if !h.down(i) {
			h.up(i)
		}
	}
	removed.heapIndex = -1
}

func (h claimHeap) less(i, j int) bool { return h[i].expiresAt.Before(h[j].expiresAt) }

func (h claimHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIndex = i
	h[j].heapIndex = j
}

func (h claimHeap) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(j, i) {
			return
		}
		h.swap(i, j)
		j = i
	}
}

func (h claimHeap) down(i0 int) bool {
	i := i0
	n := len(h)
	for {
		j1 := 2*i + 1
		if j1 >= n {
			break
		}
		j := j1
		if j2 := j1 + 1; j2 < n && h.less(j2, j1) {
			j = j2
		}
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}
