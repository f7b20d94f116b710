package reconcile

import (
	"context"

	"github.com/rpdhq/rpd/backend"
)

// Live is everything Plan and Apply read and change. Queues, State and Lock
// come from the backend; the rest is optional and only makes the plan's
// live-impact warnings and guards more precise.
type Live struct {
	Queues backend.QueueAdmin
	State  backend.StateStore
	Lock   backend.Locker // needed by Apply only

	// Tables, when set (the aws backend), adds the table.* resources: plan
	// shows the tables that are missing and apply creates them before it
	// takes the lock (the lock lives in one of them).
	Tables backend.TableAdmin
	// Held, when set, tells how many slots each pool's holders hold; plan
	// warns about shrinking below it and apply refuses to delete a pool
	// with holders.
	Held HeldSlotsReader
	// Budgets, when set, tells what each budget has in use; plan warns
	// about lowering a budget below it.
	Budgets BudgetUsageReader
	// Leases, when set, are the grants a daemon recorded in the backend;
	// a destroy plan counts them and its apply removes them.
	Leases LeaseRecords
}

// LeaseRecords are the grants (pool leases, budget permits, ceiling
// claims) a daemon records in the backend so that a restart keeps them.
type LeaseRecords interface {
	// CountLeaseRecords returns how many records there are.
	CountLeaseRecords(ctx context.Context) (int, error)
	// DeleteLeaseRecords removes every record and returns how many it
	// removed; on error, some may have been removed.
	DeleteLeaseRecords(ctx context.Context) (int, error)
}

// HeldSlotsReader reports the slots currently held per pool name.
type HeldSlotsReader interface {
	HeldSlots(ctx context.Context) (map[string]int, error)
}

// HeldSlotsFunc adapts a function to HeldSlotsReader.
type HeldSlotsFunc func(ctx context.Context) (map[string]int, error)

// HeldSlots calls f.
func (f HeldSlotsFunc) HeldSlots(ctx context.Context) (map[string]int, error) { return f(ctx) }

// BudgetUse is what a budget has handed out.
type BudgetUse struct {
	ScanRing   uint64
	DeltaCache uint64
	SpillSlots int
}

// BudgetUsageReader reports what each budget has in use.
type BudgetUsageReader interface {
	BudgetsInUse(ctx context.Context) (map[string]BudgetUse, error)
}
