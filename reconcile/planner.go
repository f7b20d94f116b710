package reconcile

// This file is the planning engine: MakePlan refreshes live state (the
// runtime document and the queues) and computes the Plan (plan.go, inert
// data) that Apply (apply.go) carries out.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/spec"
)

// PlanOptions tune MakePlan.
type PlanOptions struct {
	// Parallelism bounds concurrent backend calls (default 10).
	Parallelism int
	// Targets limits the plan to these addresses (and what they depend on).
	// An address that matches nothing is an error wrapping ErrUnknownTarget.
	Targets []Address
	// RefreshOnly plans no changes; applying the plan records drift as the
	// new applied state.
	RefreshOnly bool
	// Backend is recorded in the plan for apply to reopen.
	Backend backend.Config
	// Destroy plans deleting everything the stack manages, whatever the
	// configuration declares (it still names the stack and backend).
	Destroy bool
	// AllowDestroyNonEmpty lets the plan delete or replace queues that
	// hold idle runners and delete pools whose slots are held, which the
	// guards otherwise refuse; the plan records it for apply.
	AllowDestroyNonEmpty bool
}

// MakePlan refreshes live state and diffs it against desired. It reads only:
// nothing is created, not even the aws tables. desired must be a validated
// configuration.
//
// A destructive change that a guard refuses (a queue holding idle runners,
// a pool whose slots are held; see Plan.guard) makes the plan fail: the
// error joins one refusal per change, each wrapping ErrGuard, and no plan
// is returned, as Terraform's prevent_destroy fails a plan.
func MakePlan(ctx context.Context, desired *spec.Config, live Live, opts PlanOptions) (*Plan, error) {
	if opts.Parallelism <= 0 {
		opts.Parallelism = DefaultParallelism
	}
	if opts.Destroy && opts.RefreshOnly {
		return nil, errors.New("-destroy and -refresh-only cannot be combined: a destroy plan changes live objects")
	}
	stack := desired.Stack
	p := &Plan{
		FormatVersion:        PlanFormat,
		Stack:                stack,
		Backend:              opts.Backend,
		RefreshOnly:          opts.RefreshOnly,
		Destroy:              opts.Destroy,
		AllowDestroyNonEmpty: opts.AllowDestroyNonEmpty,
		Targets:              slices.Clone(opts.Targets),
		Fingerprints:         map[string]string{},
		Desired:              DesiredDoc(desired),
		LiveQueues:           map[string]QueueEntry{},
		Drift:                []Drift{},
		Warnings:             []Warning{},
		Changes:              []ResourceChange{},
	}
	if opts.Destroy {
		p.Desired = NewRuntimeDoc(stack)
	}

	stateReadable := true
	if live.Tables != nil {
		tables, err := live.Tables.Tables(ctx)
		if err != nil {
			return nil, fmt.Errorf("refresh tables: %w", err)
		}
		for _, t := range tables {
			addr := Address{TypeTable, t.Resource}
			v := Values{"name": t.Name}
			if t.Exists {
				p.Changes = append(p.Changes, ResourceChange{Address: addr, Action: NoOp, Before: v, After: v})
				p.Fingerprints["table "+t.Name] = "exists"
			} else {
				if !opts.Destroy { // nothing to destroy: no tables to create either
					p.Changes = append(p.Changes, ResourceChange{Address: addr, Action: Create, After: v})
				}
				p.Fingerprints["table "+t.Name] = "absent"
				stateReadable = false
			}
		}
	}

	cur := NewRuntimeDoc(stack)
	if stateReadable {
		doc, version, err := readDoc(ctx, live.State, stack)
		if err != nil {
			return nil, err
		}
		cur, p.StateVersion = doc, version
	}
	p.Lineage = cur.Lineage

	infos, err := refreshQueues(ctx, live.Queues, stack, p.Desired, cur, opts.Parallelism)
	if err != nil {
		return nil, err
	}
	for name, info := range infos.byName {
		p.Fingerprints["queue "+name] = fingerprint(info)
	}
	if err := checkManaged(stack, infos); err != nil {
		return nil, err
	}

	var held map[string]int
	if live.Held != nil {
		if held, err = live.Held.HeldSlots(ctx); err != nil {
			return nil, fmt.Errorf("read held pool slots: %w", err)
		}
	}
	var inUse map[string]BudgetUse
	if live.Budgets != nil {
		if inUse, err = live.Budgets.BudgetsInUse(ctx); err != nil {
			return nil, fmt.Errorf("read budgets in use: %w", err)
		}
	}

	p.planQueues(cur, infos)
	if !opts.RefreshOnly {
		planRuntime(p, TypeRunnerClass, cur.RunnerClasses, p.Desired.RunnerClasses)
		planRuntime(p, TypeBudget, cur.Budgets, p.Desired.Budgets)
		planRuntime(p, TypeVMCeiling, cur.VMCeilings, p.Desired.VMCeilings)
		planRuntime(p, TypePool, cur.Pools, p.Desired.Pools)
		planRuntime(p, TypePriority, cur.Priorities, p.Desired.Priorities)
	} else {
		p.Changes = p.Changes[:0]
	}
	slices.SortStableFunc(p.Changes, func(a, b ResourceChange) int { return compareAddr(a.Address, b.Address) })

	if len(opts.Targets) > 0 {
		if err := p.applyTargets(opts.Targets); err != nil {
			return nil, err
		}
	}
	if opts.Destroy && stateReadable && live.Leases != nil && len(opts.Targets) == 0 {
		if p.LeaseRecords, err = live.Leases.CountLeaseRecords(ctx); err != nil {
			return nil, fmt.Errorf("count the recorded leases: %w", err)
		}
	}
	p.warn(infos, cur, held, inUse)
	var refusals Refusals
	for _, c := range p.Changes {
		w, err := p.guard(c, infos.byName, cur, held, opts.AllowDestroyNonEmpty)
		if err != nil {
			refusals = append(refusals, err)
		} else if w != "" {
			p.Warnings = append(p.Warnings, Warning{c.Address, w})
		}
	}
	if len(refusals) > 0 {
		return nil, refusals
	}
	slices.SortStableFunc(p.Drift, func(a, b Drift) int { return compareAddr(a.Address, b.Address) })
	return p, nil
}

func compareAddr(a, b Address) int {
	switch {
	case a.Less(b):
		return -1
	case b.Less(a):
		return 1
	}
	return 0
}

// readDoc reads and decodes the runtime document; an empty store is an
// empty document.
func readDoc(ctx context.Context, st backend.StateStore, stack string) (*RuntimeDoc, int64, error) {
	b, version, err := st.ReadState(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("read state: %w", err)
	}
	if b == nil {
		return NewRuntimeDoc(stack), version, nil
	}
	doc, err := DecodeRuntimeDoc(b)
	if err != nil {
		return nil, 0, fmt.Errorf("read state (version %d): %w", version, err)
	}
	if doc.Stack != stack {
		return nil, 0, fmt.Errorf("%w: the state store holds stack %q, but the configuration is stack %q; point the backend elsewhere or fix rpd { stack = … }", ErrWrongStack, doc.Stack, stack)
	}
	return doc, version, nil
}

// refreshed is the result of refreshing queues: every refreshed name (nil
// info: absent) and the stack-tagged queues that exist without being
// recorded (found by the default name prefix, or in RuntimeDoc.Creating).
type refreshed struct {
	byName  map[string]*backend.QueueInfo
	orphans map[string]string // class key -> queue name
	// strays are stack-tagged queues that are not recorded and whose class
	// already has another live queue: rpd leaves them alone and warns.
	strays []string
}

func refreshQueues(ctx context.Context, qa backend.QueueAdmin, stack string, desired, cur *RuntimeDoc, parallelism int) (*refreshed, error) {
	known := map[string]bool{}
	for _, q := range desired.Queues {
		known[q.Name] = true
	}
	for _, q := range cur.Queues {
		known[q.Name] = true
	}
	prefix := DefaultQueueName(stack, "")
	listed, err := qa.ListQueues(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("list queues with prefix %q: %w", prefix, err)
	}
	candidates := map[string]string{} // unrecorded queue name -> class
	for _, n := range listed {
		if !known[n] {
			candidates[n] = strings.TrimPrefix(n, prefix)
		}
	}
	for n, class := range cur.Creating {
		if !known[n] {
			candidates[n] = class
		}
	}
	names := slices.Sorted(maps.Keys(known))
	for n := range candidates {
		names = append(names, n)
	}
	byName, err := describeAll(ctx, qa, names, parallelism)
	if err != nil {
		return nil, err
	}
	r := &refreshed{byName: byName, orphans: map[string]string{}}
	for _, n := range slices.Sorted(maps.Keys(candidates)) {
		info := byName[n]
		if info == nil || info.Attributes.Tags[backend.StackTag] != stack {
			if _, creating := cur.Creating[n]; !creating || info != nil {
				delete(byName, n) // not ours: never touched, never fingerprinted
			}
			continue
		}
		class := candidates[n]
		// The class's recorded queue, when it still exists, is the one
		// rpd manages; a second one is left alone.
		if rec, ok := cur.Queues[class]; ok && byName[rec.Name] != nil {
			r.strays = append(r.strays, n)
			continue
		}
		if _, dup := r.orphans[class]; dup {
			r.strays = append(r.strays, n)
			continue
		}
		r.orphans[class] = n
	}
	return r, nil
}

// describeAll describes names with bounded parallelism; a missing queue
// maps to nil.
func describeAll(ctx context.Context, qa backend.QueueAdmin, names []string, parallelism int) (map[string]*backend.QueueInfo, error) {
	out := make([]*backend.QueueInfo, len(names))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallelism)
	for i, n := range names {
		g.Go(func() error {
			info, err := qa.DescribeQueue(gctx, n)
			switch {
			case errors.Is(err, backend.ErrQueueNotFound):
				return nil
			case err != nil:
				return fmt.Errorf("refresh queue %q: %w", n, err)
			}
			out[i] = &info
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	m := make(map[string]*backend.QueueInfo, len(names))
	for i, n := range names {
		m[n] = out[i]
	}
	return m, nil
}

func checkManaged(stack string, r *refreshed) error {
	var errs []error
	for _, n := range slices.Sorted(maps.Keys(r.byName)) {
		info := r.byName[n]
		if info == nil {
			continue
		}
		if owner := info.Attributes.Tags[backend.StackTag]; owner != stack {
			who := "has no " + backend.StackTag + " tag"
			if owner != "" {
				who = "belongs to rpd stack " + owner
			}
			errs = append(errs, fmt.Errorf("queue %s exists but is not managed by rpd stack %s (it %s): %w; give the runner class another queue name (queue { name = … }) or remove that queue yourself", n, stack, who, ErrNotManaged))
		}
	}
	return errors.Join(errs...)
}

// fingerprint hashes the attributes rpd manages (not the message counts,
// which change all the time).
func fingerprint(info *backend.QueueInfo) string {
	if info == nil {
		return "absent"
	}
	h := sha256.New()
	a := info.Attributes
	fmt.Fprintf(h, "%s\x00%d\x00%d\x00%d\x00%s", info.Name, a.VisibilityTimeout, a.Retention, a.Delay, a.Tags[backend.StackTag])
	return hex.EncodeToString(h.Sum(nil)[:12])
}

func liveQueueEntry(info *backend.QueueInfo) QueueEntry {
	return QueueEntry{
		Name:              info.Name,
		VisibilityTimeout: Duration(info.Attributes.VisibilityTimeout),
		Retention:         Duration(info.Attributes.Retention),
		Delay:             Duration(info.Attributes.Delay),
	}
}

func liveQueueValues(info *backend.QueueInfo, stack string) Values {
	return liveQueueEntry(info).values(info.Attributes.Tags[backend.StackTag])
}

// planQueues decides each queue's change and records drift. A queue is
// keyed by its runner class; its live object is found under the name rpd
// recorded and under the desired name.
func (p *Plan) planQueues(cur *RuntimeDoc, r *refreshed) {
	stack := p.Stack
	keys := map[string]bool{}
	for k := range p.Desired.Queues {
		keys[k] = true
	}
	for k := range cur.Queues {
		keys[k] = true
	}
	for k := range r.orphans {
		keys[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		addr := Address{TypeQueue, k}
		des, hasDes := p.Desired.Queues[k]
		rec, hasRec := cur.Queues[k]
		var recInfo *backend.QueueInfo
		if hasRec {
			recInfo = r.byName[rec.Name]
		}
		if n, ok := r.orphans[k]; ok && recInfo == nil {
			// An unrecorded queue of this class, left by an interrupted
			// apply, stands in for the recorded one (which is gone):
			// never recorded, so no drift to report.
			recInfo = r.byName[n]
			rec, hasRec = liveQueueEntry(recInfo), true
		} else if hasRec && !rec.Retired {
			// A retired queue is one rpd itself is deleting: no drift.
			p.driftQueue(addr, rec, recInfo)
		}
		if recInfo != nil {
			p.LiveQueues[k] = liveQueueEntry(recInfo)
		}
		if !hasDes {
			if recInfo == nil {
				p.Forget = append(p.Forget, k)
				continue
			}
			p.Changes = append(p.Changes, ResourceChange{Address: addr, Action: Delete, Before: liveQueueValues(recInfo, stack)})
			continue
		}
		after := des.values(stack)
		if hasRec && rec.Name != des.Name && recInfo != nil {
			p.Changes = append(p.Changes, ResourceChange{
				Address: addr, Action: DeleteThenCreate,
				Before: liveQueueValues(recInfo, stack), After: after,
				ReplacePaths: [][]string{{"name"}},
			})
			continue
		}
		info := r.byName[des.Name]
		if info == nil {
			p.Changes = append(p.Changes, ResourceChange{Address: addr, Action: Create, After: after})
			continue
		}
		p.LiveQueues[k] = liveQueueEntry(info)
		before := liveQueueValues(info, stack)
		act := NoOp
		if len(ChangedAttributes(before, after)) > 0 {
			act = Update
		}
		p.Changes = append(p.Changes, ResourceChange{Address: addr, Action: act, Before: before, After: after})
	}
}

func (p *Plan) driftQueue(addr Address, rec QueueEntry, info *backend.QueueInfo) {
	applied := rec.values(p.Stack)
	if info == nil {
		p.Drift = append(p.Drift, Drift{Address: addr, Before: applied})
		return
	}
	now := liveQueueValues(info, p.Stack)
	if len(ChangedAttributes(applied, now)) > 0 {
		p.Drift = append(p.Drift, Drift{Address: addr, Before: applied, After: now})
	}
}

// planRuntime diffs one kind of runtime resource: the live object is the
// entry in the current runtime document.
func planRuntime[E comparable](p *Plan, typ ResourceType, cur, desired map[string]E) {
	for _, name := range sortedUnion(cur, desired) {
		addr := Address{typ, name}
		c, hasCur := cur[name]
		d, hasDes := desired[name]
		switch {
		case !hasCur:
			p.Changes = append(p.Changes, ResourceChange{Address: addr, Action: Create, After: entryValues(d)})
		case !hasDes:
			p.Changes = append(p.Changes, ResourceChange{Address: addr, Action: Delete, Before: entryValues(c)})
		default:
			before, after := entryValues(c), entryValues(d)
			act := NoOp
			if c != d && len(ChangedAttributes(before, after)) > 0 {
				act = Update
			}
			p.Changes = append(p.Changes, ResourceChange{Address: addr, Action: act, Before: before, After: after})
		}
	}
}

func sortedUnion[E any](a, b map[string]E) []string {
	keys := make([]string, 0, len(b)+8)
	for k := range b {
		keys = append(keys, k)
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// applyTargets keeps only the targeted changes and what they need: a
// runner class needs its queue; deleting a queue needs its class's entry
// gone first.
func (p *Plan) applyTargets(targets []Address) error {
	index := map[Address]int{}
	for i, c := range p.Changes {
		index[c.Address] = i
	}
	keep := map[Address]bool{}
	var errs []error
	for _, t := range targets {
		if _, ok := index[t]; !ok {
			errs = append(errs, fmt.Errorf("-target %s: %w in the configuration or the state; run rpd plan without -target to see every address", t, ErrUnknownTarget))
			continue
		}
		keep[t] = true
		switch t.Type {
		case TypeRunnerClass:
			keep[Address{TypeQueue, t.Name}] = true
		case TypeQueue:
			keep[Address{TypeRunnerClass, t.Name}] = true
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	p.Changes = slices.DeleteFunc(p.Changes, func(c ResourceChange) bool {
		if !keep[c.Address] {
			return true
		}
		return false
	})
	p.Drift = slices.DeleteFunc(p.Drift, func(d Drift) bool { return !keep[d.Address] })
	p.Forget = nil
	return nil
}

// warn adds the live impact of the planned changes.
func (p *Plan) warn(r *refreshed, cur *RuntimeDoc, held map[string]int, inUse map[string]BudgetUse) {
	for _, n := range r.strays {
		p.Warnings = append(p.Warnings, Warning{Address{TypeQueue, n}, fmt.Sprintf(
			"queue %s is tagged for stack %s but rpd has no record of it, and its class already has a queue; rpd leaves it alone — delete it yourself if it is not needed", n, p.Stack)})
	}
	for _, c := range p.Changes {
		switch c.Address.Type {
		case TypePool:
			h := held[c.Address.Name]
			if h == 0 || c.Action != Update {
				continue
			}
			slots := p.Desired.Pools[c.Address.Name].Slots
			if slots >= h {
				continue
			}
			verb := "shrinking"
			if cur != nil {
				if old, ok := cur.Pools[c.Address.Name]; ok && slots >= old.Slots {
					verb = "growing" // still below what is held (after an earlier shrink)
				}
			}
			p.Warnings = append(p.Warnings, Warning{c.Address, fmt.Sprintf(
				"%s: %s held; %s to %d makes new requests wait until %d %s released", c.Address, plural(h, "slot"), verb, slots, h-slots, isAre(h-slots))})
		case TypeBudget:
			use, ok := inUse[c.Address.Name]
			if !ok || c.Action != Update {
				continue
			}
			b := p.Desired.Budgets[c.Address.Name]
			var low []string
			if b.ScanRing < use.ScanRing {
				low = append(low, fmt.Sprintf("scan_ring %s < %s in use", sizeValue(b.ScanRing), sizeValue(use.ScanRing)))
			}
			if b.DeltaCache < use.DeltaCache {
				low = append(low, fmt.Sprintf("delta_cache %s < %s in use", sizeValue(b.DeltaCache), sizeValue(use.DeltaCache)))
			}
			if b.SpillSlots.Set && b.SpillSlots.Value < use.SpillSlots {
				low = append(low, fmt.Sprintf("spill_slots %d < %d in use", b.SpillSlots.Value, use.SpillSlots))
			}
			if len(low) > 0 {
				p.Warnings = append(p.Warnings, Warning{c.Address, fmt.Sprintf(
					"%s: lowered below what is in use (%s); held permits are kept and new ones wait until enough is released", c.Address, strings.Join(low, ", "))})
			}
		}
	}
}

// guard checks one planned change against the guards, which protect what
// live objects hold: deleting or replacing a queue that holds idle runners
// (they would be discarded), and deleting a pool whose slots are held
// (its holders would be stranded). It returns the refusal, wrapping
// ErrGuard, or, when the change is allowed all the same (allowNonEmpty, or
// allow_destroy on the class or the applied pool), a warning of what it
// loses. Both are empty when no guard applies.
//
// A refusal's advice must work when the change removes the block itself:
// the flag, or keeping the block with allow_destroy = true for one apply.
func (p *Plan) guard(c ResourceChange, infos map[string]*backend.QueueInfo, cur *RuntimeDoc, held map[string]int, allowNonEmpty bool) (string, error) {
	switch {
	case c.Address.Type == TypeQueue && c.Action.IsDestructive():
		name, _ := c.Before["name"].(string)
		info := infos[name]
		if info == nil {
			return "", nil
		}
		n := info.Visible + info.InFlight + info.Delayed
		if n == 0 {
			return "", nil
		}
		class := c.Address.Name
		what := fmt.Sprintf("%s: queue %s holds %s (%d visible, %d in flight, %d delayed)", c.Address, info.Name, plural(n, "idle runner"), info.Visible, info.InFlight, info.Delayed)
		if allowNonEmpty || p.Desired.RunnerClasses[class].AllowDestroy || (c.Action == Delete && cur.RunnerClasses[class].AllowDestroy) {
			return fmt.Sprintf("%s; %s it discards %s", what, verbing(c.Action), them(n)), nil
		}
		return "", &guardError{fmt.Sprintf("%s; %s it would discard %s, so rpd refuses and changes nothing. To discard %s, run again with -allow-destroy-nonempty; or set allow_destroy = true on runner_class %q and apply that first (keeping the block for that one apply if this change removes it)",
			what, verbing(c.Action), them(n), them(n), class)}
	case c.Address.Type == TypePool && c.Action == Delete:
		n := held[c.Address.Name]
		if n == 0 {
			return "", nil
		}
		what := fmt.Sprintf("%s: %s held", c.Address, plural(n, "slot"))
		if allowNonEmpty || cur.Pools[c.Address.Name].AllowDestroy {
			return what + "; deleting it revokes what is held", nil
		}
		holders, released := "their holders", "they are"
		if n == 1 {
			holders, released = "its holder", "it is"
		}
		return "", &guardError{fmt.Sprintf("%s; deleting it would strand %s, so rpd refuses and changes nothing. Wait until %s released; or run again with -allow-destroy-nonempty; or set allow_destroy = true on pool %q and apply that first (keeping the block for that one apply if this change removes it)",
			what, holders, released, c.Address.Name)}
	}
	return "", nil
}

// guardError is a guard's refusal: its message says what and what to do,
// without a suffix, and it matches ErrGuard.
type guardError struct{ msg string }

func (e *guardError) Error() string { return e.msg }

func (e *guardError) Is(target error) bool { return target == ErrGuard }

func verbing(a Action) string {
	if a == DeleteThenCreate {
		return "replacing"
	}
	return "deleting"
}

// plural is "1 slot", "2 slots".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func them(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}
