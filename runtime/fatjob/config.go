package fatjob

import (
	"errors"
	"fmt"
	"math"
)

// Default budgets of a pool (docs/language.md, budget).
const (
	DefaultScanRingBytes   uint64 = 256 << 20 // 256 MiB
	DefaultDeltaCacheBytes uint64 = 512 << 20 // 512 MiB
	DefaultSpillSlots             = 16
)

// MaxBudgetBytes is the largest byte budget a Config may hold. The pool keeps
// its counters as signed 64-bit integers so that a shrink below what is held
// can be represented (see Pool.Reconfigure).
const MaxBudgetBytes uint64 = math.MaxInt64

// ErrInvalidConfig is wrapped by every error Config.Validate returns.
var ErrInvalidConfig = errors.New("fatjob: invalid config")

// Config is the budget of a Pool. The zero value is not valid; start from
// DefaultConfig.
type Config struct {
	// ScanRingBytes is the total scan-ring memory shared by all permits.
	// It must be in 1..MaxBudgetBytes.
	ScanRingBytes uint64
	// DeltaCacheBytes is the total delta-cache memory shared by all permits.
	// It must be in 1..MaxBudgetBytes.
	DeltaCacheBytes uint64
	// SpillSlots is the number of permits that may hold a spill slot at once.
	// nil means spilling is unlimited: a request for a slot is granted
	// without counting. A non-nil value must be at least 1; use
	// LimitedSpill to build one, at most MaxSpillSlots.
	SpillSlots *int
	// MaxQueued caps the requests waiting in Acquire; one more fails at
	// once with ErrQueueFull. 0 means unbounded. Lowering it drops no
	// request already waiting.
	MaxQueued int
}

// DefaultConfig returns the documented defaults (docs/language.md, budget): 256 MiB of scan ring, 512 MiB of
// delta cache and 16 spill slots.
func DefaultConfig() Config {
	return Config{
		ScanRingBytes:   DefaultScanRingBytes,
		DeltaCacheBytes: DefaultDeltaCacheBytes,
		SpillSlots:      LimitedSpill(DefaultSpillSlots),
	}
}

// LimitedSpill returns a pointer to n, for Config.SpillSlots.
func LimitedSpill(n int) *int { return &n }

// Validate reports every problem with c, each wrapped in ErrInvalidConfig
// and joined with errors.Join; it returns nil for a usable config.
func (c Config) Validate() error {
	var errs []error
	if c.ScanRingBytes == 0 {
		errs = append(errs, fmt.Errorf("%w: scan ring budget is 0 bytes; set ScanRingBytes to at least 1 (default %d)", ErrInvalidConfig, DefaultScanRingBytes))
	} else if c.ScanRingBytes > MaxBudgetBytes {
		errs = append(errs, fmt.Errorf("%w: scan ring budget %d exceeds the maximum %d bytes", ErrInvalidConfig, c.ScanRingBytes, MaxBudgetBytes))
	}
	if c.DeltaCacheBytes == 0 {
		errs = append(errs, fmt.Errorf("%w: delta cache budget is 0 bytes; set DeltaCacheBytes to at least 1 (default %d)", ErrInvalidConfig, DefaultDeltaCacheBytes))
	} else if c.DeltaCacheBytes > MaxBudgetBytes {
		errs = append(errs, fmt.Errorf("%w: delta cache budget %d exceeds the maximum %d bytes", ErrInvalidConfig, c.DeltaCacheBytes, MaxBudgetBytes))
	}
	if c.SpillSlots != nil && (*c.SpillSlots < 1 || *c.SpillSlots > MaxSpillSlots) {
		errs = append(errs, fmt.Errorf("%w: %d spill slots; use 1..%d, or nil for unlimited spilling", ErrInvalidConfig, *c.SpillSlots, MaxSpillSlots))
	}
	if c.MaxQueued < 0 {
		errs = append(errs, fmt.Errorf("%w: max queued %d; use 0 for unbounded", ErrInvalidConfig, c.MaxQueued))
	}
	return errors.Join(errs...)
}

// spillTotal is the counted spill budget: the slot count, or 0 when spilling
// is unlimited (nothing is counted against it then).
func (c Config) spillTotal() int64 {
	if c.SpillSlots == nil {
		return 0
	}
	return int64(*c.SpillSlots)
}
