package fatjob

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

const mib = 1 << 20

func newPool(t testing.TB, cfg Config, opts ...Option) *Pool {
	t.Helper()
	p, err := New(cfg, opts...)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return p
}

func mustAcquire(t testing.TB, p *Pool, r Request) *Permit {
	t.Helper()
	perm, ok := p.TryAcquire(r)
	if !ok {
		t.Fatalf("TryAcquire(%+v) failed; available scan=%d delta=%d", r, p.ScanRingAvailable(), p.DeltaCacheAvailable())
	}
	return perm
}

// wantAvailable checks the monitoring methods against the expected amounts;
// spill < 0 means unlimited.
func wantAvailable(t testing.TB, p *Pool, scan, delta uint64, spill int) {
	t.Helper()
	if got := p.ScanRingAvailable(); got != scan {
		t.Errorf("ScanRingAvailable() = %d, want %d", got, scan)
	}
	if got := p.DeltaCacheAvailable(); got != delta {
		t.Errorf("DeltaCacheAvailable() = %d, want %d", got, delta)
	}
	n, limited := p.SpillSlotsAvailable()
	switch {
	case spill < 0 && limited:
		t.Errorf("SpillSlotsAvailable() = %d, limited; want unlimited", n)
	case spill >= 0 && (!limited || n != spill):
		t.Errorf("SpillSlotsAvailable() = %d, %v; want %d, limited", n, limited, spill)
	}
	if err := p.checkInvariants(); err != nil {
		t.Error(err)
	}
}

// checkInvariants checks, under the lock (so no Reconfigure runs), that no
// budget's available amount is below min(0, its floor) nor above its total:
// grants never take more than is free, releases never give back more than
// was taken.
func (p *Pool) checkInvariants() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	totals := [3]int64{int64(p.cfg.ScanRingBytes), int64(p.cfg.DeltaCacheBytes), p.cfg.spillTotal()}
	avail := [3]int64{p.scan.Load(), p.delta.Load(), p.spillAvailable()}
	names := [3]string{"scan ring", "delta cache", "spill slots"}
	for i := range totals {
		floor := min(0, p.floor[i].Load())
		if avail[i] < floor || avail[i] > totals[i] {
			return fmt.Errorf("%s: available %d outside [%d, %d] (total %d): held exceeds what grants allow",
				names[i], avail[i], floor, totals[i], totals[i])
		}
	}
	if n, want := uint32(p.gate.Load()), uint32(p.queue.Len()); n != want {
		return fmt.Errorf("gate counts %d queued requests, queue holds %d", n, want)
	}
	return nil
}

// fakeClock is a manual clock for WithClock.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }
