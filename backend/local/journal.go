package local

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/rpdhq/rpd/runtime/pools"
)

// The grant journal: the durable record of fenced grant writes (journalwriter.go
// says how it is written, sealed and folded into SQLite). This file is its
// format.
//
// A segment is one file, <db>.journal/<stack>.<epoch>.<seq>, preallocated
// with zeros (segmentSize) so that appending rewrites blocks the file
// already has and fdatasync flushes data only. Its first headerSize bytes
// are a header:
//
//	[0:8]   "rpdjrnl1"
//	[8:16]  the seal flag: nonzero once a takeover sealed the segment (set
//	        by whoever fixes the seal, before reading the segment's end;
//	        the writer reads it after each fdatasync)
//
// and a sequence of records follows:
//
//	[0:4]   payload length n (uint32 LE), never 0
//	[4:8]   CRC-32C of bytes [8:16+n]
//	[8:16]  the record's own offset in the file (uint64 LE)
//	[16:16+n] payload: kind byte, then the kind's fields
//
// A zero length ends the data (the preallocated zeros). A record that is
// short, whose checksum does not match, whose offset is not its position or
// whose payload does not decode ends it too: a torn or corrupt tail is
// never read past, and never half counted.

const (
	headerSize = 4096
	sealFlagAt = 8
	recHeader  = 16
	// maxRecord bounds a payload (a grant body is a small JSON document;
	// this only guards the reader against a length read from garbage).
	maxRecord = 1 << 20
)

// segmentSize is the preallocation of the smallest segment; a segment is
// sealed and a new one started (and the old one folded into SQLite and
// removed) when a batch would not fit. A variable for tests. Each next
// segment's size follows how fast the last one filled (nextSegmentSize),
// up to maxSegmentGrowth times this.
var segmentSize int64 = 8 << 20

// firstSegmentSize is the preallocation of the first segment a leader
// opens: sized for a busy stack, so that a leader that is busy from its
// first second does not rotate (and write the next segment's zeros beside
// its grants) every couple of seconds while its segments grow from
// segmentSize. Writing 32 MiB of zeros and syncing them took 19-22 ms on
// this repository's test machine (8 MiB: 7-9 ms), once per takeover; a
// quiet stack's later segments shrink back to segmentSize. A variable for
// tests.
var firstSegmentSize int64 = 32 << 20

const (
	// maxSegmentGrowth bounds a segment at this many times segmentSize
	// (64 MiB): with the spare, a busy stack keeps at most twice that on
	// disk.
	maxSegmentGrowth = 8
	// segmentFillTarget is how long a segment should last: one that filled
	// faster is followed by one twice as large, one that took more than
	// shrinkAfter times as long by one half as large.
	segmentFillTarget = 30 * time.Second
	shrinkAfter       = 8
)

// nextSegmentSize is the size of the segment that follows one of size
// that filled (or, projected from its first half, will fill) in took.
//
// Why it grows: each rotation stalls every grant in flight for about
// 20 ms on a busy stack (the seal's and the fold's synchronous=FULL
// commits, and the removal of the folded file, whose freed blocks a
// concurrent fdatasync waits behind). At 20,000 acquire+release pairs a
// second an 8 MiB segment lasts about 2.6 s; a 64 MiB one about 20 s. The
// zeros written ahead of the records cost the same per byte either way,
// but each spare's are written (paced, a synced chunk at a time) while
// grants sync beside them, and that shows in their p99 (see
// firstSegmentSize); a quiet stack keeps small files.
func nextSegmentSize(size int64, took time.Duration) int64 {
	switch {
	case took < segmentFillTarget:
		size *= 2
	case took > shrinkAfter*segmentFillTarget:
		size /= 2
	}
	return min(max(size, segmentSize), maxSegmentGrowth*segmentSize)
}

// record kinds
const (
	kindPutLease byte = 1 + iota
	kindDeleteLease
	kindPutGrant
	kindDeleteGrant
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// jrec is one journal record: a put or delete of a pool lease or grant.
type jrec struct {
	kind  byte
	id    string
	lease pools.LeaseRecord // kindPutLease
	body  []byte            // kindPutGrant
	// created: a kindPutLease written by PoolStore.CreateLease, the first
	// record of its ID. Only in memory (the applier's elision); not
	// encoded, so a record read back from a segment never has it.
	created bool
	// marked: created was set by the applier's look-ahead (markCreated),
	// not by CreateLease; it holds only while the create it left out of
	// SQLite stays out (clearMarks).
	marked bool
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendRecord appends r, as the record at file offset off, to buf.
func appendRecord(buf []byte, off int64, r *jrec) []byte {
	start := len(buf)
	buf = append(buf, make([]byte, recHeader)...)
	buf = append(buf, r.kind)
	buf = appendString(buf, r.id)
	switch r.kind {
	case kindPutLease:
		l := &r.lease
		buf = appendString(buf, l.Pool)
		buf = appendString(buf, l.TaskID)
		buf = appendString(buf, l.Owner)
		buf = binary.AppendVarint(buf, int64(l.Priority))
		buf = binary.AppendVarint(buf, int64(l.Slots))
		buf = binary.AppendVarint(buf, nanos(l.GrantedAt))
		buf = binary.AppendVarint(buf, nanos(l.ExpiresAt))
		buf = binary.AppendVarint(buf, int64(l.TTL))
	case kindPutGrant:
		buf = binary.AppendUvarint(buf, uint64(len(r.body)))
		buf = append(buf, r.body...)
	}
	h := buf[start : start+recHeader]
	binary.LittleEndian.PutUint32(h[0:4], uint32(len(buf)-start-recHeader))
	binary.LittleEndian.PutUint64(h[8:16], uint64(off))
	binary.LittleEndian.PutUint32(h[4:8], crc32.Checksum(buf[start+8:], castagnoli))
	return buf
}

var errBadPayload = errors.New("bad payload")

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errBadPayload
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errBadPayload
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.err = errBadPayload
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// decodePayload decodes a record's payload (after its checksum matched).
func decodePayload(p []byte) (jrec, error) {
	if len(p) == 0 {
		return jrec{}, errBadPayload
	}
	r := jrec{kind: p[0]}
	d := decoder{b: p[1:]}
	r.id = string(d.bytes())
	switch r.kind {
	case kindPutLease:
		l := &r.lease
		l.LeaseID = r.id
		l.Pool, l.TaskID, l.Owner = string(d.bytes()), string(d.bytes()), string(d.bytes())
		l.Priority, l.Slots = int(d.varint()), int(d.varint())
		l.GrantedAt, l.ExpiresAt, l.TTL = fromNanos(d.varint()), fromNanos(d.varint()), time.Duration(d.varint())
	case kindPutGrant:
		r.body = append([]byte{}, d.bytes()...)
	case kindDeleteLease, kindDeleteGrant:
	default:
		return jrec{}, errBadPayload
	}
	if d.err != nil || len(d.b) != 0 {
		return jrec{}, errBadPayload
	}
	return r, nil
}

// scanSegment reads the records of the segment file f from offset from,
// stopping at limit (limit < 0: at the end of the data), and calls fn for
// each record with the offset just past it, until fn returns false. It returns the offset after
// the last whole record read. A torn or corrupt record ends the scan
// without an error; only a failing read is one.
func scanSegment(f *os.File, from, limit int64, fn func(r *jrec, end int64) bool) (int64, error) {
	n := int64(1<<62) - from
	if limit >= 0 {
		n = limit - from
	}
	if n <= 0 {
		return from, nil
	}
	br := bufio.NewReaderSize(io.NewSectionReader(f, from, n), 64<<10)
	pos := from
	var hdr [recHeader]byte
	var payload []byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return pos, nil
			}
			return pos, err
		}
		size := binary.LittleEndian.Uint32(hdr[0:4])
		if size == 0 || size > maxRecord || binary.LittleEndian.Uint64(hdr[8:16]) != uint64(pos) {
			return pos, nil
		}
		if cap(payload) < int(size) {
			payload = make([]byte, size)
		}
		payload = payload[:size]
		if _, err := io.ReadFull(br, payload); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return pos, nil
			}
			return pos, err
		}
		crc := crc32.Update(crc32.Checksum(hdr[8:16], castagnoli), castagnoli, payload)
		if crc != binary.LittleEndian.Uint32(hdr[4:8]) {
			return pos, nil
		}
		r, err := decodePayload(payload)
		if err != nil {
			return pos, nil
		}
		pos += recHeader + int64(size)
		if fn != nil && !fn(&r, pos) {
			return pos, nil
		}
	}
}

// journalDir is the directory of path's journal segments.
func journalDir(path string) string { return path + ".journal" }

var plainStack = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// segmentName is the file of segment (epoch, seq) of stack.
func segmentName(path, stack string, epoch, seq int64) string {
	s := stack
	if !plainStack.MatchString(s) {
		s = "x" + strconv.FormatUint(uint64(crc32.Checksum([]byte(stack), castagnoli)), 16) + strconv.Itoa(len(stack))
	}
	return filepath.Join(journalDir(path), fmt.Sprintf("%s.%d.%d", s, epoch, seq))
}

var segmentMagic = []byte("rpdjrnl1")

// setSealFlag sets the seal flag of the segment file name (a missing file
// is no error: nothing was written to it).
func setSealFlag(name string) error {
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteAt([]byte{1, 0, 0, 0, 0, 0, 0, 0}, sealFlagAt)
	return err
}

// sealFlag reads the seal flag of f.
func sealFlag(f *os.File) (bool, error) {
	var b [8]byte
	if _, err := f.ReadAt(b[:], sealFlagAt); err != nil {
		return false, err
	}
	return b != [8]byte{}, nil
}

// zeros is the buffer preallocation writes.
var zeros = make([]byte, 256<<10)

// fillZeros writes zeros over [from, to) of f, a chunk (256 KiB) at a
// time. With a pause, each chunk is synced and followed by the pause, so
// that the disk serves other syncs between them (the applier's spare).
func fillZeros(f *os.File, from, to int64, pause time.Duration) error {
	for off := from; off < to; {
		n := min(int64(len(zeros)), to-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
		off += n
		if pause > 0 {
			if err := datasync(f); err != nil {
				return err
			}
			time.Sleep(pause)
		}
	}
	return nil
}

// fillPause is the pause between two chunks of a paced fillZeros: a spare
// segment of 8 MiB (32 chunks) takes about 100 ms to prepare, one of
// 64 MiB under a second, ahead of the writer by the half segment it still
// has to fill (at 20,000 pairs a second, about 10 s of a 64 MiB one).
const fillPause = 2 * time.Millisecond

// syncDir makes a directory entry created or removed in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
