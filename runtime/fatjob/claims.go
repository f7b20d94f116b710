package fatjob

// Every grant is counted in the pool's claim word, and a permit with a
// limited spill slot also takes the slot, in the same compare-and-swap:
//
//	claims = count<<claimShift | (available spill slots + spillBias)
//
// The count is Stats.Granted (before subtracting grants that never reached
// a caller). Merging the two is what keeps the lock-free path to one atomic
// operation per counter of the baseline plus the permit's release flag.
//
// The slot field is biased so it never goes negative: available slots range
// from -2*MaxSpillSlots to MaxSpillSlots, so adding or subtracting a count
// in that range never carries into or borrows from the count. The low end
// is reached only through Restore, which takes slots without checking that
// any is free but stops at MaxSpillSlots beyond the total (so at most
// 2*MaxSpillSlots are held); a shrink to zero counted slots then leaves
// -2*MaxSpillSlots = -spillBias, a field of 0. The count wraps after 2^48
// grants; claimWraps keeps the high part for Stats (which may read 2^48 low
// for the instant between a wrapping claim and its claimWraps update).

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

// claimed returns how many grants claim has counted.
func (p *Pool) claimed() uint64 {
	return p.claimWraps.Load()<<(64-claimShift) + p.claims.Load()>>claimShift
}

// claim counts a new permit and, if slot, takes a spill slot with it. It
// fails, changing nothing, only when slot is true and none is available.
func (p *Pool) claim(slot bool) bool {
	for {
		cur := p.claims.Load()
		next := cur + claimUnit // at the top of the count, wraps to 0
		if slot {
			if spillField(cur) < 1 {
				return false
			}
			next--
		}
		if p.claims.CompareAndSwap(cur, next) {
			p.counted(cur)
			return true
		}
	}
}

// counted keeps Stats.Granted right across a wrap of the count: call it
// with the claim word as it was before a grant was counted in it.
func (p *Pool) counted(prev uint64) {
	if prev>>claimShift == claimMax {
		p.claimWraps.Add(1)
	}
}

// grant is what a permit holds: resources taken from pool (nil for no
// grant).
type grant struct {
	pool  *Pool
	scan  uint64
	delta uint64
	spill SpillGrant
}

// put returns g's resources to its pool without waking waiters.
func (g *grant) put() {
	g.pool.put(g.scan, g.delta, g.spill == SpillLimited)
}

func (p *Pool) grantOf(r Request, spill SpillGrant) grant {
	return grant{pool: p, scan: r.ScanRingBytes, delta: r.DeltaCacheBytes, spill: spill}
}

// newPermit returns a new permit for g. Every grant gets a permit of its
// own that is never reused, so a stale Release (a second call, or one from
// a holder that kept the pointer) finds its own released flag set and frees
// nothing of anybody else's.
//
// Restore uses it. TryAcquire and Acquire write the same literal
// themselves, in a body small enough to be inlined into their callers (a
// call to newPermit would not fit the inlining budget): a caller that does
// not keep the permit beyond its own frame (acquire, work, release) gets it
// on its stack, and one that keeps it pays the one allocation of the permit
// itself.
func newPermit(g grant) *Permit { return &Permit{grant: g} }
