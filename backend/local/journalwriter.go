package local

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/internal/groupcommit"
	"github.com/rpdhq/rpd/runtime/pools"
)

// Fenced grant writes (a leader's grants, heartbeats and releases) are
// durable once appended to the grant journal and fdatasync'ed, not once
// SQLite committed them: one small append and one flush per group-commit
// batch instead of a SQLite commit with synchronous=FULL. SQLite is fed
// from the journal behind the answer, at synchronous=NORMAL, by an applier
// goroutine, and every read of the records (LoadLeases, LoadGrants) reads
// the SQLite tables plus the journal records not applied yet, so a read
// sees every write already answered.
//
// The table journals lists the segments of each stack: (epoch, seq),
// applied (the offset up to which its records are in the SQLite tables, in
// the same transaction that applied them) and sealed:
//
//	-1  open: its writer (the leader of epoch) appends to it;
//	-2  seal pending: a takeover (AcquireLeader with a new epoch) marked it
//	    in the transaction that moved the epoch; its length is not fixed yet;
//	>=0 sealed at that length: records past it are never read.
//
// Fencing. A segment is created only in a transaction that finds its epoch
// to be the stack's leader epoch, and epochs only grow, so a writer whose
// epoch was never current writes nothing. A takeover marks the older
// epochs' open segments seal pending and sets the seal flag in their
// headers; whoever fixes a seal sets the flag before reading the segment's
// end. After each batch's fdatasync the writer reads its flag (one pread):
// unset means the batch's bytes were in the file before anyone looked for
// the seal, so every seal includes them: the batch succeeds. Set, it reads
// the leader row and its segment's row: a seal still pending it fixes
// (synced, synchronous=FULL) at the end of its last successful batch; then
// each record succeeds exactly when it lies within the seal, which someone
// else may have fixed at the end of the whole records (a reader of a stale
// segment, another process), and what lies past the seal is never read. So
// a record is counted if and only if its write was answered as a success
// (or never answered: the process died first). docs/backends.md has the
// argument.
//
// Compaction. When a batch would not fit in the segment's preallocation,
// the writer seals its segment at its end and starts the next one (seq+1).
// The applier applies sealed segments to their end and then, in a
// synchronous=FULL transaction (which syncs the WAL and so every NORMAL
// commit before it), marks their rows folded and removes their files. The
// rows stay: a stale writer that wakes up later still reads its seal.

// journal is a Backend's grant journal state.
type journal struct {
	// mu is held by the writer from its post-sync read of the seal flag to
	// the update of confirmed, and by a resolver from setting the flag to
	// reading confirmed, so that a seal this process fixes is never short
	// of a batch it answered.
	mu        sync.Mutex
	own       segKey // the segment this process writes; zero: none
	confirmed int64  // its end of confirmed records
	// ownSize and ownOpened are own's preallocated size and when it was
	// opened: the spare's size follows how fast own fills.
	ownSize   int64
	ownOpened time.Time
	// pending is own's confirmed records not yet handed to the applier,
	// [pendStart, confirmed) of the segment, so that the applier applies
	// them without reading the file back.
	pending   []pendRec
	pendStart int64
	// holdSeg and holdTo are where pending ended when the applier last
	// took records: its next own apply takes the records up to there and
	// holds the ones confirmed since for the apply after it (applyHeld),
	// so that a lease released within an apply interval of its grant
	// costs nothing in SQLite even when its grant came just before an
	// apply (applyRecords' look-ahead). Under mu.
	holdSeg segKey
	holdTo  int64
	// applyMu serializes applyJournal (the applier's ticks, drainJournal
	// on the group commit's writer) and guards the buffers it reuses, so
	// that applying allocates nothing per record.
	applyMu sync.Mutex
	recs    []jrec   // the records taken from pending
	buf     applyBuf // applyRecords'
	// dbSeg and dbApplied are own's applied offset in SQLite as this
	// process last committed it (dbSeg zero: not known). skipEnd is where
	// the last apply skipped to: when it is pendStart and dbApplied is
	// behind it, the records in between were taken without a transaction
	// (skipApply) and the next transaction records them with its own.
	// lagN and lagSince bound that lag.
	dbSeg     segKey
	dbApplied int64
	skipEnd   int64
	lagN      int
	lagSince  time.Time
	// lagged is whether that lag stands (for journalPending, read
	// without applyMu): a drain records it.
	lagged atomic.Bool
	// spare is the next segment's file, prepared by the applier.
	spare *segWriter
	// spareMu is held while a spare is created or taken, and by the
	// writer while it opens a segment, until own names it.
	spareMu sync.Mutex

	// writer goroutine only
	w          *segWriter
	staleEpoch int64 // epochs up to this one are known fenced here

	paused atomic.Bool // tests: the applier applies nothing until Close
	// noDirect (tests) makes new segment writers append buffered, as
	// where the file system refuses O_DIRECT.
	noDirect bool
	// prio raises the thread of a synced append (syncprio_linux.go).
	prio *syncPriority

	// unsynced is when lazy deletes (journalRun) first left bytes of the
	// writer's segment unsynced (UnixNano), 0 when none are; set and
	// cleared by the writer, read by the applier to flush them.
	unsynced atomic.Int64
	// syncs counts the writer's batches that needed a sync (tests): an
	// fdatasync, or a direct write with RWF_DSYNC that had to be one.
	syncs atomic.Int64

	wake     chan struct{} // capacity 1
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

type segKey struct{ epoch, seq int64 }

// pendRec is a confirmed record and the offset just past it.
type pendRec struct {
	rec jrec
	end int64
}

type segWriter struct {
	segKey
	f         *os.File
	end, size int64
	opened    time.Time // when this process opened it for writing
	buf       []byte
	ends      []int64
	// d appends the records with direct I/O, opened at the first append;
	// buffered: the file system refused it, so appends are buffered
	// writes and fdatasync.
	d        *directAppender
	buffered bool
}

// close closes w's files.
func (w *segWriter) close() {
	if w.d != nil {
		w.d.close()
	}
	w.f.Close()
}

// appendRecords writes w.buf at w.end, durable on return when sync: one
// direct write with RWF_DSYNC where the file system takes O_DIRECT (durable
// whether sync or not), else a buffered write and, when sync, an
// fdatasync. It reports whether the bytes are durable.
func (b *Backend) appendRecords(w *segWriter, sync bool) (durable bool, err error) {
	if w.d == nil && !w.buffered {
		if b.j.noDirect {
			err = errors.New("turned off")
		} else {
			w.d, err = openDirect(w.f.Name(), w.f, w.end, b.j.prio)
		}
		if err != nil {
			b.log.Debug("local backend: appending to the grant journal segment buffered, with fdatasync", "segment", w.f.Name(), "reason", err)
			w.d, w.buffered = nil, true
		}
	}
	if w.d != nil {
		durable, err = w.d.append(w.buf, w.end, sync)
		if !errors.Is(err, errDirectRefused) {
			if err != nil {
				return false, fmt.Errorf("append to the grant journal %s: %w", w.f.Name(), err)
			}
			return durable, nil
		}
		b.log.Warn("local backend: the file system refused a direct append to the grant journal; appending buffered, with fdatasync", "segment", w.f.Name(), "err", err)
		w.d.close()
		w.d, w.buffered = nil, true
	}
	if _, err := w.f.WriteAt(w.buf, w.end); err != nil {
		return false, fmt.Errorf("append to the grant journal %s: %w", w.f.Name(), err)
	}
	if sync {
		raised := b.j.prio.raise()
		err := datasync(w.f)
		b.j.prio.lower(raised)
		if err != nil {
			return false, fmt.Errorf("fdatasync the grant journal %s: %w", w.f.Name(), err)
		}
	}
	return sync, nil
}

// segRow is a row of journals.
type segRow struct {
	segKey
	applied, sealed int64
}

const (
	sealOpen    = -1
	sealPending = -2
)

// The applier applies the journal every applyInterval, or sooner once
// applyEvery records are pending: the fewer and larger its SQLite
// transactions, the less CPU they take from the grants (a lease granted
// and released between two applies costs nothing: applyRecords). Each of
// its applies takes the records confirmed before the one before it and
// holds the newer ones as a look-ahead (applyHeld), so that a lease
// released within an interval of its grant costs nothing either, and an
// apply that would write nothing runs no transaction (skipApply).
//
// Lazy deletes left unsynced are synced once they waited lazySync (checked
// at the applier's ticks, so within lazySync + applyInterval).
const (
	lazySync      = 50 * time.Millisecond
	applyInterval = 50 * time.Millisecond
	applyEvery    = 2048
	// orphanCheck is how often the applier looks for orphaned segment
	// files (orphans.go); the first look is at its first tick.
	orphanCheck = time.Minute
	// maxApply bounds the records of one applying transaction, so that
	// the applier holds the file's write lock briefly even when behind:
	// as many as wake it (applyEvery), so that a tick's records are one
	// transaction. Each transaction costs about 0.4 ms whatever its size
	// (BEGIN, the segment rows, COMMIT), and a lease granted in one and
	// released in the next costs a put and a delete where one transaction
	// would have elided both: a tick of BenchmarkAcquireReleaseHTTP's load
	// (BenchmarkApplyTick) took 3.5-4.8 ms as four transactions of 512
	// records, 1.6-2.0 ms as one.
	maxApply = applyEvery
	// applyPace spaces the transactions of an applier that has more to
	// apply than one takes (a tick's records over maxApply, or a
	// backlog): each waits applyPace times as long as the one before it
	// took, so that catching up takes a quarter of a core at a time,
	// never a whole core for milliseconds. Back to back, a 50 ms tick's
	// records (four transactions of 0.5 ms under
	// BenchmarkAcquireReleaseHTTP) held one of two cores for 2 ms, and the
	// grants in flight then were the run's slowest: 40-65 % of the pairs
	// over its p99 overlapped an apply, 2-3 % of the median ones. Paced,
	// the applier still keeps up with four times what it is asked there;
	// a backlog over applyBacklog records (a disk too slow for a paced
	// applier) is applied back to back, as fast as it can be.
	applyPace    = 3
	applyBacklog = 4 * applyEvery
	// maxApplyLag bounds how long the applied offset stays behind records
	// applied without a transaction (skipApply).
	maxApplyLag = time.Second
)

func (b *Backend) startJournal() {
	b.j.wake = make(chan struct{}, 1)
	b.j.stop = make(chan struct{})
	b.j.done = make(chan struct{})
	go b.applier()
}

// stopJournal applies what is confirmed and stops the applier; it runs
// after the group commit's queue closed.
func (b *Backend) stopJournal() {
	if b.j.stop == nil {
		return
	}
	b.j.stopOnce.Do(func() { close(b.j.stop) })
	<-b.j.done
	if w := b.j.w; w != nil {
		if err := b.syncLazy(w); err != nil {
			b.log.Warn("local backend: could not sync the grant journal at close; deletes appended since the last sync may be lost to a power failure (their records then stay counted until their TTL)", "path", b.path, "err", err)
		}
		w.close()
		b.j.w = nil
	}
	if sp := b.takeSpare(segKey{}); sp != nil {
		sp.close()
	}
}

func (b *Backend) wakeApplier() {
	select {
	case b.j.wake <- struct{}{}:
	default:
	}
}

// applier applies confirmed journal records to the SQLite tables behind
// the answers, and folds sealed segments.
func (b *Backend) applier() {
	defer close(b.j.done)
	tick := time.NewTicker(applyInterval)
	defer tick.Stop()
	var failed time.Time // the last failure: retried a second later at the earliest
	var orphansChecked time.Time
	var paced time.Time // the next apply on a wake-up starts then at the earliest (applyPace)
	for ticks := 1; ; ticks++ {
		select {
		case <-b.j.wake:
			if b.j.paused.Load() || time.Since(failed) < time.Second {
				continue
			}
			if wait := time.Until(paced); wait > 0 && !b.waitApplier(wait) {
				continue // stopped: the final apply follows
			}
		case <-tick.C:
			if t := b.j.unsynced.Load(); t != 0 && time.Since(time.Unix(0, t)) >= lazySync && !b.j.paused.Load() {
				b.flushLazy()
			}
			if time.Since(orphansChecked) >= orphanCheck && !b.j.paused.Load() {
				orphansChecked = time.Now()
				if n, err := b.removeOrphans(context.Background()); err != nil {
					b.log.Warn("local backend: could not look for orphaned grant journal segments; retried in a minute", "path", b.path, "err", err)
				} else if n > 0 {
					b.log.Info("local backend: removed orphaned grant journal segments (a spare never taken, or a folded segment's file, left by a stop)", "path", b.path, "removed", n)
				}
			}
			b.j.mu.Lock()
			idle := len(b.j.pending) == 0
			b.j.mu.Unlock()
			if (idle && ticks%20 != 0) || b.j.paused.Load() || time.Since(failed) < time.Second {
				continue // nothing of ours to apply: look for others' sealed segments every second
			}
		case <-b.j.stop:
			if err := b.applyJournal(context.Background()); err != nil {
				b.log.Warn("local backend: applying the grant journal at close failed; the next open replays it", "path", b.path, "err", err)
			}
			return
		}
		b.prepareSpare()
		start := time.Now()
		err := b.applyHeld(context.Background())
		end := time.Now()
		paced = end.Add(applyWait(end.Sub(start), b.pendingRecords()))
		if err != nil {
			failed = end
			b.log.Warn("local backend: applying the grant journal to SQLite failed; the records stay in the journal (reads see them) and it is retried in a second", "path", b.path, "err", err)
		} else {
			failed = time.Time{}
		}
	}
}

// applyWait is how long the applier waits, when woken, before its next
// transaction: the last one lasted took and left pending records to apply
// (applyPace, applyBacklog).
func applyWait(took time.Duration, pending int) time.Duration {
	if pending > applyBacklog {
		return 0
	}
	return applyPace * took
}

// pendingRecords is how many confirmed records wait for the applier.
func (b *Backend) pendingRecords() int {
	b.j.mu.Lock()
	defer b.j.mu.Unlock()
	return len(b.j.pending)
}

// waitApplier sleeps d on the applier's goroutine: false when Close
// stopped it first.
func (b *Backend) waitApplier(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-b.j.stop:
		return false
	}
}

// encode lays ops out as records appended at w.end: w.buf the bytes, w.ends
// where each record ends (a record carries its own offset; a flush, which
// has none, ends where the record before it does).
func (w *segWriter) encode(ops []*recordOp) {
	w.buf, w.ends = w.buf[:0], w.ends[:0]
	for _, op := range ops {
		if !op.W.flush {
			w.buf = appendRecord(w.buf, w.end+int64(len(w.buf)), &op.W.rec)
		}
		w.ends = append(w.ends, w.end+int64(len(w.buf)))
	}
}

// hasRecord reports whether ops hold a record (not only flushes).
func hasRecord(ops []*recordOp) bool {
	for _, op := range ops {
		if !op.W.flush {
			return true
		}
	}
	return false
}

// syncLazy fdatasyncs w's segment when lazy deletes left bytes unsynced in
// it (writer goroutine, or after it stopped).
func (b *Backend) syncLazy(w *segWriter) error {
	if b.j.unsynced.Load() == 0 {
		return nil
	}
	b.j.syncs.Add(1)
	if err := datasync(w.f); err != nil {
		return fmt.Errorf("fdatasync the grant journal %s (the deletes appended since the last sync may be lost to a power failure; their records then stay counted until their TTL): %w", w.f.Name(), err)
	}
	b.j.unsynced.Store(0)
	return nil
}

// PrepareJournal opens the grant journal segment that the leader of epoch
// appends to, on the group commit's writer: a new one is created and
// preallocated (firstSegmentSize: 32 MiB of zeros written and synced,
// about 20 ms on this repository's test machine), or the one a stopped
// process of the same epoch left is recovered. A daemon calls it once it
// leads, so that its first grants do not wait for that behind the first of
// them. It fails with backend.ErrFenced when epoch no longer leads the
// stack.
func (b *Backend) PrepareJournal(ctx context.Context, epoch int64) error {
	if err := b.records.Do(ctx, recordWrite{verb: "open the grant journal", epoch: epoch, flush: true, open: true}); err != nil {
		return fmt.Errorf("local backend: open the grant journal of leader epoch %d in %s: %w", epoch, b.path, err)
	}
	return nil
}

// flushLazy makes the lazy deletes appended so far durable, through the
// group commit (so on the writer goroutine): the applier calls it once they
// waited lazySync.
func (b *Backend) flushLazy() {
	b.j.mu.Lock()
	epoch := b.j.own.epoch
	b.j.mu.Unlock()
	if epoch == 0 {
		return // no segment of ours: whoever dropped it synced it
	}
	err := b.records.Do(context.Background(), recordWrite{verb: "flush", epoch: epoch, flush: true})
	if err != nil && !errors.Is(err, groupcommit.ErrClosed) && !errors.Is(err, backend.ErrFenced) {
		b.log.Warn("local backend: could not sync the grant journal's deletes; the segment is sealed and a new one started", "path", b.path, "err", err)
	}
}

// needsSync reports whether ops hold a record that must be synced before
// its caller returns: a put (a grant or heartbeat). A run of deletes only
// (and flushes) is appended without its own fdatasync (lazy deletes, see
// journalRun).
func needsSync(ops []*recordOp) bool {
	for _, op := range ops {
		if !op.W.flush && op.W.rec.kind != kindDeleteLease && op.W.rec.kind != kindDeleteGrant {
			return true
		}
	}
	return false
}

// journalRun writes ops, all fenced with epoch, to the journal: one append,
// one fdatasync, one read of the seal flag.
//
// Lazy deletes: a run made only of deletes (releases) is appended and its
// seal flag read as any other, so its callers get the same answer (and
// ErrFenced past a seal) and a read sees the delete at once, but it is not
// fdatasync'ed: it becomes durable with the next batch's fdatasync (which
// flushes every byte written to the file before it, so a synced grant never
// lies behind an unsynced record), or with the applier's lazy flush
// (lazySync), a rotation, or Close. A process crash loses nothing (the bytes
// are in the page cache); a power loss may lose the deletes of the last
// lazySync, which keeps their records counted until their TTL: the accepted
// cost of a release that answers before its record's delete
// (docs/backends.md, "Lazy deletes"). That is a buffered segment's: one
// appended with direct I/O and RWF_DSYNC (append_linux.go) makes every
// append durable, so its deletes are never left unsynced.
func (b *Backend) journalRun(ops []*recordOp, epoch int64) {
	fail := func(err error) {
		for _, op := range ops {
			op.Err = err
		}
	}
	if !hasRecord(ops) {
		if slices.ContainsFunc(ops, func(op *recordOp) bool { return op.W.open }) {
			if _, err := b.segmentFor(epoch); err != nil {
				fail(err)
				return
			}
		}
		// Flushes only: sync what lazy deletes left unsynced.
		if w := b.j.w; w != nil {
			if err := b.syncLazy(w); err != nil {
				b.retire(w, err)
				fail(err)
			}
		}
		return
	}
	w, err := b.segmentFor(epoch)
	if err != nil {
		fail(err)
		return
	}
	w.encode(ops)
	if w.end > 0 && w.end+int64(len(w.buf)) > w.size {
		if w, err = b.rotate(w); err != nil {
			fail(err)
			return
		}
		w.encode(ops) // the offsets are the new segment's
	}
	sync := needsSync(ops)
	if sync {
		b.j.syncs.Add(1)
	}
	durable, err := b.appendRecords(w, sync)
	if err != nil {
		b.retire(w, err)
		fail(fmt.Errorf("%w (the records are not counted)", err))
		return
	}
	if sync {
		b.j.unsynced.Store(0)
	} else if !durable && b.j.unsynced.Load() == 0 {
		b.j.unsynced.Store(time.Now().UnixNano())
	}
	newEnd := w.ends[len(w.ends)-1]
	w.end = newEnd

	b.j.mu.Lock()
	var cur, sealed int64
	flagged, err := sealFlag(w.f)
	if err == nil && flagged {
		// A takeover may have happened: the leader row and the seal tell.
		err = b.st.journalCheck.queryRow(context.Background(), b.stack, w.epoch, w.seq).Scan(&cur, &sealed)
	} else if err == nil {
		cur, sealed = w.epoch, sealOpen
	}
	if err == nil && cur == w.epoch && sealed == sealOpen {
		if len(b.j.pending) == 0 {
			b.j.pendStart = b.j.confirmed
		}
		for i, op := range ops {
			if !op.W.flush {
				b.j.pending = append(b.j.pending, pendRec{op.W.rec, w.ends[i]})
			}
		}
		b.j.confirmed = newEnd
		// Wake the applier once applyEvery records are ready for it: the
		// ones its hold keeps back do not count, unless a backlog is
		// building (it then applies everything).
		n := len(b.j.pending)
		wake := n >= applyBacklog || n >= applyEvery &&
			(b.j.holdSeg != b.j.own || b.j.pending[applyEvery-1].end <= b.j.holdTo)
		b.j.mu.Unlock()
		if wake {
			b.wakeApplier()
		}
		return
	}
	// A takeover (or a failed read): the seal decides.
	if err == nil {
		if err = b.syncLazy(w); err == nil {
			sealed, err = b.sealOwn(w, b.j.confirmed)
		}
	}
	b.j.mu.Unlock()
	if err != nil {
		// The seal is not fixed: the records may still be counted by a
		// reader that fixes it at the end of the data.
		b.retire(w, err)
		fail(fmt.Errorf("check the leader epoch after a grant journal write (the records may or may not be kept): %w", err))
		return
	}
	b.dropWriter(w)
	for i, op := range ops {
		if w.ends[i] > sealed {
			op.Err = fmt.Errorf("written under leader epoch %d, the stack's is %d (the takeover sealed the journal at %d): %w", w.epoch, cur, sealed, backend.ErrFenced)
		}
	}
	b.wakeApplier()
}

// sealOwn fixes the seal of w's segment at end unless it is fixed already
// (synchronous=FULL), and returns the seal. b.j.mu is held.
func (b *Backend) sealOwn(w *segWriter, end int64) (int64, error) {
	var sealed int64
	err := b.fullTx(context.Background(), func(tx *sql.Tx) error {
		if _, err := tx.Exec(`UPDATE journals SET sealed = ? WHERE stack = ? AND epoch = ? AND seq = ? AND sealed < 0`, end, b.stack, w.epoch, w.seq); err != nil {
			return err
		}
		return tx.QueryRow(`SELECT sealed FROM journals WHERE stack = ? AND epoch = ? AND seq = ?`, b.stack, w.epoch, w.seq).Scan(&sealed)
	})
	if err != nil {
		return 0, fmt.Errorf("seal the grant journal segment %d.%d of stack %s in %s: %w", w.epoch, w.seq, b.stack, b.path, err)
	}
	return sealed, nil
}

// dropWriter forgets w once its segment is sealed: epoch w.epoch writes no
// more here.
func (b *Backend) dropWriter(w *segWriter) {
	if err := b.syncLazy(w); err != nil {
		b.log.Warn("local backend: could not sync a sealed grant journal segment; deletes appended to it may be lost to a power failure (their records then stay counted until their TTL)", "path", b.path, "err", err)
		b.j.unsynced.Store(0)
	}
	w.close()
	b.j.w = nil
	b.j.staleEpoch = max(b.j.staleEpoch, w.epoch)
	b.j.mu.Lock()
	b.j.own, b.j.pending = segKey{}, nil
	b.j.mu.Unlock()
}

// retire stops writing to w after a failure: its segment is sealed at the
// last confirmed record, so a record whose write failed is never counted;
// the next write opens a new segment.
func (b *Backend) retire(w *segWriter, cause error) {
	b.log.Error("local backend: the grant journal failed; sealing its segment at the last answered record and starting a new one", "path", b.path, "segment", w.f.Name(), "err", cause)
	b.j.mu.Lock()
	_, err := b.sealOwn(w, b.j.confirmed)
	b.j.mu.Unlock()
	if err != nil {
		b.log.Error("local backend: could not seal the failed grant journal segment; a reader seals it at the end of its whole records", "path", b.path, "err", err)
	}
	w.close()
	b.j.w = nil
	b.j.unsynced.Store(0) // what a failed sync left is lost or not: only deletes
	b.j.mu.Lock()
	b.j.own, b.j.pending = segKey{}, nil
	b.j.mu.Unlock()
}

// segmentFor returns the writer of epoch's segment, opening (or creating)
// it when none is open: only while epoch is the stack's leader epoch.
func (b *Backend) segmentFor(epoch int64) (*segWriter, error) {
	if w := b.j.w; w != nil && w.epoch == epoch {
		return w, nil
	}
	if epoch <= b.j.staleEpoch || (b.j.w != nil && b.j.w.epoch > epoch) {
		var cur int64
		if err := b.rdb.QueryRow(`SELECT coalesce((SELECT epoch FROM leaders WHERE stack = ?), 0)`, b.stack).Scan(&cur); err != nil {
			return nil, fmt.Errorf("written under leader epoch %d, which a takeover ended (the current one could not be read: %v): %w", epoch, err, backend.ErrFenced)
		}
		return nil, fmt.Errorf("written under leader epoch %d, the stack's is %d: %w", epoch, cur, backend.ErrFenced)
	}
	if w := b.j.w; w != nil {
		// A newer epoch leads here now: the old one's segment is sealed
		// at its last answered record, synced.
		if err := b.syncLazy(w); err != nil {
			return nil, err
		}
		b.j.mu.Lock()
		_, err := b.sealOwn(w, b.j.confirmed)
		b.j.mu.Unlock()
		if err != nil {
			return nil, err
		}
		b.dropWriter(w)
	}
	return b.openSegment(epoch, nil)
}

// rotate seals w at its end and opens the next segment of its epoch.
func (b *Backend) rotate(w *segWriter) (*segWriter, error) {
	// The seal covers synced bytes only: lazy deletes are synced first.
	if err := b.syncLazy(w); err != nil {
		b.retire(w, err)
		return nil, err
	}
	nw, err := b.openSegment(w.epoch, w)
	if err != nil {
		if errors.Is(err, backend.ErrFenced) {
			b.dropWriter(w)
		}
		return nil, err
	}
	w.close()
	b.wakeApplier()
	return nw, nil
}

// openSegment opens the segment epoch writes to, in one synchronous=FULL
// transaction that finds epoch to be the leader epoch: an open segment of
// epoch that no writer of this Backend holds (a process of the same epoch
// that stopped) is recovered (its torn tail zeroed), else a new one is
// created. prev, when set, is sealed at its end in the same transaction.
func (b *Backend) openSegment(epoch int64, prev *segWriter) (*segWriter, error) {
	// spareMu is held until own names the new segment: the applier's
	// prepareSpare, which creates the file of own.seq+1, must not take the
	// segment just opened (the spare it prepared, or one created here) for
	// the next one and recreate it under the writer.
	b.j.spareMu.Lock()
	defer b.j.spareMu.Unlock()
	var w *segWriter
	err := b.fullTx(context.Background(), func(tx *sql.Tx) error {
		var cur int64
		if err := tx.QueryRow(`SELECT coalesce((SELECT epoch FROM leaders WHERE stack = ?), 0)`, b.stack).Scan(&cur); err != nil {
			return fmt.Errorf("read the leader epoch: %w", err)
		}
		if prev != nil {
			if _, err := tx.Exec(`UPDATE journals SET sealed = ? WHERE stack = ? AND epoch = ? AND seq = ? AND sealed < 0`, prev.end, b.stack, prev.epoch, prev.seq); err != nil {
				return err
			}
		}
		if cur != epoch {
			return fmt.Errorf("written under leader epoch %d, the stack's is %d: %w", epoch, cur, backend.ErrFenced)
		}
		var open segRow
		err := tx.QueryRow(`SELECT seq, applied FROM journals WHERE stack = ? AND epoch = ? AND sealed = -1 ORDER BY seq DESC LIMIT 1`, b.stack, epoch).Scan(&open.seq, &open.applied)
		switch {
		case err == nil && prev == nil:
			w, err = b.recoverSegment(epoch, open.seq, open.applied)
			return err
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return err
		}
		err = nil
		var seq int64
		if err := tx.QueryRow(`SELECT coalesce(max(seq) + 1, 0) FROM journals WHERE stack = ? AND epoch = ?`, b.stack, epoch).Scan(&seq); err != nil {
			return err
		}
		if w = b.takeSpare(segKey{epoch, seq}); w == nil {
			size := firstSegmentSize
			if prev != nil {
				size = nextSegmentSize(prev.size, time.Since(prev.opened))
			}
			w, err = b.createSegment(epoch, seq, size, false)
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(`INSERT INTO journals (stack, epoch, seq, applied, sealed) VALUES (?, ?, ?, ?, -1)`, b.stack, epoch, seq, headerSize); err != nil {
			w.close()
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("open the grant journal of stack %s, epoch %d, in %s: %w", b.stack, epoch, journalDir(b.path), err)
	}
	b.j.w = w
	b.j.mu.Lock()
	w.opened = time.Now()
	b.j.own, b.j.confirmed, b.j.pending = w.segKey, w.end, nil
	b.j.ownSize, b.j.ownOpened = w.size, w.opened
	b.j.mu.Unlock()
	return w, nil
}

// takeSpare returns the spare segment the applier prepared when it is k,
// else nil (a spare of another key is discarded).
func (b *Backend) takeSpare(k segKey) *segWriter {
	b.j.mu.Lock()
	sp := b.j.spare
	b.j.spare = nil
	b.j.mu.Unlock()
	if sp == nil {
		return nil
	}
	if sp.segKey == k {
		return sp
	}
	sp.close()
	_ = os.Remove(sp.f.Name())
	return nil
}

// prepareSpare creates, off the writer's path, the file of the segment the
// writer rotates to next, once its segment is half full: preallocating a
// segment (8 to 64 MiB) and syncing it takes tens to hundreds of
// milliseconds that grants would wait. Its size is nextSegmentSize of the
// time own took to fill its first half, doubled.
func (b *Backend) prepareSpare() {
	b.j.mu.Lock()
	own, confirmed, has := b.j.own, b.j.confirmed, b.j.spare != nil
	ownSize, ownOpened := b.j.ownSize, b.j.ownOpened
	b.j.mu.Unlock()
	if own == (segKey{}) || has || confirmed < ownSize/2 {
		return
	}
	size := nextSegmentSize(ownSize, 2*time.Since(ownOpened))
	k := segKey{own.epoch, own.seq + 1}
	b.j.spareMu.Lock()
	defer b.j.spareMu.Unlock()
	b.j.mu.Lock()
	stale := b.j.own != own || b.j.spare != nil
	b.j.mu.Unlock()
	if stale {
		return
	}
	sp, err := b.createSegment(k.epoch, k.seq, size, true)
	if err != nil {
		b.log.Warn("local backend: could not prepare the next grant journal segment; the writer creates it when it rotates", "path", b.path, "err", err)
		return
	}
	b.j.mu.Lock()
	if b.j.spare == nil && b.j.own == own {
		b.j.spare, sp = sp, nil
	}
	b.j.mu.Unlock()
	if sp != nil {
		sp.close()
	}
}

// createSegment creates and preallocates a segment file, synced. paced
// (the applier's spare) writes and syncs the zeros a chunk at a time with
// a pause after each: 8 MiB written and flushed at once held the disk for
// 9-13 ms, and the grants' fdatasync behind it (BenchmarkAcquireReleaseHTTP
// saw one such stall per rotation in its p99). The writer, which waits
// for its segment, does not pace.
func (b *Backend) createSegment(epoch, seq, size int64, paced bool) (*segWriter, error) {
	dir := journalDir(b.path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	name := segmentName(b.path, b.stack, epoch, seq)
	// Not truncated before it is locked: a file another writer holds is
	// left as it is.
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s (is a writer using it?): %w", name, err)
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, fmt.Errorf("truncate %s: %w", name, err)
	}
	var pause time.Duration
	if paced {
		pause = fillPause
	}
	if err := fillZeros(f, 0, size, pause); err != nil {
		f.Close()
		return nil, fmt.Errorf("preallocate %s: %w", name, err)
	}
	if _, err := f.WriteAt(segmentMagic, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("write the header of %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("sync %s: %w", name, err)
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, fmt.Errorf("sync the directory %s: %w", dir, err)
	}
	return &segWriter{segKey: segKey{epoch, seq}, f: f, end: headerSize, size: size}, nil
}

// recoverSegment reopens an open segment of epoch left by a writer that
// stopped: the torn or corrupt tail after its last whole record is zeroed,
// so that stale bytes are never read as records after new ones.
func (b *Backend) recoverSegment(epoch, seq, applied int64) (*segWriter, error) {
	name := segmentName(b.path, b.stack, epoch, seq)
	f, err := os.OpenFile(name, os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s is held by another writer (does another process lead stack %s under epoch %d?): %w", name, b.stack, epoch, err)
	}
	end, err := scanSegment(f, applied, -1, nil)
	if err == nil {
		var fi os.FileInfo
		if fi, err = f.Stat(); err == nil {
			size := max(fi.Size(), segmentSize)
			if end < fi.Size() {
				b.log.Info("local backend: recovered a grant journal segment; its tail after the last whole record is zeroed", "segment", name, "end", end, "size", fi.Size())
			}
			if err = fillZeros(f, end, size, 0); err == nil {
				err = f.Sync()
			}
			if err == nil {
				return &segWriter{segKey: segKey{epoch, seq}, f: f, end: end, size: size}, nil
			}
		}
	}
	f.Close()
	return nil, fmt.Errorf("recover %s: %w", name, err)
}

// fullTx runs fn in one BEGIN IMMEDIATE transaction committed with
// synchronous=FULL (the WAL synced, with every commit before it).
func (b *Backend) fullTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	conn, err := b.wdb.Conn(ctx)
	if err != nil {
		return fmt.Errorf("take the write connection: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA synchronous = FULL"); err != nil {
		return fmt.Errorf("set synchronous=FULL: %w", err)
	}
	defer func() {
		if _, err := conn.ExecContext(context.Background(), "PRAGMA synchronous = NORMAL"); err != nil {
			b.log.Warn("local backend: could not set synchronous=NORMAL back; writes stay fully synced", "path", b.path, "err", err)
		}
	}()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// querySegsTx is querySegs in a write transaction, prepared.
func (b *Backend) querySegsTx(ctx context.Context, tx *sql.Tx) ([]segRow, error) {
	return scanSegs(b.st.journalSegs.tx(ctx, tx).query(ctx, b.stack))
}

func querySegs(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, stack string) ([]segRow, error) {
	return scanSegs(q.QueryContext(ctx, sqlJournalSegs, stack))
}

// scanSegs reads the journal segment rows of a query.
func scanSegs(rows *sql.Rows, err error) ([]segRow, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []segRow
	for rows.Next() {
		var r segRow
		if err := rows.Scan(&r.epoch, &r.seq, &r.applied, &r.sealed); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// resolveSeals fixes the seals left pending by takeovers, and seals open
// segments of epochs older than the leader's: this process's own segment
// at its last confirmed record, any other at the end of its whole records
// (the writer, if it still runs, follows that seal in its verdicts).
func (b *Backend) resolveSeals(ctx context.Context) error {
	b.j.mu.Lock()
	defer b.j.mu.Unlock()
	return b.fullTx(ctx, func(tx *sql.Tx) error {
		var cur int64
		if err := tx.QueryRowContext(ctx, `SELECT coalesce((SELECT epoch FROM leaders WHERE stack = ?), 0)`, b.stack).Scan(&cur); err != nil {
			return err
		}
		segs, err := querySegs(ctx, tx, b.stack)
		if err != nil {
			return err
		}
		for _, s := range segs {
			if !(s.sealed == sealPending || (s.sealed == sealOpen && s.epoch < cur)) {
				continue
			}
			// The flag first: a writer that reads it unset after its
			// fdatasync wrote its batch before the scan below.
			name := segmentName(b.path, b.stack, s.epoch, s.seq)
			if err := setSealFlag(name); err != nil {
				return fmt.Errorf("set the seal flag of %s: %w", name, err)
			}
			end := b.j.confirmed
			if s.segKey != b.j.own {
				f, err := os.Open(name)
				if errors.Is(err, fs.ErrNotExist) {
					end = s.applied // created, never written
				} else if err != nil {
					return err
				} else {
					end, err = scanSegment(f, s.applied, -1, nil)
					f.Close()
					if err != nil {
						return fmt.Errorf("read %s: %w", name, err)
					}
				}
			}
			if _, err := tx.ExecContext(ctx, `UPDATE journals SET sealed = ? WHERE stack = ? AND epoch = ? AND seq = ? AND sealed < 0`, end, b.stack, s.epoch, s.seq); err != nil {
				return err
			}
			b.log.Info("local backend: sealed the grant journal segment of a leader epoch a takeover ended", "path", b.path, "stack", b.stack, "epoch", s.epoch, "seq", s.seq, "length", end)
		}
		return nil
	})
}

// needsSeal reports whether a segment's length must be fixed before it is
// read or applied.
func needsSeal(s segRow, leaderEpoch int64) bool {
	return s.sealed == sealPending || (s.sealed == sealOpen && s.epoch < leaderEpoch)
}

// journalPending reports whether this process has journal records not
// applied yet.
func (b *Backend) journalPending() bool { return b.pendingRecords() > 0 || b.j.lagged.Load() }

// drainJournal applies this process's pending journal records (in
// transactions of at most maxApply).
func (b *Backend) drainJournal(ctx context.Context) error {
	for i := 0; i < 1024 && b.journalPending(); i++ {
		if err := b.applyJournal(ctx); err != nil {
			return err
		}
	}
	return nil
}

// applyJournal applies the journal records not yet in the SQLite tables
// (synchronous=NORMAL), in segment order, then folds the sealed segments
// it finished: their rows go in a synchronous=FULL transaction and their
// files after it.
func (b *Backend) applyJournal(ctx context.Context) error {
	b.j.applyMu.Lock()
	defer b.j.applyMu.Unlock()
	return b.applyJournalLocked(ctx, false)
}

// applyHeld is the applier's own applyJournal: of this process's records
// it takes those confirmed before its previous apply and holds the newer
// ones for the next (journal.holdTo), unless more than applyBacklog are
// pending. The held records are the look-ahead of applyRecords: a lease
// created in the records applied and deleted in the held ones is not
// written to SQLite at all. A tick with nothing old enough does nothing.
func (b *Backend) applyHeld(ctx context.Context) error {
	b.j.applyMu.Lock()
	defer b.j.applyMu.Unlock()
	return b.applyJournalLocked(ctx, true)
}

// dropPending removes the first n records of pending. b.j.mu is held.
// When no more records remain than were removed (the applier keeps up),
// the rest moves to the front and the array is reused instead of left
// behind at each apply; a longer rest (the applier behind) is resliced,
// so that no apply moves more records than it took.
func (b *Backend) dropPending(n int) {
	if len(b.j.pending)-n > n {
		b.j.pending = b.j.pending[n:]
		return
	}
	rest := copy(b.j.pending, b.j.pending[n:])
	clear(b.j.pending[rest:])
	b.j.pending = b.j.pending[:rest]
}

// applyJournalLocked is applyJournal with b.j.applyMu held.
func (b *Backend) applyJournalLocked(ctx context.Context, hold bool) error {
	b.j.mu.Lock()
	own, confirmed := b.j.own, b.j.confirmed
	pendStart := b.j.pendStart
	ready := len(b.j.pending)
	hold = hold && ready <= applyBacklog // a backlog is applied as fast as it can be
	if hold {
		if b.j.holdSeg != own {
			b.j.holdTo = 0
		}
		to := b.j.holdTo
		ready = sort.Search(ready, func(i int) bool { return b.j.pending[i].end > to })
		b.j.holdSeg, b.j.holdTo = own, confirmed
		if ready == 0 && len(b.j.pending) > 0 {
			b.j.mu.Unlock()
			return nil // all confirmed since the last apply: the next takes them
		}
	}
	n := min(ready, maxApply)
	recs := b.j.recs[:0]
	pendEnd := pendStart
	for i := range n {
		recs = append(recs, b.j.pending[i].rec)
	}
	if n > 0 {
		pendEnd = b.j.pending[n-1].end
		b.j.pendStart = pendEnd
		b.dropPending(n)
	}
	more := ready > n
	// The records confirmed after recs, for applyRecords' look-ahead:
	// read without mu, which is safe because only this apply (applyMu)
	// removes or changes pending's records; the writer appends past
	// them, or starts a new slice for a new segment (markCreated and
	// clearMarks then find own changed).
	var tail []pendRec
	if hold {
		tail = b.j.pending
	}
	b.j.mu.Unlock()
	b.j.buf.marks = b.j.buf.marks[:0]
	defer func() {
		clear(recs) // no references kept until the next apply
		b.j.recs = recs[:0]
		if more {
			b.wakeApplier()
		}
	}()
	lagging := b.j.dbSeg == own && own != (segKey{}) && b.j.skipEnd == pendStart && b.j.dbApplied < pendStart
	if hold && len(recs) > 0 && b.skipApply(own, pendStart, lagging, recs, tail) {
		b.j.skipEnd = pendEnd
		b.j.lagged.Store(true)
		return nil
	}
	if own == (segKey{}) && len(recs) == 0 {
		// Not writing here (a standby, the CLI): take the file's write
		// lock only when a segment is left to apply or to seal.
		if b.st.journalCheck.s == nil {
			return nil // a hand-made file without the journals table
		}
		var n int
		err := b.rdb.QueryRowContext(ctx, `SELECT count(*) FROM journals WHERE stack = ?1 AND folded = 0
			AND (sealed >= 0 OR sealed = -2 OR (sealed = -1 AND epoch < coalesce((SELECT epoch FROM leaders WHERE stack = ?1), 0)))`, b.stack).Scan(&n)
		if err != nil {
			return fmt.Errorf("look for grant journal segments to apply in %s: %w", b.path, err)
		}
		if n == 0 {
			return nil
		}
	}
	var folded []segKey
	resolve := false
	ownApplied := int64(-1) // own records applied from the file, not from memory
	fromMemory := false
	err := b.write(ctx, func(tx *sql.Tx) error {
		var cur int64
		err := b.st.leaderEpoch.tx(ctx, tx).queryRow(ctx, b.stack).Scan(&cur)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		segs, err := b.querySegsTx(ctx, tx)
		if err != nil {
			return err
		}
		for _, s := range segs {
			if s.segKey == own && s.sealed < 0 && (s.applied == pendStart && len(recs) > 0 || lagging && s.applied == b.j.dbApplied) {
				// The usual case: this process's confirmed records, from
				// memory, the last write of each record only; and the
				// offset past the ones skipApply took before them, if
				// any (with no records: a drain recording the lag).
				if err := b.applyRecords(ctx, tx, recs, tail); err != nil {
					return err
				}
				if _, err := b.st.setApplied.tx(ctx, tx).exec(ctx, pendEnd, b.stack, s.epoch, s.seq); err != nil {
					return err
				}
				fromMemory = true
				continue
			}
			limit := s.sealed
			switch {
			case s.sealed >= 0:
			case s.segKey == own:
				limit = confirmed
			case needsSeal(s, cur):
				resolve = true
				return nil
			default:
				return nil // another process's live segment: its own applier's
			}
			if s.applied < limit {
				end, capped, err := b.applySegment(ctx, tx, s, limit)
				if err != nil {
					return err
				}
				if capped {
					// The rest in the next transaction, and the segments
					// after it after that.
					more = true
					if s.segKey == own {
						ownApplied = end
					}
					_, err := b.st.setApplied.tx(ctx, tx).exec(ctx, end, b.stack, s.epoch, s.seq)
					return err
				}
				if s.sealed >= 0 && end < limit {
					b.log.Warn("local backend: a sealed grant journal segment ends in a torn record before its seal; the rest is not counted", "path", b.path, "epoch", s.epoch, "seq", s.seq, "end", end, "sealed", s.sealed)
				}
				if s.sealed >= 0 {
					end = limit
				}
				if _, err := b.st.setApplied.tx(ctx, tx).exec(ctx, end, b.stack, s.epoch, s.seq); err != nil {
					return err
				}
				s.applied = end
				if s.segKey == own {
					ownApplied = end
				}
			}
			if s.sealed >= 0 && s.applied >= s.sealed {
				folded = append(folded, s.segKey)
			}
		}
		return nil
	})
	if err != nil {
		b.j.dbSeg = segKey{}
		b.j.lagged.Store(false)
		return fmt.Errorf("apply the grant journal of stack %s to %s: %w", b.stack, b.path, err)
	}
	switch {
	case ownApplied >= 0:
		// Own's records read back from the file, from wherever SQLite's
		// offset was: perhaps from behind records skipApply took, whose
		// left-out creates are now written. No lag stands, and no
		// look-ahead mark holds.
		b.j.dbSeg, b.j.dbApplied, b.j.skipEnd = own, ownApplied, -1
		b.j.lagged.Store(false)
		b.clearMarks(own)
	case fromMemory:
		b.j.dbSeg, b.j.dbApplied = own, pendEnd
		b.j.lagged.Store(false)
	}
	if len(b.j.buf.marks) > 0 {
		b.markCreated(own)
	}
	if ownApplied >= 0 {
		// Read back from the file: the records in memory up to there are
		// applied.
		b.j.mu.Lock()
		if b.j.own == own {
			i := 0
			for i < len(b.j.pending) && b.j.pending[i].end <= ownApplied {
				i++
			}
			b.dropPending(i)
			if i > 0 {
				b.j.pendStart = ownApplied
			}
		}
		b.j.mu.Unlock()
	}
	if len(folded) > 0 {
		err := b.fullTx(ctx, func(tx *sql.Tx) error {
			for _, k := range folded {
				if _, err := tx.ExecContext(ctx, `UPDATE journals SET folded = 1 WHERE stack = ? AND epoch = ? AND seq = ? AND applied >= sealed AND sealed >= 0`, b.stack, k.epoch, k.seq); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("fold the grant journal of stack %s into %s: %w", b.stack, b.path, err)
		}
		for _, k := range folded {
			if err := os.Remove(segmentName(b.path, b.stack, k.epoch, k.seq)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				b.log.Warn("local backend: could not remove a folded grant journal segment", "path", b.path, "err", err)
			}
		}
	}
	if resolve {
		if err := b.resolveSeals(ctx); err != nil {
			return err
		}
		return b.applyJournalLocked(ctx, hold)
	}
	return nil
}

// skipApply reports whether an applyHeld of recs (own's, from pendStart)
// needs no transaction, and if so takes them: they would write nothing
// (each lease in them created and deleted there, or deleted in tail), and
// SQLite's applied offset for own is known to be pendStart, or behind it
// by records taken so (lagging). The offset then stays behind: whoever
// reads the tables reads the journal from it, and replaying those records
// leaves the tables as they are. The lag is bounded: at most applyBacklog
// records and a second, then a transaction records it. b.j.applyMu is
// held.
func (b *Backend) skipApply(own segKey, pendStart int64, lagging bool, recs []jrec, tail []pendRec) bool {
	if b.j.dbSeg != own || own == (segKey{}) || !(lagging || b.j.dbApplied == pendStart) {
		return false
	}
	if lagging && (b.j.lagN+len(recs) > applyBacklog || time.Since(b.j.lagSince) > maxApplyLag) {
		return false
	}
	a := &b.j.buf
	defer a.reset()
	if a.plan(recs, tail) > 0 {
		a.marks = a.marks[:0]
		return false
	}
	if !lagging {
		b.j.lagN, b.j.lagSince = 0, time.Now()
	}
	b.j.lagN += len(recs)
	b.markCreated(own)
	return true
}

// markCreated flags the records of b.j.buf.marks created, now that the
// transaction that left their leases out of SQLite committed: no row of
// them exists, so their next apply elides them as it would a lease
// created in its own records. A record no longer pending (own changed)
// is left as it is: read back from the file, it is applied as written.
// b.j.applyMu is held.
func (b *Backend) markCreated(own segKey) {
	b.j.mu.Lock()
	defer b.j.mu.Unlock()
	if b.j.own != own {
		return
	}
	p := b.j.pending
	for _, end := range b.j.buf.marks {
		if i, ok := slices.BinarySearchFunc(p, end, func(r pendRec, end int64) int { return cmp.Compare(r.end, end) }); ok {
			p[i].rec.created, p[i].rec.marked = true, true
		}
	}
}

// clearMarks takes back the look-ahead's marks from own's pending
// records: SQLite's offset went through the file, which may have written
// the creates they stand for. b.j.applyMu is held.
func (b *Backend) clearMarks(own segKey) {
	b.j.mu.Lock()
	defer b.j.mu.Unlock()
	if b.j.own != own {
		return
	}
	for i := range b.j.pending {
		if r := &b.j.pending[i].rec; r.marked {
			r.created, r.marked = false, false
		}
	}
}

// applySegment applies the records of s in [s.applied, limit) in tx and
// returns the end of the last one.
func (b *Backend) applySegment(ctx context.Context, tx *sql.Tx, s segRow, limit int64) (end int64, capped bool, err error) {
	name := segmentName(b.path, b.stack, s.epoch, s.seq)
	f, err := os.Open(name)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	var recs []jrec
	end, err = scanSegment(f, s.applied, limit, func(r *jrec, _ int64) bool {
		recs = append(recs, *r)
		return len(recs) < maxApply
	})
	if err == nil {
		err = b.applyRecords(ctx, tx, recs, nil)
	}
	if err != nil {
		return 0, false, fmt.Errorf("apply %s: %w", name, err)
	}
	return end, len(recs) == maxApply && end < limit, nil
}

func (b *Backend) applyRecord(ctx context.Context, tx *sql.Tx, r *jrec) error {
	var err error
	switch r.kind {
	case kindPutLease:
		l := &r.lease
		_, err = b.st.putLease.tx(ctx, tx).exec(ctx, b.stack, l.LeaseID, l.Pool, l.TaskID, l.Priority, l.Slots, nanos(l.GrantedAt), nanos(l.ExpiresAt), int64(l.TTL), l.Owner)
	case kindDeleteLease:
		_, err = b.st.deleteLease.tx(ctx, tx).exec(ctx, b.stack, r.id)
	case kindPutGrant:
		_, err = b.st.putGrant.tx(ctx, tx).exec(ctx, b.stack, r.id, r.body)
	case kindDeleteGrant:
		_, err = b.st.deleteGrant.tx(ctx, tx).exec(ctx, b.stack, r.id)
	}
	return err
}

// records is the stack's grant records as a reader sees them: the SQLite
// tables plus the journal records not applied to them yet.
type records struct {
	leases map[string]pools.LeaseRecord
	grants map[string][]byte
}

// loadRecords reads the SQLite tables and the journal segments' rows in one
// read transaction, then replays each segment from its applied offset to
// its seal (an open one: to the end of its whole records). A segment
// folded meanwhile (its file gone) makes it read again.
func (b *Backend) loadRecords(ctx context.Context, wantLeases, wantGrants bool) (records, error) {
	var missing string // a segment file found missing by the last attempt
	for attempt := 0; attempt < 8; attempt++ {
		out, gone, retry, err := b.loadRecordsOnce(ctx, wantLeases, wantGrants)
		if err != nil {
			return records{}, err
		}
		if !retry {
			return out, nil
		}
		if gone != "" && gone == missing {
			// Not folded meanwhile: the file is gone for good.
			return records{}, fmt.Errorf("the grant journal segment %s is missing but not folded into the database: grants written through it are lost; restore the file from a backup, or take a backup (rpd backup) with the records the database holds and restore it", gone)
		}
		missing = gone
	}
	return records{}, errors.New("the grant journal kept changing under the read; retry")
}

// loadRecordsOnce is one attempt of loadRecords; retry asks for another,
// gone names a segment file found missing.
func (b *Backend) loadRecordsOnce(ctx context.Context, wantLeases, wantGrants bool) (out records, gone string, retry bool, err error) {
	out = records{leases: map[string]pools.LeaseRecord{}, grants: map[string][]byte{}}
	tx, err := b.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return out, "", false, err
	}
	defer tx.Rollback()
	if wantLeases {
		rows, err := b.st.loadLeases.tx(ctx, tx).query(ctx, b.stack)
		if err != nil {
			return out, "", false, err
		}
		for rows.Next() {
			var r pools.LeaseRecord
			var granted, expires, ttl int64
			if err := rows.Scan(&r.LeaseID, &r.Pool, &r.TaskID, &r.Priority, &r.Slots, &granted, &expires, &ttl, &r.Owner); err != nil {
				rows.Close()
				return out, "", false, err
			}
			r.GrantedAt, r.ExpiresAt, r.TTL = fromNanos(granted), fromNanos(expires), time.Duration(ttl)
			out.leases[r.LeaseID] = r
		}
		if err := rows.Err(); err != nil {
			return out, "", false, err
		}
	}
	if wantGrants {
		rows, err := b.st.loadGrants.tx(ctx, tx).query(ctx, b.stack)
		if err != nil {
			return out, "", false, err
		}
		for rows.Next() {
			var id string
			var body []byte
			if err := rows.Scan(&id, &body); err != nil {
				rows.Close()
				return out, "", false, err
			}
			out.grants[id] = body
		}
		if err := rows.Err(); err != nil {
			return out, "", false, err
		}
	}
	if b.st.journalCheck.s == nil {
		// A hand-made file without the leaders or journals table (the
		// statement reading them did not prepare): no journal.
		return out, "", false, nil
	}
	var cur int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce((SELECT epoch FROM leaders WHERE stack = ?), 0)`, b.stack).Scan(&cur); err != nil {
		return out, "", false, err
	}
	segs, err := querySegs(ctx, tx, b.stack)
	if err != nil {
		return out, "", false, err
	}
	_ = tx.Rollback()
	for _, s := range segs {
		if needsSeal(s, cur) {
			// A stale leader's segment: its length is fixed first, so
			// that this read counts exactly what the seal counts.
			if err := b.resolveSeals(ctx); err != nil {
				return out, "", false, err
			}
			return out, "", true, nil
		}
	}
	for _, s := range segs {
		name := segmentName(b.path, b.stack, s.epoch, s.seq)
		f, err := os.Open(name)
		if errors.Is(err, fs.ErrNotExist) {
			return out, name, true, nil
		}
		if err != nil {
			return out, "", false, err
		}
		_, err = scanSegment(f, s.applied, s.sealed, func(r *jrec, _ int64) bool {
			switch r.kind {
			case kindPutLease:
				if wantLeases {
					out.leases[r.id] = r.lease
				}
			case kindDeleteLease:
				delete(out.leases, r.id)
			case kindPutGrant:
				if wantGrants {
					out.grants[r.id] = r.body
				}
			case kindDeleteGrant:
				delete(out.grants, r.id)
			}
			return true
		})
		f.Close()
		if err != nil {
			return out, "", false, fmt.Errorf("read %s: %w", name, err)
		}
	}
	return out, "", false, nil
}

// sortedLeases returns m's records ordered by lease ID.
func sortedLeases(m map[string]pools.LeaseRecord) []pools.LeaseRecord {
	if len(m) == 0 {
		return nil
	}
	out := make([]pools.LeaseRecord, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b pools.LeaseRecord) int {
		switch {
		case a.LeaseID < b.LeaseID:
			return -1
		case a.LeaseID > b.LeaseID:
			return 1
		}
		return 0
	})
	return out
}
