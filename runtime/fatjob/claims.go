package fatjob

// Every grant takes a permit from the pool's claim word, and a permit with a
// limited spill slot also takes the slot, in one compare-and-swap:
//
//	claims = count<<claimShift | (available spill slots + spillBias)
//
// The count numbers the permit, which picks its place in a block of
// preallocated permits, and is also Stats.Granted. Merging the two is what
// keeps the lock-free path to one atomic operation per counter of the
// baseline plus the permit's release flag.
//
// The slot field is biased so it never goes negative: available slots range
// from -2*MaxSpillSlots to MaxSpillSlots, so adding or subtracting a count
// in that range never carries into or borrows from the count. The low end
// is reached only through Restore, which takes slots without checking that
// any is free but stops at MaxSpillSlots beyond the total (so at most
// 2*MaxSpillSlots are held); a shrink to zero counted slots then leaves
// -2*MaxSpillSlots = -spillBias, a field of 0. The count wraps after 2^48
// grants; claimWraps keeps the high part for Stats (which may read 2^48 low
// for the instant between a wrapping claim and its claimWraps update). A
// permit number is unique within 2^48 grants, so the only way two callers
// could share a block slot is for one to stall between its claim and its
// grant while 2^48 others are granted.

const (
	claimShift = 16
	claimUnit  = 1 << claimShift
	spillMask  = claimUnit - 1
	spillBias  = 1 << (claimShift - 1)
	claimMax   = 1<<(64-claimShift) - 1

	// MaxSpillSlots is the largest limited SpillSlots a Config may hold.
	MaxSpillSlots = 1 << (claimShift - 2)
)

// spillField returns the available spill slots stored in a claim word.
func spillField(w uint64) int64 { return int64(w&spillMask) - spillBias }

// spillAvailable returns the available counted spill slots (negative after
// a shrink below what is held).
func (p *Pool) spillAvailable() int64 { return spillField(p.claims.Load()) }

// claimed returns how many permits have been numbered by claim.
func (p *Pool) claimed() uint64 {
	return p.claimWraps.Load()<<(64-claimShift) + p.claims.Load()>>claimShift
}

// claim numbers a new permit and, if slot, takes a spill slot with it. It
// fails, changing nothing, only when slot is true and none is available.
func (p *Pool) claim(slot bool) (n uint64, ok bool) {
	for {
		cur := p.claims.Load()
		next := cur + claimUnit // at the top of the count, wraps to 0
		if slot {
			if spillField(cur) < 1 {
				return 0, false
			}
			next--
		}
		if p.claims.CompareAndSwap(cur, next) {
			n = cur >> claimShift
			if n%permitBlockSize == 0 || n == claimMax {
				p.numbered(n)
			}
			return n, true
		}
	}
}

// numbered does the bookkeeping of a claimed permit number n: it counts a
// wrap at claimMax and prepares the next block at the first of each. claim
// tests for those cases itself, so that its common case costs no call.
func (p *Pool) numbered(n uint64) {
	if n == claimMax {
		p.claimWraps.Add(1)
	}
	if n%permitBlockSize == 0 {
		// First of its block: prepare the next block, so the next
		// permitBlockSize claimers find it ready.
		g := n/permitBlockSize + 1
		p.blocks[g%blockRing].Store(&permitBlock{gen: g})
	}
}

const (
	// permitBlockSize permits are allocated at once.
	permitBlockSize = 32
	// blockRing blocks are reachable from the pool at a time.
	blockRing = 4
)

// permitBlock holds the permits numbered gen*permitBlockSize onwards. Each
// slot is handed out once, to the claimer of its number, and never reused:
// a Release on a stale permit finds its own released flag set and does
// nothing, and the GC frees a block once none of its permits is reachable.
// Allocating permits in blocks halves the cost of a grant; the price is
// that a permit held for long keeps its block (about 1 KiB) alive.
type permitBlock struct {
	gen     uint64
	permits [permitBlockSize]Permit
}

// grant returns the permit numbered n, filled in for r.
func (p *Pool) grant(r Request, spill SpillGrant, n uint64) *Permit {
	var perm *Permit
	g := n / permitBlockSize
	if b := p.blocks[g%blockRing].Load(); b != nil && b.gen == g {
		perm = &b.permits[n%permitBlockSize]
	} else {
		// The claimer that prepares this block has not stored it yet (or
		// a slow one overwrote it): allocate this permit on its own.
		perm = new(Permit)
	}
	perm.pool = p
	perm.scan = r.ScanRingBytes
	perm.delta = r.DeltaCacheBytes
	perm.spill = spill
	return perm
}

// grantEmpty returns a permit for the empty Request.
func (p *Pool) grantEmpty() *Permit {
	n, _ := p.claim(false)
	return p.grant(Request{}, SpillNotRequested, n)
}
