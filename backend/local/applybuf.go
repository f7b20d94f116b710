package local

import (
	"context"
	"database/sql"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/rpdhq/rpd/runtime/pools"
)

// applyRecords applies recs in tx: only the last write of each record, the
// deletes of each table in one statement and the lease puts in another. A
// lease whose first write here created it (PoolStore.CreateLease: no
// record of its ID existed before) and whose last deletes it costs
// nothing: no row of it can exist.
//
// tail, when given, is the records confirmed after recs (the applier's
// look-ahead, applyHeld). A lease created in recs whose last record in
// tail deletes it is not written either: whoever reads the tables reads
// them with the journal after the applied offset, which deletes it. The
// end of its first record in tail goes to a.marks, to be flagged
// created once tx commits (markCreated), so that the apply that takes it
// elides it too. b.j.applyMu is held.
func (b *Backend) applyRecords(ctx context.Context, tx *sql.Tx, recs []jrec, tail []pendRec) error {
	a := &b.j.buf
	defer a.reset() // no references kept until the next apply
	a.plan(recs, tail)
	for _, lw := range a.last {
		r := &recs[lw.i]
		switch {
		case lw.writesNothing(r):
			continue
		case r.kind == kindDeleteLease && utf8.ValidString(r.id):
			a.leaseDels = append(a.leaseDels, r.id)
			continue
		case r.kind == kindDeleteGrant && utf8.ValidString(r.id):
			a.grantDels = append(a.grantDels, r.id)
			continue
		case r.kind == kindPutLease && a.addPut(&r.lease):
			continue
		}
		if err := b.applyRecord(ctx, tx, r); err != nil {
			return err
		}
	}
	if len(a.puts) > 0 {
		a.puts = append(a.puts, ']')
		if _, err := b.st.putLeases.tx(ctx, tx).exec(ctx, b.stack, string(a.puts)); err != nil {
			return err
		}
	}
	for _, d := range []struct {
		st  *stmt
		ids []string
	}{{&b.st.deleteLeases, a.leaseDels}, {&b.st.deleteGrants, a.grantDels}} {
		if len(d.ids) == 0 {
			continue
		}
		ids, err := json.Marshal(d.ids) // valid UTF-8: each ID round-trips
		if err != nil {
			return err
		}
		if _, err := d.st.tx(ctx, tx).exec(ctx, b.stack, string(ids)); err != nil {
			return err
		}
	}
	return nil
}

// applyBuf is applyRecords' state, kept between applies so that applying
// allocates little per record.
type applyBuf struct {
	// leases and grants map a record's ID to its entry in last.
	leases, grants map[string]int32
	last           []lastWrite
	// leaseDels and grantDels are the IDs of the deletes, puts the lease
	// puts as a JSON array of rows (empty: none; the closing bracket is
	// added when it is written).
	leaseDels, grantDels []string
	puts                 []byte
	// marks are the ends of the look-ahead's records that are the first of
	// a lease whose create plan left out (lastWrite.deletedLater): each is
	// flagged created once that apply commits (markCreated). Kept by
	// reset; emptied at the start of each apply.
	marks []int64
}

// lastWrite is, for one record of a batch, the index of its last write and
// whether its first write created it; for a lease created in the batch
// and put last, whether the look-ahead's last record of it deletes it,
// and the index there of its first.
type lastWrite struct {
	i            int
	created      bool
	deletedLater bool
	tailFirst    int32
}

// elide fills a.last with the last write of each record of recs, from
// the end back: the first write seen of an ID is its last, and the
// created flag it ends with is its first write's.
func (a *applyBuf) elide(recs []jrec) {
	if a.leases == nil {
		a.leases = make(map[string]int32, maxApply)
		a.grants = make(map[string]int32)
	}
	for i := len(recs) - 1; i >= 0; i-- {
		r := &recs[i]
		m := a.leases
		if r.kind == kindPutGrant || r.kind == kindDeleteGrant {
			m = a.grants
		}
		if j, ok := m[r.id]; ok {
			a.last[j].created = r.created
			continue
		}
		m[r.id] = int32(len(a.last))
		a.last = append(a.last, lastWrite{i: i, created: r.created, tailFirst: -1})
	}
}

// plan fills a.last with the last write of each record of recs (elide),
// marked by the look-ahead into tail (lookAhead), and the ends of the
// records to flag created once it is applied into a.marks; it returns
// how many writes applying it takes.
func (a *applyBuf) plan(recs []jrec, tail []pendRec) (writes int) {
	a.elide(recs)
	if len(tail) > 0 {
		a.lookAhead(recs, tail)
	}
	for _, lw := range a.last {
		switch {
		case lw.deletedLater:
			a.marks = append(a.marks, tail[lw.tailFirst].end)
		case !lw.writesNothing(&recs[lw.i]):
			writes++
		}
	}
	return writes
}

// writesNothing reports whether the last write lw, r, leaves the tables as
// they are: a lease created and deleted since the last apply, or created
// and deleted in the look-ahead.
func (lw *lastWrite) writesNothing(r *jrec) bool {
	return r.kind == kindDeleteLease && lw.created || lw.deletedLater
}

// lookAhead marks, among the leases that recs create and leave put
// (a.last, after elide), those whose last record in tail deletes them,
// with the index of their first record there.
func (a *applyBuf) lookAhead(recs []jrec, tail []pendRec) {
	found := false
	for _, lw := range a.last {
		if lw.created && recs[lw.i].kind == kindPutLease {
			found = true
			break
		}
	}
	if !found {
		return
	}
	for i := len(tail) - 1; i >= 0; i-- {
		r := &tail[i].rec
		if r.kind != kindPutLease && r.kind != kindDeleteLease {
			continue
		}
		j, ok := a.leases[r.id]
		if !ok {
			continue
		}
		lw := &a.last[j]
		if !lw.created || recs[lw.i].kind != kindPutLease {
			continue
		}
		if lw.tailFirst < 0 {
			// The first seen from the end: the lease's last record.
			lw.deletedLater = r.kind == kindDeleteLease
		}
		lw.tailFirst = int32(i)
	}
}

// reset empties a, keeping its memory and no references to records.
func (a *applyBuf) reset() {
	clear(a.leases)
	clear(a.grants)
	clear(a.leaseDels)
	clear(a.grantDels)
	a.last, a.leaseDels, a.grantDels, a.puts = a.last[:0], a.leaseDels[:0], a.grantDels[:0], a.puts[:0]
}

// addPut adds l to the lease puts of a's batch, or is false when one of
// its strings would not round-trip through a JSON string as it is (not
// UTF-8, or holding a control character): that lease is written by a
// statement of its own.
func (a *applyBuf) addPut(l *pools.LeaseRecord) bool {
	for _, s := range [...]string{l.LeaseID, l.Pool, l.TaskID, l.Owner} {
		if !plainString(s) {
			return false
		}
	}
	p := append(a.puts, ',')
	if len(a.puts) == 0 {
		p[0] = '['
	}
	p = append(p, '[')
	p = appendJSONString(p, l.LeaseID)
	p = append(p, ',')
	p = appendJSONString(p, l.Pool)
	p = append(p, ',')
	p = appendJSONString(p, l.TaskID)
	for _, n := range [...]int64{int64(l.Priority), int64(l.Slots), nanos(l.GrantedAt), nanos(l.ExpiresAt), int64(l.TTL)} {
		p = append(p, ',')
		p = strconv.AppendInt(p, n, 10)
	}
	p = append(p, ',')
	p = appendJSONString(p, l.Owner)
	a.puts = append(p, ']')
	return true
}

// plainString reports whether s is UTF-8 without control characters.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return false
		}
	}
	return utf8.ValidString(s)
}

// appendJSONString appends s, a plainString, as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}
