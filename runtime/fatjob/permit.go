package fatjob

import "sync/atomic"

// SpillGrant says how a permit may spill to disk (docs/language.md, budget).
type SpillGrant uint8

const (
	// SpillNotRequested: the request did not ask to spill; spilling is not allowed.
	SpillNotRequested SpillGrant = iota
	// SpillUnlimited: spilling is allowed and the pool does not count it.
	SpillUnlimited
	// SpillLimited: spilling is allowed and the permit holds one counted slot.
	SpillLimited
)

func (g SpillGrant) String() string {
	switch g {
	case SpillNotRequested:
		return "not-requested"
	case SpillUnlimited:
		return "unlimited"
	case SpillLimited:
		return "limited"
	}
	return "invalid"
}

// Permit holds resources of one Pool until Release. Permits are created only
// by their pool, and each carries a pointer to it, so a permit can only ever
// give back what it took, to the pool it took it from.
//
// A permit costs at most one small allocation (48 bytes). Usually it costs
// none when the caller releases it before returning and does not let it
// escape otherwise: TryAcquire and Acquire are small enough to be inlined,
// and where the compiler inlines them it places such a permit on the
// caller's stack. (It does not inline into very large functions, nor
// with -gcflags=-l.) This affects speed only, never correctness.
type Permit struct {
	grant
	// released is swapped to true by the one Release call that gives the
	// resources back. Permits are never reused (each grant allocates its
	// own, see newPermit), so a stale Release can never free another
	// holder's resources.
	released atomic.Bool
}

// ScanRingBytes returns the scan-ring bytes the permit holds (or held).
func (perm *Permit) ScanRingBytes() uint64 { return perm.scan }

// DeltaCacheBytes returns the delta-cache bytes the permit holds (or held).
func (perm *Permit) DeltaCacheBytes() uint64 { return perm.delta }

// TotalBytes returns ScanRingBytes + DeltaCacheBytes. It cannot overflow:
// each is at most MaxBudgetBytes.
func (perm *Permit) TotalBytes() uint64 { return perm.scan + perm.delta }

// Spill returns how the permit may spill.
func (perm *Permit) Spill() SpillGrant { return perm.spill }

// CanSpill reports whether the job may spill to disk (limited or unlimited).
func (perm *Permit) CanSpill() bool { return perm.spill != SpillNotRequested }

// SpillIsLimited reports whether the permit holds a counted spill slot.
func (perm *Permit) SpillIsLimited() bool { return perm.spill == SpillLimited }

// Release gives everything the permit holds back to its pool and wakes
// waiters that now fit. Only the first call has an effect, whichever
// goroutine makes it; later calls, and calls on a nil permit, do nothing, so
// `defer perm.Release()` is always safe. The accessors keep reporting what
// the permit held.
func (perm *Permit) Release() {
	if perm == nil {
		return
	}
	if perm.pool == nil || perm.released.Swap(true) {
		return
	}
	if perm.scan == 0 && perm.delta == 0 && perm.spill != SpillLimited {
		return // held nothing, so frees nothing a waiter could use
	}
	perm.put()
	perm.pool.wakeIfQueued()
}
