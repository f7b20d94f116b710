package fatjob

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
)

// The tests of seed 002, §9, by their names.

func TestBasicAcquisitionAndRelease(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 200 * mib, DeltaCacheBytes: 400 * mib, SpillSlots: LimitedSpill(4)})
	perm := mustAcquire(t, p, Request{ScanRingBytes: 50 * mib, DeltaCacheBytes: 100 * mib, NeedsSpillSlot: true})
	if got, want := perm.ScanRingBytes(), uint64(50*mib); got != want {
		t.Errorf("ScanRingBytes() = %d, want %d", got, want)
	}
	if got, want := perm.DeltaCacheBytes(), uint64(100*mib); got != want {
		t.Errorf("DeltaCacheBytes() = %d, want %d", got, want)
	}
	if got, want := perm.TotalBytes(), uint64(150*mib); got != want {
		t.Errorf("TotalBytes() = %d, want %d", got, want)
	}
	if !perm.CanSpill() || !perm.SpillIsLimited() {
		t.Errorf("CanSpill()=%v SpillIsLimited()=%v, want true true", perm.CanSpill(), perm.SpillIsLimited())
	}
	wantAvailable(t, p, 150*mib, 300*mib, 3)

	perm.Release()
	wantAvailable(t, p, 200*mib, 400*mib, 4)
	// The permit still reports what it held.
	if got := perm.TotalBytes(); got != 150*mib {
		t.Errorf("TotalBytes() after Release = %d, want %d", got, 150*mib)
	}
}

func TestEmptyRequestSucceeds(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 1, DeltaCacheBytes: 1, SpillSlots: LimitedSpill(1)})
	perm := mustAcquire(t, p, Request{})
	if perm.TotalBytes() != 0 || perm.CanSpill() || perm.Spill() != SpillNotRequested {
		t.Errorf("empty permit holds %d bytes, spill %v", perm.TotalBytes(), perm.Spill())
	}
	wantAvailable(t, p, 1, 1, 1)
	// Even an exhausted pool grants the empty request.
	full := mustAcquire(t, p, Request{ScanRingBytes: 1, DeltaCacheBytes: 1, NeedsSpillSlot: true})
	perm2 := mustAcquire(t, p, Request{})
	perm.Release()
	perm2.Release()
	wantAvailable(t, p, 0, 0, 0)
	full.Release()
	wantAvailable(t, p, 1, 1, 1)
}

func TestGlobalPoolPreventsOverCommit(t *testing.T) {
	// The seed's scenario: 200 MB scan ring, 400 MB delta; jobs of 50+100.
	p := newPool(t, Config{ScanRingBytes: 200 * mib, DeltaCacheBytes: 400 * mib, SpillSlots: LimitedSpill(8)})
	job := Request{ScanRingBytes: 50 * mib, DeltaCacheBytes: 100 * mib}
	var held []*Permit
	for i := range 4 {
		perm, ok := p.TryAcquire(job)
		if !ok {
			t.Fatalf("job %d denied with %d scan bytes free", i+1, p.ScanRingAvailable())
		}
		held = append(held, perm)
	}
	if _, ok := p.TryAcquire(job); ok {
		t.Fatal("job 5 granted: the pool over-committed")
	}
	if _, ok := p.TryAcquire(Request{ScanRingBytes: 1}); ok {
		t.Fatal("1 more scan byte granted on a full pool")
	}
	if _, ok := p.TryAcquire(Request{DeltaCacheBytes: math.MaxUint64}); ok {
		t.Fatal("granted more delta-cache bytes than a budget can hold")
	}
	wantAvailable(t, p, 0, 0, 8)
	for _, perm := range held {
		perm.Release()
	}
	wantAvailable(t, p, 200*mib, 400*mib, 8)
}

func TestPartialAcquisitionReleasesAll(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 100, DeltaCacheBytes: 100, SpillSlots: LimitedSpill(2)})
	// The scan ring fits, the delta cache does not: the scan ring taken first
	// must be given back.
	if _, ok := p.TryAcquire(Request{ScanRingBytes: 60, DeltaCacheBytes: 101}); ok {
		t.Fatal("request larger than the delta cache was granted")
	}
	wantAvailable(t, p, 100, 100, 2)
	hold := mustAcquire(t, p, Request{DeltaCacheBytes: 70})
	if _, ok := p.TryAcquire(Request{ScanRingBytes: 60, DeltaCacheBytes: 40, NeedsSpillSlot: true}); ok {
		t.Fatal("granted 40 delta bytes with 30 free")
	}
	wantAvailable(t, p, 100, 30, 2)
	hold.Release()
	if s := p.Stats(); s.Denied != 2 || s.Granted != 1 {
		t.Errorf("Stats: Denied=%d Granted=%d, want 2 and 1", s.Denied, s.Granted)
	}
}

func TestSpillSlotFailureReleasesBytes(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 100, DeltaCacheBytes: 100, SpillSlots: LimitedSpill(1)})
	slot := mustAcquire(t, p, Request{NeedsSpillSlot: true})
	if _, ok := p.TryAcquire(Request{ScanRingBytes: 10, DeltaCacheBytes: 20, NeedsSpillSlot: true}); ok {
		t.Fatal("granted a spill slot when none was free")
	}
	wantAvailable(t, p, 100, 100, 0)
	slot.Release()
	perm := mustAcquire(t, p, Request{ScanRingBytes: 10, DeltaCacheBytes: 20, NeedsSpillSlot: true})
	wantAvailable(t, p, 90, 80, 0)
	perm.Release()
	wantAvailable(t, p, 100, 100, 1)
}

func TestSpillOnlyRequestAcquiresSlot(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 100, DeltaCacheBytes: 100, SpillSlots: LimitedSpill(2)})
	a := mustAcquire(t, p, Request{NeedsSpillSlot: true})
	b := mustAcquire(t, p, Request{NeedsSpillSlot: true})
	if !a.SpillIsLimited() || a.TotalBytes() != 0 {
		t.Errorf("spill-only permit: limited=%v bytes=%d, want true 0", a.SpillIsLimited(), a.TotalBytes())
	}
	if _, ok := p.TryAcquire(Request{NeedsSpillSlot: true}); ok {
		t.Fatal("third spill slot granted out of 2")
	}
	wantAvailable(t, p, 100, 100, 0)
	a.Release()
	b.Release()
	wantAvailable(t, p, 100, 100, 2)
}

func TestUnlimitedSpillMode(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 100, DeltaCacheBytes: 100})
	var held []*Permit
	for range 100 {
		perm := mustAcquire(t, p, Request{ScanRingBytes: 1, NeedsSpillSlot: true})
		if !perm.CanSpill() || perm.SpillIsLimited() || perm.Spill() != SpillUnlimited {
			t.Fatalf("unlimited mode gave spill %v", perm.Spill())
		}
		held = append(held, perm)
	}
	wantAvailable(t, p, 0, 100, -1)
	if n, limited := p.SpillSlotsTotal(); limited {
		t.Errorf("SpillSlotsTotal() = %d, limited; want unlimited", n)
	}
	if s := p.Stats(); s.SpillSlotsInUse != 0 {
		t.Errorf("Stats().SpillSlotsInUse = %d in unlimited mode, want 0", s.SpillSlotsInUse)
	}
	for _, perm := range held {
		perm.Release()
	}
	wantAvailable(t, p, 100, 100, -1)
}

func TestConcurrentAcquisition(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 100, DeltaCacheBytes: 200, SpillSlots: LimitedSpill(3)})
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := 0
	for range 10 {
		wg.Go(func() {
			for range 1000 {
				perm, ok := p.TryAcquire(Request{ScanRingBytes: 30, DeltaCacheBytes: 60, NeedsSpillSlot: true})
				if !ok {
					continue
				}
				mu.Lock()
				granted++
				mu.Unlock()
				perm.Release()
			}
		})
	}
	wg.Wait()
	wantAvailable(t, p, 100, 200, 3)
	s := p.Stats()
	if s.Granted != uint64(granted) || s.Granted+s.Denied != 10*1000 {
		t.Errorf("Stats: Granted=%d Denied=%d; want Granted=%d and a sum of 10000", s.Granted, s.Denied, granted)
	}
	if granted == 0 {
		t.Error("no acquisition succeeded")
	}
}

func TestGitRepoHelper(t *testing.T) {
	r, err := GitRepo(50, 100, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Request{ScanRingBytes: 50 * mib, DeltaCacheBytes: 100 * mib, NeedsSpillSlot: true}); r != want {
		t.Errorf("GitRepo(50, 100, true) = %+v, want %+v", r, want)
	}
	r, err = GitRepo(0, 0, false)
	if err != nil || r != (Request{}) {
		t.Errorf("GitRepo(0, 0, false) = %+v, %v; want the empty request", r, err)
	}
	// The largest size that fits.
	maxMB := uint64(math.MaxUint64 >> 20)
	if r, err := GitRepo(maxMB, 1, false); err != nil || r.ScanRingBytes != maxMB<<20 {
		t.Errorf("GitRepo(%d, 1) = %+v, %v", maxMB, r, err)
	}
}

func TestGitRepoHelperRejectsOverflow(t *testing.T) {
	tests := []struct {
		name          string
		scan, delta   uint64
		wantInMessage string
	}{
		{"scan ring", math.MaxUint64>>20 + 1, 1, "scan ring"},
		{"delta cache", 1, math.MaxUint64, "delta cache"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := GitRepo(tt.scan, tt.delta, true)
			if !errors.Is(err, ErrRequestOverflow) {
				t.Fatalf("GitRepo(%d, %d) = %+v, %v; want ErrRequestOverflow", tt.scan, tt.delta, r, err)
			}
			if r != (Request{}) {
				t.Errorf("GitRepo returned %+v with an error, want the zero Request", r)
			}
			if !strings.Contains(err.Error(), tt.wantInMessage) {
				t.Errorf("error %q does not name %q", err, tt.wantInMessage)
			}
		})
	}
}

func TestArchiveHelper(t *testing.T) {
	r := Archive(10*mib, true)
	if want := (Request{ScanRingBytes: 10 * mib, NeedsSpillSlot: true}); r != want {
		t.Errorf("Archive(10 MiB, true) = %+v, want %+v", r, want)
	}
	if r := Archive(7, false); r != (Request{ScanRingBytes: 7}) {
		t.Errorf("Archive(7, false) = %+v", r)
	}
}

// The seed's configuration validation: zero scan ring, delta cache or spill
// slots are rejected (with errors rather than panics).
func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr []string // substrings, one per problem; nil = valid
	}{
		{"default", DefaultConfig(), nil},
		{"unlimited spill", Config{ScanRingBytes: 1, DeltaCacheBytes: 1}, nil},
		{"largest budgets", Config{ScanRingBytes: MaxBudgetBytes, DeltaCacheBytes: MaxBudgetBytes, SpillSlots: LimitedSpill(MaxSpillSlots)}, nil},
		{"too many spill slots", Config{ScanRingBytes: 1, DeltaCacheBytes: 1, SpillSlots: LimitedSpill(MaxSpillSlots + 1)}, []string{"16385 spill slots; use 1..16384"}},
		{"zero scan ring", Config{DeltaCacheBytes: 1, SpillSlots: LimitedSpill(1)}, []string{"scan ring budget is 0"}},
		{"zero delta cache", Config{ScanRingBytes: 1, SpillSlots: LimitedSpill(1)}, []string{"delta cache budget is 0"}},
		{"zero spill slots", Config{ScanRingBytes: 1, DeltaCacheBytes: 1, SpillSlots: LimitedSpill(0)}, []string{"0 spill slots"}},
		{"negative spill slots", Config{ScanRingBytes: 1, DeltaCacheBytes: 1, SpillSlots: LimitedSpill(-3)}, []string{"-3 spill slots"}},
		{"scan ring too large", Config{ScanRingBytes: MaxBudgetBytes + 1, DeltaCacheBytes: 1}, []string{"scan ring budget 9223372036854775808 exceeds"}},
		{"delta cache too large", Config{ScanRingBytes: 1, DeltaCacheBytes: math.MaxUint64}, []string{"delta cache budget 18446744073709551615 exceeds"}},
		{"zero value", Config{}, []string{"scan ring budget is 0", "delta cache budget is 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				p, err := New(tt.cfg)
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if p.ScanRingTotal() != tt.cfg.ScanRingBytes || p.DeltaCacheTotal() != tt.cfg.DeltaCacheBytes {
					t.Errorf("totals %d/%d, want %d/%d", p.ScanRingTotal(), p.DeltaCacheTotal(), tt.cfg.ScanRingBytes, tt.cfg.DeltaCacheBytes)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate() = %v, want ErrInvalidConfig", err)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Validate() = %q, want it to mention %q", err, want)
				}
			}
			if p, err2 := New(tt.cfg); p != nil || err2 == nil || err2.Error() != err.Error() {
				t.Errorf("New() = %v, %v; want nil and %v", p, err2, err)
			}
		})
	}
}

func TestDefaultConfig(t *testing.T) {
	cfg := DefaultConfig()
	if cfg.ScanRingBytes != 256*mib || cfg.DeltaCacheBytes != 512*mib || cfg.SpillSlots == nil || *cfg.SpillSlots != 16 {
		t.Errorf("DefaultConfig() = %d/%d/%v, want 256 MiB/512 MiB/16", cfg.ScanRingBytes, cfg.DeltaCacheBytes, cfg.SpillSlots)
	}
	p := newPool(t, cfg)
	wantAvailable(t, p, 256*mib, 512*mib, 16)
	// The pool keeps its own copy of the slot count.
	*cfg.SpillSlots = 1
	if n, _ := p.SpillSlotsTotal(); n != 16 {
		t.Errorf("SpillSlotsTotal() = %d after the caller changed its Config, want 16", n)
	}
	if got := p.Config(); *got.SpillSlots != 16 {
		t.Errorf("Config().SpillSlots = %d, want 16", *got.SpillSlots)
	}
}

// The seed's table of spill grants (§4).
func TestSpillGrantTable(t *testing.T) {
	tests := []struct {
		slots       *int
		needsSpill  bool
		want        SpillGrant
		canSpill    bool
		limited     bool
		wantStrings string
	}{
		{LimitedSpill(4), true, SpillLimited, true, true, "limited"},
		{LimitedSpill(4), false, SpillNotRequested, false, false, "not-requested"},
		{nil, true, SpillUnlimited, true, false, "unlimited"},
		{nil, false, SpillNotRequested, false, false, "not-requested"},
	}
	for _, tt := range tests {
		p := newPool(t, Config{ScanRingBytes: 10, DeltaCacheBytes: 10, SpillSlots: tt.slots})
		perm := mustAcquire(t, p, Request{ScanRingBytes: 1, NeedsSpillSlot: tt.needsSpill})
		if perm.Spill() != tt.want || perm.CanSpill() != tt.canSpill || perm.SpillIsLimited() != tt.limited || perm.Spill().String() != tt.wantStrings {
			t.Errorf("slots=%v needs=%v: got %v can=%v limited=%v, want %v %v %v",
				tt.slots != nil, tt.needsSpill, perm.Spill(), perm.CanSpill(), perm.SpillIsLimited(), tt.want, tt.canSpill, tt.limited)
		}
		perm.Release()
	}
	if got := SpillGrant(9).String(); got != "invalid" {
		t.Errorf("SpillGrant(9).String() = %q", got)
	}
}

func TestReleaseIsIdempotent(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 100, DeltaCacheBytes: 100, SpillSlots: LimitedSpill(1)})
	perm := mustAcquire(t, p, Request{ScanRingBytes: 40, DeltaCacheBytes: 40, NeedsSpillSlot: true})
	other := mustAcquire(t, p, Request{ScanRingBytes: 60, DeltaCacheBytes: 60})
	perm.Release()
	perm.Release()
	// A second Release must not free what `other` holds.
	wantAvailable(t, p, 40, 40, 1)
	other.Release()
	wantAvailable(t, p, 100, 100, 1)

	var nilPermit *Permit
	nilPermit.Release() // no panic
	var zero Permit
	zero.Release() // a permit no pool made frees nothing
	wantAvailable(t, p, 100, 100, 1)
}

func TestReleaseFromManyGoroutinesFreesOnce(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 100, DeltaCacheBytes: 100, SpillSlots: LimitedSpill(2)})
	for range 50 {
		perm := mustAcquire(t, p, Request{ScanRingBytes: 30, DeltaCacheBytes: 30, NeedsSpillSlot: true})
		keep := mustAcquire(t, p, Request{ScanRingBytes: 70, DeltaCacheBytes: 70, NeedsSpillSlot: true})
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(perm.Release)
		}
		wg.Wait()
		wantAvailable(t, p, 30, 30, 1)
		keep.Release()
	}
	wantAvailable(t, p, 100, 100, 2)
}

// Permits of two pools cannot be mixed up: each Release returns its
// resources to the pool that granted them.
func TestReleaseReturnsToOwnPool(t *testing.T) {
	a := newPool(t, Config{ScanRingBytes: 10, DeltaCacheBytes: 10, SpillSlots: LimitedSpill(1)})
	b := newPool(t, Config{ScanRingBytes: 20, DeltaCacheBytes: 20, SpillSlots: LimitedSpill(1)})
	pa := mustAcquire(t, a, Request{ScanRingBytes: 5, NeedsSpillSlot: true})
	pb := mustAcquire(t, b, Request{ScanRingBytes: 5})
	pa.Release()
	wantAvailable(t, a, 10, 10, 1)
	wantAvailable(t, b, 15, 20, 1)
	pb.Release()
	wantAvailable(t, b, 20, 20, 1)
}

// Every grant gets a permit of its own: permits held at once are distinct
// and all counted.
func TestPermitsAreDistinct(t *testing.T) {
	p := newPool(t, Config{ScanRingBytes: 1000, DeltaCacheBytes: 1000})
	seen := map[*Permit]bool{}
	var held []*Permit
	for range 100 {
		perm := mustAcquire(t, p, Request{ScanRingBytes: 1})
		if seen[perm] {
			t.Fatal("a permit was handed out twice")
		}
		seen[perm] = true
		held = append(held, perm)
	}
	if got, want := p.Stats().Granted, uint64(len(held)); got != want {
		t.Errorf("Stats().Granted = %d, want %d", got, want)
	}
	for i, perm := range held {
		if perm.ScanRingBytes() != 1 {
			t.Fatalf("permit %d holds %d", i, perm.ScanRingBytes())
		}
		perm.Release()
	}
	wantAvailable(t, p, 1000, 1000, -1)
}
