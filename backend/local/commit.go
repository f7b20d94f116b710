package local

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rpdhq/rpd/backend/internal/groupcommit"
	"github.com/rpdhq/rpd/internal/answer"
)

// Grant records (pool leases and the daemon's other grants: puts, which are
// grants and heartbeats, and deletes, which are releases) are written by
// group commit (package groupcommit): the writes of concurrent callers
// share one durable write, so a burst of N grants costs one sync instead
// of N. Within a batch the writes run in arrival order, and each caller
// returns once its write is durable, with its own outcome.
//
// A fenced write (Fence: the leader's) goes to the grant journal
// (journalwriter.go): one append and one fdatasync per run of fenced
// writes of an epoch; a stale one fails with backend.ErrFenced and is never
// counted. Unfenced writes share one BEGIN IMMEDIATE transaction committed
// with synchronous=FULL:
//   - a statement or the commit failing rolls the batch back and each write
//     is retried alone in its own transaction, so one bad record fails only
//     its own caller and a failing disk fails each caller with its error;
//   - a caller whose ctx ends before its write was taken gets ctx's error
//     with nothing written (see groupcommit.Queue.Do).

// maxBatch bounds the writes in one transaction (and so the latency a
// write waiting behind a large batch sees).
const maxBatch = 512

// deferDeletes is how long a queued delete (a release's, QueueDeleteLease)
// may wait for a grant or heartbeat to share its append (groupcommit's
// DeferGo): under load a delete then costs no write and sync of its own. A
// process killed meanwhile loses it, as any queued delete: the released
// lease stays counted until its TTL. Under the daemon's HTTP benchmark it
// took the syncs per pair from 0.6 to 0.5 and the pairs/s up by 8 %
// (docs/grant-path-measurements.md, "sixth session").
var deferDeletes = 5 * time.Millisecond // a var for tests

// recordWrite is one queued write: an unfenced statement, or a fenced
// journal record.
type recordWrite struct {
	verb  string // "put pool lease", ...: for errors
	id    string // the record's ID: for errors
	st    *stmt  // unfenced
	args  []any
	epoch int64 // 0: unfenced
	// flush: no record; syncs what lazy deletes left unsynced (fenced).
	flush bool
	// open, with flush: opens epoch's journal segment first if this
	// Backend writes none for it (PrepareJournal).
	open bool
	// rec is the journal record of a fenced write (epoch != 0), which goes
	// to the grant journal (journalwriter.go) instead of st.
	rec jrec
	// then, for a write queued without waiting (QueueDeleteLease), gets
	// its outcome on the writer goroutine.
	then func(error)
	// early is the answer of the request whose grant this is, sent by the
	// writer once the record is durable and counted (package answer).
	early *answer.Early
}

type recordOp = groupcommit.Op[recordWrite]

// writeRecord queues one unfenced write and waits for its outcome.
func (b *Backend) writeRecord(ctx context.Context, verb, id string, st *stmt, args ...any) error {
	return b.recordErr(verb, id, b.records.Do(ctx, recordWrite{verb: verb, id: id, st: st, args: args}))
}

// recordErr is the error a record write of verb on id returns: nil, or err
// naming them.
func (b *Backend) recordErr(verb, id string, err error) error {
	if errors.Is(err, groupcommit.ErrClosed) {
		err = errors.New("the backend is closed; open it again")
	}
	if err != nil {
		return fmt.Errorf("%s %s of stack %s in %s: %w", verb, id, b.stack, b.path, err)
	}
	return nil
}

// finishQueued tells a write queued without waiting its outcome (the group
// commit's writer goroutine runs it).
func (b *Backend) finishQueued(w recordWrite, err error) {
	if w.then != nil {
		w.then(b.recordErr(w.verb, w.id, err))
	}
}

// writeJournaled queues one fenced write for the grant journal and waits
// for its outcome.
func (b *Backend) writeJournaled(ctx context.Context, verb string, epoch int64, r jrec) error {
	return b.writeJournaledAnswer(ctx, verb, epoch, r, nil)
}

// writeJournaledAnswer is writeJournaled for a write that carries the
// answer of its request (package answer): the writer sends it as soon as
// the record is durable and counted. When ctx ends first, the answer is
// cancelled, unless it went out already: then the write succeeded, and
// so it is reported, so that no client holds a grant its caller rolls
// back.
func (b *Backend) writeJournaledAnswer(ctx context.Context, verb string, epoch int64, r jrec, early *answer.Early) error {
	if epoch == 0 {
		early.Cancel()
		return fmt.Errorf("%s %s of stack %s: a journaled write needs a leader epoch", verb, r.id, b.stack)
	}
	err := b.records.Do(ctx, recordWrite{verb: verb, id: r.id, epoch: epoch, rec: r, early: early})
	if err != nil && !early.Cancel() {
		err = nil
	}
	return b.recordErr(verb, r.id, err)
}

// writeAll queues ws (one verb, "delete pool lease" or "delete grant")
// under one lock and one wake-up of the writer, and waits for their
// outcomes: the failures joined, each group of IDs that failed alike
// named once with its error.
func (b *Backend) writeAll(ctx context.Context, verb string, ws []recordWrite) error {
	errs := b.records.DoAll(ctx, ws)
	if errs == nil {
		return nil
	}
	var failed []error
	for i := 0; i < len(errs); i++ {
		err := errs[i]
		if err == nil {
			continue
		}
		// The writes that failed with the same message (a closed backend,
		// a fenced epoch, an ended ctx) are named together.
		ids := []string{ws[i].id}
		for j := i + 1; j < len(errs); j++ {
			if errs[j] != nil && errs[j].Error() == err.Error() {
				ids = append(ids, ws[j].id)
				errs[j] = nil
			}
		}
		if errors.Is(err, groupcommit.ErrClosed) {
			err = errors.New("the backend is closed; open it again")
		}
		failed = append(failed, fmt.Errorf("%s %s of stack %s in %s: %w", verb, strings.Join(ids, ", "), b.stack, b.path, err))
	}
	return errors.Join(failed...)
}

// writeBufs recycles the recordWrite slices of DeleteLeases and
// DeleteGrants (DoAll copies each write: the slice is free once it
// returns).
var writeBufs = sync.Pool{New: func() any { return new([]recordWrite) }}

// deleteAll writes the deletes of ids that w makes, through writeAll.
func (b *Backend) deleteAll(ctx context.Context, verb string, ids []string, w func(id string) recordWrite) error {
	if len(ids) == 0 {
		return nil
	}
	p := writeBufs.Get().(*[]recordWrite)
	ws := (*p)[:0]
	for _, id := range ids {
		ws = append(ws, w(id))
	}
	err := b.writeAll(ctx, verb, ws)
	clear(ws)
	*p = ws[:0]
	writeBufs.Put(p)
	return err
}

// commitRecords is the group commit of a batch of record writes: runs of
// fenced writes of one epoch go to the grant journal, unfenced ones to
// SQLite, in arrival order.
func (b *Backend) commitRecords(batch []*recordOp) {
	defer sendAnswers(batch)
	for len(batch) > 0 {
		n := 1
		for n < len(batch) && batch[n].W.epoch == batch[0].W.epoch {
			n++
		}
		if e := batch[0].W.epoch; e != 0 {
			b.journalRun(batch[:n], e)
		} else {
			if b.journalPending() {
				// The journal's confirmed records go first, so that an
				// unfenced write is not overwritten by an older one.
				if err := b.drainJournal(context.Background()); err != nil {
					for _, op := range batch[:n] {
						op.Err = err
					}
					batch = batch[n:]
					continue
				}
			}
			b.commitSQLite(batch[:n])
		}
		batch = batch[n:]
	}
}

// sendAnswers sends the answers the writes of batch carry whose records
// are durable and counted (op.Err nil), before their callers are woken.
func sendAnswers(batch []*recordOp) {
	for _, op := range batch {
		if op.W.early != nil && op.Err == nil {
			op.W.early.Send()
		}
	}
}

// commitSQLite commits unfenced writes in one SQLite transaction.
func (b *Backend) commitSQLite(batch []*recordOp) {
	err := b.attemptRecords(batch)
	if err == nil {
		return
	}
	if len(batch) == 1 {
		batch[0].Err = err
		return
	}
	// Retry alone, so that a record whose statement fails does not fail
	// the others, and each caller learns its own outcome.
	for _, op := range batch {
		if err := b.attemptRecords([]*recordOp{op}); err != nil {
			op.Err = err
		}
	}
}

// attemptRecords runs ops (unfenced) in one transaction; a failure rolls
// back and is returned.
func (b *Backend) attemptRecords(ops []*recordOp) error {
	// No deadline: with a context that can end, the driver starts a
	// goroutine per statement to interrupt it (a fifth of the writer's
	// allocations under BenchmarkAcquireReleaseHTTP). A transaction waits
	// for another process's write at most busy_timeout (Options), and a
	// statement is not interruptible inside a blocked disk write anyway.
	ctx := context.Background()
	fail := func(err error) error {
		if len(ops) > 1 {
			return fmt.Errorf("a transaction of %d grant records: %w", len(ops), err)
		}
		return err
	}
	// Grants are acknowledged as durable, so their commits sync the WAL
	// (synchronous=FULL): a power loss cannot drop a grant a client was
	// told about (fenced ones are synced by the journal). Every other write keeps NORMAL (docs/backends.md says
	// why and what it costs). The level belongs to the connection and
	// cannot change inside a transaction: it is raised around this one, on
	// the write connection pinned meanwhile.
	conn, err := b.wdb.Conn(ctx)
	if err != nil {
		return fail(fmt.Errorf("take the write connection: %w", err))
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA synchronous = FULL"); err != nil {
		return fail(fmt.Errorf("set synchronous=FULL: %w", err))
	}
	defer func() {
		if _, err := conn.ExecContext(context.Background(), "PRAGMA synchronous = NORMAL"); err != nil {
			b.log.Warn("local backend: could not set synchronous=NORMAL back after a grant commit; writes stay fully synced", "path", b.path, "err", err)
		}
	}()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fail(fmt.Errorf("begin: %w", err))
	}
	for _, op := range ops {
		op.Err = nil
		w := &op.W
		if _, err := w.st.tx(ctx, tx).exec(ctx, w.args...); err != nil {
			_ = tx.Rollback()
			return fail(err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fail(fmt.Errorf("commit: %w", err))
	}
	return nil
}
