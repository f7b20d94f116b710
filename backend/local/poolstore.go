package local

import (
	"context"
	"fmt"

	"github.com/rpdhq/rpd/internal/answer"
	"github.com/rpdhq/rpd/runtime/pools"
)

// PoolStore persists the stack's pool leases.
type PoolStore struct {
	b     *Backend
	epoch int64 // 0: unfenced
}

// Fence returns the store whose writes succeed only while epoch is the
// stack's leader epoch (backend.Leader): they go to the grant journal of
// that epoch (journalwriter.go), durable when answered; once a takeover
// sealed it, a write fails with backend.ErrFenced and is never counted.
func (s *PoolStore) Fence(epoch int64) *PoolStore { return &PoolStore{b: s.b, epoch: epoch} }

// PutLease creates or replaces a record. Concurrent writes share one
// journal append and fdatasync, or (unfenced) one SQLite commit (see
// commit.go); PutLease returns once its own is durable. A fenced put (or
// CreateLease) carries the answer its request armed (internal/answer, a
// heartbeat's or an acquire's): the writer sends it once the record is
// durable and counted.
func (s *PoolStore) PutLease(ctx context.Context, rec pools.LeaseRecord) error {
	if rec.LeaseID == "" {
		return fmt.Errorf("put pool lease: empty LeaseID (pool %s, task %s)", rec.Pool, rec.TaskID)
	}
	if s.epoch == 0 {
		return s.b.writeRecord(ctx, "put pool lease", rec.LeaseID, &s.b.st.putLease,
			s.b.stack, rec.LeaseID, rec.Pool, rec.TaskID, rec.Priority, rec.Slots, nanos(rec.GrantedAt), nanos(rec.ExpiresAt), int64(rec.TTL), rec.Owner)
	}
	return s.b.writeJournaledAnswer(ctx, "put pool lease", s.epoch, jrec{kind: kindPutLease, id: rec.LeaseID, lease: rec}, answer.Take(ctx))
}

// CreateLease is PutLease for a lease granted just now (pools.CreateLease):
// no record of its ID was written before, so that when its delete reaches
// the applier in the same batch, neither is written to SQLite (a fenced
// store's journal records are written as PutLease's).
func (s *PoolStore) CreateLease(ctx context.Context, rec pools.LeaseRecord) error {
	if rec.LeaseID == "" || s.epoch == 0 {
		return s.PutLease(ctx, rec)
	}
	return s.b.writeJournaledAnswer(ctx, "put pool lease", s.epoch, jrec{kind: kindPutLease, id: rec.LeaseID, lease: rec, created: true}, answer.Take(ctx))
}

// DeleteLease removes a record; a missing one is not an error. It is
// written as PutLease is, except that a fenced delete is not synced before
// it returns (lazy deletes, journalwriter.go): it is in the journal, read
// by every later read and fenced as PutLease, and made durable by the next
// grant's fdatasync or within about 0.1 s; a power loss before that keeps
// the record until its TTL (unless the applier's look-ahead left its
// create out of SQLite: then the record is gone, as its release said).
func (s *PoolStore) DeleteLease(ctx context.Context, leaseID string) error {
	if s.epoch == 0 {
		return s.b.writeRecord(ctx, "delete pool lease", leaseID, &s.b.st.deleteLease, s.b.stack, leaseID)
	}
	return s.b.writeJournaled(ctx, "delete pool lease", s.epoch, jrec{kind: kindDeleteLease, id: leaseID})
}

// QueueDeleteLease queues DeleteLease(leaseID) for the group commit and
// returns at once, so that a release does not wait for its record: the
// delete is written after every write of this process queued before it,
// and done (nil: nobody is told) gets what DeleteLease would have
// returned, on the group commit's writer goroutine (it must be quick and
// must not write records). It always queues: true.
func (s *PoolStore) QueueDeleteLease(leaseID string, done func(error)) bool {
	w := recordWrite{verb: "delete pool lease", id: leaseID, then: done}
	if s.epoch == 0 {
		w.st, w.args = &s.b.st.deleteLease, []any{s.b.stack, leaseID}
	} else {
		w.epoch, w.rec = s.epoch, jrec{kind: kindDeleteLease, id: leaseID}
	}
	s.b.records.Go(w, s.b.queued)
	return true
}

// DeleteLeases removes the records ids, as DeleteLease each, queued for
// the group commit at once (one lock and one wake-up of its writer instead
// of one per delete). It returns once every delete was written, with the
// failures joined, naming their IDs; a fenced store whose epoch a takeover
// ended fails them with backend.ErrFenced.
func (s *PoolStore) DeleteLeases(ctx context.Context, ids []string) error {
	if s.epoch == 0 {
		return s.b.deleteAll(ctx, "delete pool leases", ids, func(id string) recordWrite {
			return recordWrite{verb: "delete pool lease", id: id, st: &s.b.st.deleteLease, args: []any{s.b.stack, id}}
		})
	}
	return s.b.deleteAll(ctx, "delete pool leases", ids, func(id string) recordWrite {
		return recordWrite{verb: "delete pool lease", id: id, epoch: s.epoch, rec: jrec{kind: kindDeleteLease, id: id}}
	})
}

// LoadLeases returns every record of the stack, ordered by lease ID: the
// SQLite table with the grant journal's records not applied to it yet.
func (s *PoolStore) LoadLeases(ctx context.Context) ([]pools.LeaseRecord, error) {
	recs, err := s.b.loadRecords(ctx, true, false)
	if err != nil {
		return nil, fmt.Errorf("load pool leases of stack %s from %s: %w", s.b.stack, s.b.path, err)
	}
	return sortedLeases(recs.leases), nil
}
