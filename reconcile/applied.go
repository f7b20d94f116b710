package reconcile

import (
	"context"
	"maps"
	"slices"

	"github.com/rpdhq/rpd/backend"
)

// AppliedResource is one resource as the runtime document records it: what
// rpd last applied, in the plan's attribute rendering.
type AppliedResource struct {
	Address Address `json:"address"`
	Values  Values  `json:"values"`
}

// Applied lists the resources d records, in dependency order (queues,
// runner classes, budgets, VM ceilings, pools, priorities) and by name.
// Tables are not recorded in the document: they exist once apply has run.
func (d *RuntimeDoc) Applied() []AppliedResource {
	var out []AppliedResource
	for _, class := range slices.Sorted(maps.Keys(d.Queues)) {
		out = append(out, AppliedResource{Address{TypeQueue, class}, d.Queues[class].values(d.Stack)})
	}
	out = appendApplied(out, TypeRunnerClass, d.RunnerClasses)
	out = appendApplied(out, TypeBudget, d.Budgets)
	out = appendApplied(out, TypeVMCeiling, d.VMCeilings)
	out = appendApplied(out, TypePool, d.Pools)
	out = appendApplied(out, TypePriority, d.Priorities)
	return out
}

func appendApplied[E any](out []AppliedResource, typ ResourceType, m map[string]E) []AppliedResource {
	for _, name := range slices.Sorted(maps.Keys(m)) {
		out = append(out, AppliedResource{Address{typ, name}, entryValues(m[name])})
	}
	return out
}

// ReadApplied reads the runtime document of stack from st and its version;
// a state store never written holds an empty document (version 0). A
// document of another stack fails with ErrWrongStack.
func ReadApplied(ctx context.Context, st backend.StateStore, stack string) (*RuntimeDoc, int64, error) {
	return readDoc(ctx, st, stack)
}
