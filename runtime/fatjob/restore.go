package fatjob

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// ErrRestoreOverflow is returned by Restore when the permit would leave more
// held than the pool can count: more than MaxBudgetBytes of a budget, or
// MaxSpillSlots spill slots beyond the total.
var ErrRestoreOverflow = errors.New("fatjob: too much held to restore another permit")

// Restore re-creates a permit that was held before a restart: a daemon whose
// remote holders outlived it gives them back what they still hold. It takes
// r's resources unconditionally, without queuing and even if they are not
// available: when the budgets shrank while the holder was away, the pool is
// left holding more than its total, exactly as after a Reconfigure that
// shrinks below what is held — nothing is revoked, the available amounts
// read 0 and new requests wait until enough is released. A spill slot is
// counted only if the pool's spill slots are limited now.
//
// Restore does jump the queue, so call it before serving new requests.
// It fails only for a request no Config could hold (a byte count above
// MaxBudgetBytes) or, with ErrRestoreOverflow, when the bytes held of a
// budget would exceed MaxBudgetBytes, or the pool already counts
// MaxSpillSlots more spill slots held than it has. Holding at most
// MaxBudgetBytes keeps every counter in range through any later Reconfigure.
func (p *Pool) Restore(r Request) (*Permit, error) {
	if r.ScanRingBytes > MaxBudgetBytes || r.DeltaCacheBytes > MaxBudgetBytes {
		return nil, fmt.Errorf("fatjob: restore a permit of %d scan-ring and %d delta-cache bytes: more than MaxBudgetBytes", r.ScanRingBytes, r.DeltaCacheBytes)
	}
	if r.isEmpty() {
		p.claim(false)
		return newPermit(p.grantOf(r, SpillNotRequested)), nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	spill := SpillNotRequested
	if r.NeedsSpillSlot {
		spill = SpillUnlimited
		if p.cfg.SpillSlots != nil {
			spill = SpillLimited
			if p.spillAvailable() <= -MaxSpillSlots {
				return nil, fmt.Errorf("%w (%d counted slots held beyond the total)", ErrRestoreOverflow, -p.spillAvailable())
			}
		}
	}
	if err := p.restorableLocked(r); err != nil {
		return nil, err
	}
	// Close the gate, as Reconfigure does, so lock-free acquirers in flight
	// retry under the mutex instead of racing the forced take.
	p.gate.Add(gateEnter)
	defer p.gate.Add(gateLeave)
	lower(&p.floor[resScan], p.scan.Add(-int64(r.ScanRingBytes)))
	lower(&p.floor[resDelta], p.delta.Add(-int64(r.DeltaCacheBytes)))
	add := uint64(claimUnit)
	if spill == SpillLimited {
		add-- // the slot, taken even when none is free
	}
	w := p.claims.Add(add)
	p.counted(w - add)
	if spill == SpillLimited {
		lower(&p.floor[resSpill], spillField(w))
	}
	return newPermit(p.grantOf(r, spill)), nil
}

// restorableLocked reports ErrRestoreOverflow when taking r would leave more
// than MaxBudgetBytes held of a budget, the bound that keeps the signed
// counters from wrapping through this and any later Reconfigure. Held is
// total - available, which fits: the bound holds before the call. (A
// lock-free acquisition in flight can only make held look larger, and only
// while available stays >= 0, i.e. while held <= total.)
func (p *Pool) restorableLocked(r Request) error {
	for _, b := range [...]struct {
		what  string
		total uint64
		avail int64
		need  uint64
	}{
		{"scan-ring", p.cfg.ScanRingBytes, p.scan.Load(), r.ScanRingBytes},
		{"delta-cache", p.cfg.DeltaCacheBytes, p.delta.Load(), r.DeltaCacheBytes},
	} {
		held := b.total - uint64(b.avail) // two's complement: exact for avail < 0 too
		if b.need > MaxBudgetBytes-held {
			return fmt.Errorf("%w: %d %s bytes are held already; %d more would exceed %d", ErrRestoreOverflow, held, b.what, b.need, MaxBudgetBytes)
		}
	}
	return nil
}

// lower sets f to v if v is lower (f is written under Pool.mu only).
func lower(f *atomic.Int64, v int64) {
	if v < f.Load() {
		f.Store(v)
	}
}
