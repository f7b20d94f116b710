package fatjob

import (
	"errors"
	"fmt"
	"math"
)

// ErrRequestOverflow is wrapped by GitRepo when a size in MiB does not fit in
// a uint64 count of bytes.
var ErrRequestOverflow = errors.New("fatjob: request size overflows uint64 bytes")

// Request describes what one fat job needs. The zero Request asks for
// nothing and is always granted.
type Request struct {
	ScanRingBytes   uint64
	DeltaCacheBytes uint64
	// NeedsSpillSlot asks for permission to spill to disk: one counted slot
	// when the pool's spill slots are limited, no slot when unlimited.
	NeedsSpillSlot bool
}

// GitRepo builds the request of a Git repository scan. Sizes are in MiB
// (1 MiB = 1<<20 bytes); a size whose byte count overflows a uint64 is an
// error wrapping ErrRequestOverflow.
func GitRepo(scanRingMB, deltaCacheMB uint64, needsSpill bool) (Request, error) {
	scan, err := mibToBytes("scan ring", scanRingMB)
	if err != nil {
		return Request{}, err
	}
	delta, err := mibToBytes("delta cache", deltaCacheMB)
	if err != nil {
		return Request{}, err
	}
	return Request{ScanRingBytes: scan, DeltaCacheBytes: delta, NeedsSpillSlot: needsSpill}, nil
}

func mibToBytes(what string, mb uint64) (uint64, error) {
	if mb > math.MaxUint64>>20 {
		return 0, fmt.Errorf("%w: %s of %d MiB; use at most %d MiB", ErrRequestOverflow, what, mb, uint64(math.MaxUint64>>20))
	}
	return mb << 20, nil
}

// Archive builds the request of an archive extraction: a scan ring the size
// of the largest file (in bytes), no delta cache.
func Archive(maxFileSize uint64, needsSpill bool) Request {
	return Request{ScanRingBytes: maxFileSize, NeedsSpillSlot: needsSpill}
}

// isEmpty reports whether r takes nothing from any pool.
func (r Request) isEmpty() bool {
	return r.ScanRingBytes == 0 && r.DeltaCacheBytes == 0 && !r.NeedsSpillSlot
}
