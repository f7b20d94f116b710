package backend

import (
	"context"
	"errors"
	"time"
)

// Leader is a stack's leader record: which daemon arbitrates the stack's
// pools, budgets and VM ceilings, and under which epoch. Both backends keep
// one per stack (an SQLite row, a DynamoDB item).
type Leader struct {
	// Holder identifies the daemon process holding the lease; "" when the
	// lease was released (Epoch is kept: it only grows).
	Holder string
	// Epoch is the fencing token: it grows by one on every change of holder
	// and never decreases, so a write conditional on it is refused once
	// another daemon took over.
	Epoch int64
	// Address is the leader's advertise URL (http://host:port), where
	// standbys forward requests.
	Address string
	// Mode is the leader's daemon mode: "watch" or "serve".
	Mode string
	// ConfigHash identifies the configuration the leader runs, so that a
	// standby can report a replica whose files differ.
	ConfigHash string
	// AcquiredAt is when Holder took the lease, RenewedAt its last renewal,
	// ExpiresAt when another daemon may take it (by that daemon's clock).
	AcquiredAt, RenewedAt, ExpiresAt time.Time
}

// Live reports whether the lease is held and unexpired at now.
func (l Leader) Live(now time.Time) bool {
	return l.Holder != "" && now.Before(l.ExpiresAt)
}

// LeaderClaim is what a daemon asks AcquireLeader for.
type LeaderClaim struct {
	// Holder is the claiming daemon's ID, unique per process: a restarted
	// daemon never renews its predecessor's lease.
	Holder string
	// Address, Mode and ConfigHash are recorded as given (see Leader).
	Address, Mode, ConfigHash string
	// Lease is how long the lease lasts from now without a renewal.
	Lease time.Duration
}

// LeaderStore keeps a stack's leader record. Expiry is judged by the
// calling process's clock: replicas need clocks within the margin the
// daemon keeps (docs/ha.md).
type LeaderStore interface {
	// AcquireLeader renews the lease when c.Holder holds it (same epoch),
	// or takes it when it is free, released or expired (epoch + 1). It
	// returns the record as it stands after the call and whether c.Holder
	// holds it; a lease held by another daemon is (that record, false, nil).
	AcquireLeader(ctx context.Context, c LeaderClaim) (Leader, bool, error)
	// ReleaseLeader gives the lease up at once (a graceful shutdown) when
	// holder holds it under epoch; otherwise it changes nothing and returns
	// nil. The epoch is kept, so the next holder's is higher.
	ReleaseLeader(ctx context.Context, holder string, epoch int64) error
	// ReadLeader returns the record; the zero Leader when there never was one.
	ReadLeader(ctx context.Context) (Leader, error)
}

// ErrFenced: a grant record write (a pool lease, permit or claim, its
// heartbeat or its release) carried a leader epoch that is no longer the
// stack's. The writer lost the leadership (another daemon took over while
// it was paused or partitioned) and must stop granting; nothing was written.
var ErrFenced = errors.New("fenced: another daemon leads this stack now (this daemon's leader epoch is stale)")

// NextLeader decides an acquisition for both backends: c's holder renews
// its own lease (same epoch, same AcquiredAt), or takes one that is absent
// (cur is the zero Leader), released or expired at now (the next epoch). ok
// is false when another holder's lease is live; cur is then unchanged.
func NextLeader(cur Leader, c LeaderClaim, now time.Time) (next Leader, ok bool) {
	next = Leader{Holder: c.Holder, Epoch: cur.Epoch, Address: c.Address, Mode: c.Mode, ConfigHash: c.ConfigHash,
		AcquiredAt: cur.AcquiredAt, RenewedAt: now, ExpiresAt: now.Add(c.Lease)}
	switch {
	case cur.Holder == c.Holder:
		// Nobody else held it since: the epoch did not move, so the
		// records this holder wrote are still its own.
	case cur.Live(now):
		return cur, false
	default:
		next.Epoch++
		next.AcquiredAt = now
	}
	return next, true
}
