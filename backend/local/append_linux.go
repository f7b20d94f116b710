package local

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// directAppender appends a segment's records with direct I/O: each append
// rewrites the blocks from the one holding the end of the data, from a
// copy of that block's bytes kept in memory, and a grant's append is one
// write with RWF_DSYNC (O_DSYNC for that write only) that returns once the
// blocks are on the disk. Buffered, the same append was a write into the
// page cache and an fdatasync: on this repository's test machine (ext4 on
// a virtio disk without FUA) a 300-byte append and its fdatasync took
// 62-86 µs at the median, the direct RWF_DSYNC write of its 4 KiB block
// 28-32 µs (docs/backends.md, "Direct appends"). The writer's goroutine
// holds its P for the whole syscall, so the difference is CPU the grants
// get back as well as time they wait.
//
// Every append is written with RWF_DSYNC, a batch of deletes only (see
// journalRun) too, though it needs no sync: on a disk with FUA a
// RWF_DSYNC write is made durable by itself, without flushing the disk's
// cache, so a delete left in that cache by a plain direct write could be
// lost to a power failure while a later grant's block survives, and the
// reader, which stops at the first missing record, would lose the grant.
// (It costs little: 28-32 µs against 24-25 µs for a plain direct write.)
// Without RWF_DSYNC a synced append is a write and an fdatasync, which
// flushes the cache, and an append without sync a plain write.
//
// The appender is the segment's only writer of the record blocks (the
// segment is flocked by its writer); the header block (the seal flag) is
// written by others with buffered writes, and readers read everything
// buffered: the kernel invalidates the page cache over each direct write,
// and the pages readers cache are clean.
type directAppender struct {
	f     *os.File
	buf   []byte // directBlock-aligned scratch
	tail  []byte // the bytes from the start of end's block to end
	dsync bool   // RWF_DSYNC works here; else a write, then fdatasync
	// prio raises the thread for each write that waits for the disk
	// (syncprio_linux.go); nil: never.
	prio *syncPriority
}

// errDirectRefused: a direct write was refused before anything was
// written; the caller appends buffered instead.
var errDirectRefused = errors.New("the file system refused a direct write")

// directBlock is the alignment of a direct write's offset, length and
// memory: the page size, a multiple of every logical block size.
const directBlock = 4096

// openDirect opens name for direct appends at end; f (the segment, open
// for buffered I/O) gives the bytes of end's block before end, and prio
// raises the thread of each write. It fails
// when the file system refuses O_DIRECT (tmpfs, some FUSE ones): the
// caller appends buffered.
func openDirect(name string, f *os.File, end int64, prio *syncPriority) (*directAppender, error) {
	df, err := os.OpenFile(name, os.O_RDWR|syscall.O_DIRECT, 0)
	if err != nil {
		return nil, err
	}
	start := end &^ (directBlock - 1)
	tail := make([]byte, end-start, directBlock)
	if _, err := f.ReadAt(tail, start); err != nil {
		df.Close()
		return nil, fmt.Errorf("read the block at the end of %s: %w", name, err)
	}
	return &directAppender{f: df, tail: tail, dsync: true, prio: prio}, nil
}

// append writes p at at (the end of the data: the tail's block holds the
// bytes before it), durable on return when sync, and it reports whether
// the bytes are durable.
func (a *directAppender) append(p []byte, at int64, sync bool) (durable bool, err error) {
	start := at &^ (directBlock - 1)
	if int64(len(a.tail)) != at-start {
		return false, fmt.Errorf("direct append at %d: the block kept in memory ends at %d", at, start+int64(len(a.tail)))
	}
	n := len(a.tail) + len(p)
	total := (n + directBlock - 1) &^ (directBlock - 1)
	if len(a.buf) < total {
		a.buf = alignedBlocks(total)
	}
	b := a.buf[:total]
	copy(b, a.tail)
	copy(b[len(a.tail):], p)
	clear(b[n:]) // what the preallocation holds past the data
	if durable, err = a.write(b, start, sync); err != nil {
		return false, err
	}
	end := at + int64(len(p))
	last := end &^ (directBlock - 1)
	a.tail = append(a.tail[:0], b[last-start:end-start]...)
	return durable, nil
}

func (a *directAppender) write(b []byte, off int64, sync bool) (durable bool, err error) {
	flags := 0
	if a.dsync {
		flags = unix.RWF_DSYNC
	}
	var n int
	if flags != 0 {
		raised := a.prio.raise()
		n, err = unix.Pwritev2(int(a.f.Fd()), [][]byte{b}, off, flags)
		a.prio.lower(raised)
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) {
			// A kernel before 4.7 (no pwritev2), or a file system
			// without per-write flags: pwrite, then fdatasync.
			a.dsync = false
			return a.write(b, off, sync)
		}
	} else {
		n, err = a.f.WriteAt(b, off)
	}
	if flags != 0 {
		durable = err == nil
	}
	if errors.Is(err, unix.EINVAL) {
		// The file system took O_DIRECT at open but refuses this write
		// (an alignment it needs that is not the page size): nothing was
		// written.
		return false, fmt.Errorf("%w: %w", errDirectRefused, err)
	}
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return false, fmt.Errorf("direct write of %d bytes at %d: %w", len(b), off, err)
	}
	if sync && !durable {
		raised := a.prio.raise()
		err := datasync(a.f)
		a.prio.lower(raised)
		if err != nil {
			return false, fmt.Errorf("fdatasync: %w", err)
		}
		durable = true
	}
	return durable, nil
}

func (a *directAppender) close() error { return a.f.Close() }

// alignedBlocks returns n bytes whose address is directBlock-aligned (the
// Go heap does not move objects).
func alignedBlocks(n int) []byte {
	b := make([]byte, n+directBlock)
	off := (directBlock - int(uintptr(unsafe.Pointer(&b[0]))&(directBlock-1))) & (directBlock - 1)
	return b[off : off+n : off+n]
}
