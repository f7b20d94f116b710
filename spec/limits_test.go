package spec

import (
	"testing"

	"github.com/rpdhq/rpd/runtime/fatjob"
)

// The language refuses what the runtime components would refuse, so that
// rpd validate catches it instead of a daemon's reload.
func TestLimitsMatchTheRuntime(t *testing.T) {
	if maxBudgetBytes != fatjob.MaxBudgetBytes {
		t.Errorf("spec allows budgets up to %d bytes, runtime/fatjob up to %d", uint64(maxBudgetBytes), fatjob.MaxBudgetBytes)
	}
	if maxSpillSlots != fatjob.MaxSpillSlots {
		t.Errorf("spec allows %d spill slots, runtime/fatjob %d", maxSpillSlots, fatjob.MaxSpillSlots)
	}
}
