package arbiter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/daemon/internal/records"
	"github.com/rpdhq/rpd/daemon/internal/security"
	"github.com/rpdhq/rpd/runtime/ledger"
	"github.com/rpdhq/rpd/runtime/pools"
)

// grantRecord is the stored form of one grant: exactly one of the two is
// set. Owner is the principal that took it (see holderOnly).
type grantRecord struct {
	Permit *api.Lease `json:"permit,omitempty"`
	Claim  *api.Claim `json:"claim,omitempty"`
	Owner  string     `json:"owner,omitempty"`
}

func permitRecordID(leaseID string) string { return "permit/" + leaseID }

func claimRecordID(ceiling, claimID string) string { return "claim/" + ceiling + "/" + claimID }

// grants writes the records: puts synchronously (a grant whose record is
// not written is given back), deletes through a deleteQueue. A nil *grants
// (tests without a backend) records nothing.
type grants struct {
	// store keeps the budget permits and VM-ceiling claims granted over
	// HTTP as opaque records by ID, so a restarted daemon still counts what
	// its clients hold (pool leases have their own store, pools.Store).
	store backend.GrantStore
	q     *records.DeleteQueue

	mu     sync.Mutex
	claims map[string]claimRef // recorded claims by record ID, for sweepClaims
}

type claimRef struct {
	ceiling   string
	id        ledger.ClaimID
	requestID string // the request_id it was granted for, if any
	owner     string // the principal that took it
}

func newGrants(store backend.GrantStore, log *slog.Logger) *grants {
	return &grants{store: store, q: records.NewDeleteQueue("grant", func(ctx context.Context, ids []string) error {
		return backend.DeleteGrants(ctx, store, ids)
	}, log), claims: map[string]claimRef{}}
}

func (g *grants) put(ctx context.Context, id string, rec grantRecord) error {
	body, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode the record of %s: %w", id, err)
	}
	if err := g.store.PutGrant(ctx, id, body); err != nil {
		return fmt.Errorf("record %s in the backend: %w", id, err)
	}
	return nil
}

// LaunchRecordPrefix names the fleet's launch intents among the grant
// records: they are written through the same fenced store, so only the
// leader of the current epoch records a launch, and restoreGrants leaves
// them to the fleet.
const LaunchRecordPrefix = "launch/"

// probeID is the record probe writes and deletes; restoreGrants drops one
// left behind by a daemon that stopped in between.
const probeID = "probe/readyz"

// probe writes and deletes a record, the writes every grant needs.
func (g *grants) probe(ctx context.Context) error {
	if g == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := g.store.PutGrant(ctx, probeID, []byte(`{}`)); err != nil {
		return fmt.Errorf("write a probe record: %w", err)
	}
	if err := g.store.DeleteGrant(ctx, probeID); err != nil {
		return fmt.Errorf("delete a probe record: %w", err)
	}
	return nil
}

func (g *grants) putPermit(ctx context.Context, l api.Lease, owner string) error {
	if g == nil {
		return nil
	}
	return g.put(ctx, permitRecordID(l.LeaseID), grantRecord{Permit: &l, Owner: owner})
}

func (g *grants) deletePermit(leaseID string) {
	if g != nil {
		_ = g.q.Delete(context.Background(), permitRecordID(leaseID))
	}
}

// putClaim records c (again, after a confirm: requestID "" keeps the one
// it was granted for, and the owner stays who took it; the first time, the
// owner is ctx's principal) and tracks it for sweepClaims.
func (g *grants) putClaim(ctx context.Context, ceiling string, c *ledger.Claim, requestID string) error {
	if g == nil {
		return nil
	}
	id := claimRecordID(ceiling, c.ID().String())
	g.mu.Lock()
	ref, tracked := g.claims[id]
	g.mu.Unlock()
	if requestID == "" {
		requestID = ref.requestID
	}
	owner := ref.owner
	if !tracked {
		owner = security.PrincipalOf(ctx).Owner()
	}
	cj := claimJSON(ceiling, c)
	cj.RequestID = requestID
	err := g.put(ctx, id, grantRecord{Claim: &cj, Owner: owner})
	if err == nil {
		g.track(id, claimRef{ceiling: ceiling, id: c.ID(), requestID: requestID, owner: owner})
	}
	return err
}

// claimOwner returns the principal that took claim id of ceiling ("" when
// not tracked, or taken by nobody named).
func (g *grants) claimOwner(ceiling string, id ledger.ClaimID) string {
	if g == nil {
		return ""
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.claims[claimRecordID(ceiling, id.String())].owner
}

func (g *grants) track(recordID string, ref claimRef) {
	g.mu.Lock()
	g.claims[recordID] = ref
	g.mu.Unlock()
}

// claimFor returns the ID of the claim of ceiling granted for requestID and
// still recorded.
func (g *grants) claimFor(ceiling, requestID string) (ledger.ClaimID, bool) {
	if g == nil {
		return 0, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, ref := range g.claims {
		if ref.requestID == requestID && ref.ceiling == ceiling {
			return ref.id, true
		}
	}
	return 0, false
}

func (g *grants) deleteClaim(ceiling string, id ledger.ClaimID) {
	if g == nil {
		return
	}
	rid := claimRecordID(ceiling, id.String())
	g.mu.Lock()
	delete(g.claims, rid)
	g.mu.Unlock()
	_ = g.q.Delete(context.Background(), rid)
}

// sweepClaims deletes the records of claims that ended inside their ledger
// (expired unconfirmed, or retired by a figure): live reports whether a
// claim still counts.
func (g *grants) sweepClaims(live func(ceiling string, id ledger.ClaimID) bool) {
	if g == nil {
		return
	}
	g.mu.Lock()
	var ended []string
	for rid, ref := range g.claims {
		if !live(ref.ceiling, ref.id) {
			ended = append(ended, rid)
			delete(g.claims, rid)
		}
	}
	g.mu.Unlock()
	for _, rid := range ended {
		_ = g.q.Delete(context.Background(), rid)
	}
}

func (g *grants) close() {
	if g != nil {
		g.q.Close()
	}
}

// restoreReport counts what restoreGrants did.
type restoreReport struct {
	Permits, Claims, Expired, Dropped, Unreadable int
}

// restoreGrants re-creates the permits and claims recorded by an earlier
// daemon, under their IDs, so their holders' heartbeat, release, confirm and
// cancel keep working and the bytes and VMs they hold keep counting. Records
// of grants that lapsed, or of budgets and ceilings no longer configured, are
// deleted; an unreadable record is logged and left for an operator.
func (a *Arbiter) restoreGrants(ctx context.Context, ro pools.RestoreOptions) (restoreReport, error) {
	var rep restoreReport
	if a.grants == nil {
		return rep, nil
	}
	recs, err := a.grants.store.LoadGrants(ctx)
	if err != nil {
		return rep, err
	}
	now := a.opts.Clock.Now()
	for id, body := range recs {
		if id == probeID {
			_ = a.grants.store.DeleteGrant(ctx, id)
			continue
		}
		if strings.HasPrefix(id, LaunchRecordPrefix) {
			continue // a fleet's launch intent: the fleet reconciler resolves it
		}
		var rec grantRecord
		if err := json.Unmarshal(body, &rec); err != nil || (rec.Permit == nil) == (rec.Claim == nil) {
			a.log.Error("unreadable grant record: left in place, not restored", "record", id, "err", err)
			rep.Unreadable++
			continue
		}
		if rec.Permit != nil && ro.Spares(rec.Permit.ExpiresAt, now) {
			// As for pool leases: its holder had nobody to heartbeat to.
			rec.Permit.ExpiresAt = now.Add(ro.Grace)
		}
		outcome, err := a.restoreOne(now, rec, rec.Owner)
		if err != nil {
			a.log.Warn("grant record not restored; deleting it", "record", id, "err", err)
		}
		switch outcome {
		case restoredPermit:
			rep.Permits++
			continue
		case restoredClaim:
			rep.Claims++
			continue
		case lapsed:
			rep.Expired++
		case dropped:
			rep.Dropped++
		}
		if err := a.grants.store.DeleteGrant(ctx, id); err != nil {
			a.log.Warn("could not delete a lapsed grant record", "record", id, "err", err)
		}
	}
	return rep, nil
}

type restoreOutcome int

const (
	restoredPermit restoreOutcome = iota
	restoredClaim
	lapsed  // its TTL passed while no daemon ran
	dropped // its component is gone, or it could not be restored
)

func (a *Arbiter) restoreOne(now time.Time, rec grantRecord, owner string) (restoreOutcome, error) {
	if l := rec.Permit; l != nil {
		if !now.Before(l.ExpiresAt) {
			return lapsed, nil
		}
		pool, ok := a.comp.budgets.live(l.Budget)
		if !ok || !strings.HasPrefix(l.LeaseID, l.Budget+"~") {
			return dropped, fmt.Errorf("permit %s: budget %q is not configured", l.LeaseID, l.Budget)
		}
		perm, err := pool.Restore(permitRequest(*l))
		if err != nil {
			return dropped, fmt.Errorf("permit %s: %w", l.LeaseID, err)
		}
		a.permits.restore(*l, owner, perm.Release)
		return restoredPermit, nil
	}
	c := rec.Claim
	if c.ConfirmedAt.IsZero() && !now.Before(c.ExpiresAt) {
		return lapsed, nil
	}
	l, ok := a.comp.ceilings.find(c.Ceiling, true)
	if !ok {
		return dropped, fmt.Errorf("claim %s: vm_ceiling %q is not configured", c.ClaimID, c.Ceiling)
	}
	id, err := ledger.ParseClaimID(c.ClaimID)
	if err != nil {
		return dropped, err
	}
	_, err = l.Restore(ledger.RestoredClaim{ID: id, WorkerID: c.WorkerID, Count: c.Count,
		GrantedAt: c.GrantedAt, ExpiresAt: c.ExpiresAt, ConfirmedAt: c.ConfirmedAt})
	switch {
	case err == nil:
		a.grants.track(claimRecordID(c.Ceiling, c.ClaimID), claimRef{ceiling: c.Ceiling, id: id, requestID: c.RequestID, owner: owner})
		return restoredClaim, nil
	case errors.Is(err, ledger.ErrClaimEnded):
		return lapsed, nil
	}
	return dropped, fmt.Errorf("claim %s of vm_ceiling %q: %w", c.ClaimID, c.Ceiling, err)
}
