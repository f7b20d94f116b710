package reconcile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rpdhq/rpd/backend"
	"golang.org/x/sync/errgroup"
)

// ApplyOptions tune Apply.
type ApplyOptions struct {
	// Who and Operation describe the lock holder ("alice@build-3", "apply").
	Who       string
	Operation string
	// LockTimeout is how long to keep retrying while someone else holds
	// the lock (0: fail at once with the holder's info).
	LockTimeout time.Duration
	// LockTTL is the lease of the lock (default 1m), renewed every third
	// of it while Apply runs, so a killed apply frees the lock by itself.
	LockTTL time.Duration
	// Parallelism bounds concurrent backend calls (default 10).
	Parallelism int
	// AllowDestroyNonEmpty lets apply delete or replace queues that still
	// hold messages (idle runners) and delete pools whose slots are held,
	// like the plan's option of the same name (either one suffices).
	AllowDestroyNonEmpty bool
	// Progress, when set, receives an event as each change starts, every
	// StillInterval while it runs, and when it ends. Calls are serialized.
	Progress func(Event)
	// StillInterval is the period of EventStill (default 10s).
	StillInterval time.Duration
	// Stop, when closed, makes Apply start no further change: in-flight
	// calls finish, what is done is recorded, and the rest is skipped.
	// Cancelling ctx instead aborts in-flight calls too.
	Stop <-chan struct{}
	// Lock, when set, is a lock the caller already holds (LockState);
	// Apply uses it and leaves releasing it to the caller. Otherwise Apply
	// takes the lock itself with Who, Operation, LockTimeout and LockTTL.
	Lock *HeldLock
}

// EventKind says what happened to a change.
type EventKind int

const (
	EventStart EventKind = iota
	EventStill
	EventDone
	EventFailed
	EventSkipped
)

// Event is one progress report of Apply.
type Event struct {
	Address Address
	Action  Action
	Kind    EventKind
	Elapsed time.Duration // since the change started
	Err     error         // EventFailed, EventSkipped: why
}

// Status is the outcome of one change.
type Status string

const (
	Succeeded Status = "succeeded"
	Failed    Status = "failed"
	Skipped   Status = "skipped"
)

// ChangeResult is the outcome of one planned change.
type ChangeResult struct {
	Address  Address
	Action   Action
	Status   Status
	Err      error // Failed, Skipped: why
	Duration time.Duration
}

// ApplyResult reports what Apply did.
type ApplyResult struct {
	// Results has one entry per change that was not a no-op, in plan order.
	Results []ChangeResult
	// Done counts the succeeded changes like Plan.Summary counts planned ones.
	Done Summary
	// StateVersion is the version of the runtime document after Apply.
	StateVersion int64
	// Lock is the lock Apply held.
	Lock backend.LockInfo
	// LeaseRecordsDeleted counts the lease records a destroy removed.
	LeaseRecordsDeleted int
	// Started is false when Apply ended before changing anything (the lock
	// was held, the plan was stale…): every result is then Skipped, and no
	// event was reported for them.
	Started bool
}

// Errors of Apply.
var (
	// ErrStalePlan: live state changed since the plan was made; nothing was
	// applied.
	ErrStalePlan = errors.New("Saved plan is stale")
	// ErrOtherState: the plan was made against another state (another
	// lineage: another database, or a state rebuilt since); nothing was
	// applied.
	ErrOtherState = errors.New("Saved plan is for a different state")
	// ErrApplyIncomplete: some changes failed or were skipped; the
	// ApplyResult says which. Re-running plan and apply converges.
	ErrApplyIncomplete = errors.New("apply did not complete")
	// ErrInterrupted: Stop was closed before every change ran.
	ErrInterrupted = errors.New("apply was interrupted")
	// ErrGuard: a guard refused a destructive change (see MakePlan); a
	// refused apply changes nothing.
	ErrGuard = errors.New("refused by a guard")
)

// Apply executes plan against live: it bootstraps missing tables, takes the
// state lock, checks that the plan is not stale and that no guard refuses
// a change against what is live now (else it changes nothing), then runs
// the changes in dependency order — queues are created and updated, then the runtime
// document is written (one compare-and-set), then queues whose class is
// gone are deleted. A failed change does not stop independent ones; the
// changes that depend on it are skipped.
//
// The result lists every change's outcome and is returned with the error,
// if any: errors wrap ErrStalePlan (nothing applied), ErrApplyIncomplete
// (see the result), ErrInterrupted, or a lock or backend error. Re-running
// MakePlan and Apply after any failure or interruption converges.
func Apply(ctx context.Context, plan *Plan, live Live, opts ApplyOptions) (_ *ApplyResult, err error) {
	if opts.Parallelism <= 0 {
		opts.Parallelism = DefaultParallelism
	}
	if opts.LockTTL <= 0 {
		opts.LockTTL = time.Minute
	}
	if opts.StillInterval <= 0 {
		opts.StillInterval = 10 * time.Second
	}
	if opts.Operation == "" {
		opts.Operation = "apply"
	}
	if opts.Who == "" {
		opts.Who = DefaultWho()
	}
	a := &applier{plan: plan, live: live, opts: opts, res: &ApplyResult{StateVersion: plan.StateVersion}, status: map[Address]*ChangeResult{}}
	for _, c := range plan.Changes {
		if c.Action != NoOp {
			a.res.Results = append(a.res.Results, ChangeResult{Address: c.Address, Action: c.Action})
		}
	}
	for i := range a.res.Results {
		a.status[a.res.Results[i].Address] = &a.res.Results[i]
	}

	if err := a.bootstrapTables(ctx); err != nil {
		a.skipRest(err)
		return a.res, err
	}
	if opts.Lock != nil {
		select {
		case lerr := <-opts.Lock.Lost():
			a.skipRest(lerr)
			return a.res, lerr
		default:
		}
	}

	held := opts.Lock
	if held == nil {
		var err error
		held, err = LockState(ctx, live, LockOptions{Who: opts.Who, Operation: opts.Operation, Timeout: opts.LockTimeout, TTL: opts.LockTTL})
		if err != nil {
			a.skipRest(err)
			return a.res, err
		}
		defer func() {
			// Unlock even when ctx was cancelled (a second Ctrl-C): the
			// lease would free it anyway, but not for a while.
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if uerr := held.Release(uctx); uerr != nil {
				err = errors.Join(err, uerr)
			}
		}()
	}
	a.res.Lock = held.Info()
	a.lost = held.Lost()
	err = a.run(ctx)
	return a.res, err
}

// DefaultWho is "user@host" for lock info.
func DefaultWho() string {
	user := os.Getenv("USER")
	if user == "" {
		user = "unknown"
	}
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return user + "@" + host
}

type applier struct {
	plan *Plan
	live Live
	opts ApplyOptions
	res  *ApplyResult

	mu      sync.Mutex // guards status entries, progress calls
	status  map[Address]*ChangeResult
	lost    <-chan error
	lostErr error // guarded by mu: once the lock is lost, nothing more starts
}

func (a *applier) emit(e Event) {
	if a.opts.Progress == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.opts.Progress(e)
}

func (a *applier) stopped() bool {
	select {
	case <-a.opts.Stop:
		return true
	default:
		return false
	}
}

func (a *applier) result(addr Address) *ChangeResult { return a.status[addr] }

// track runs fn as the change at addr, with progress events and its result.
func (a *applier) track(addr Address, act Action, fn func() error) error {
	r := a.result(addr)
	start := time.Now()
	a.emit(Event{Address: addr, Action: act, Kind: EventStart})
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(a.opts.StillInterval):
				a.emit(Event{Address: addr, Action: act, Kind: EventStill, Elapsed: time.Now().Sub(start)})
			}
		}
	}()
	err := fn()
	close(done)
	wg.Wait()
	elapsed := time.Now().Sub(start)
	a.finish(r, err, elapsed)
	return err
}

func (a *applier) finish(r *ChangeResult, err error, elapsed time.Duration) {
	a.mu.Lock()
	r.Duration = elapsed
	if err != nil {
		r.Status, r.Err = Failed, err
	} else {
		r.Status = Succeeded
	}
	a.mu.Unlock()
	kind := EventDone
	if err != nil {
		kind = EventFailed
	}
	a.emit(Event{Address: r.Address, Action: r.Action, Kind: kind, Elapsed: elapsed, Err: err})
}

func (a *applier) skip(addr Address, why error) {
	r := a.result(addr)
	if r == nil || r.Status != "" {
		return
	}
	a.mu.Lock()
	r.Status, r.Err = Skipped, why
	started := a.res.Started
	a.mu.Unlock()
	if started {
		a.emit(Event{Address: addr, Action: r.Action, Kind: EventSkipped, Err: why})
	}
}

func (a *applier) skipRest(why error) {
	for _, r := range a.res.Results {
		a.skip(r.Address, why)
	}
}

func (a *applier) bootstrapTables(ctx context.Context) error {
	var creates []ResourceChange
	for _, c := range a.plan.Changes {
		if c.Address.Type == TypeTable && c.Action == Create {
			creates = append(creates, c)
		}
	}
	if len(creates) == 0 {
		return nil
	}
	if a.live.Tables == nil {
		return fmt.Errorf("the plan creates tables but this backend has none; the plan was made for another backend (%s): make a new one with rpd plan", a.plan.Backend.Type)
	}
	// One idempotent call creates every missing table; report it per table.
	a.res.Started = true
	start := time.Now()
	for _, c := range creates {
		a.emit(Event{Address: c.Address, Action: Create, Kind: EventStart})
	}
	err := a.live.Tables.EnsureTables(ctx)
	elapsed := time.Now().Sub(start)
	for _, c := range creates {
		a.finish(a.result(c.Address), err, elapsed)
	}
	if err != nil {
		return fmt.Errorf("create the stack's tables: %w", err)
	}
	return nil
}

// run executes the plan under the lock.
func (a *applier) run(ctx context.Context) error {
	p := a.plan
	cur, version, err := a.checkFresh(ctx)
	if err != nil {
		a.skipRest(err)
		return err
	}
	infos := cur.infos
	base := cur.doc
	if err := a.checkGuards(ctx, cur.doc, infos); err != nil {
		a.skipRest(err)
		return err
	}
	a.mu.Lock()
	a.res.Started = true
	a.mu.Unlock()

	// Phase 0: record the queues about to be created, so that an apply
	// interrupted after creating one still finds it.
	creating := map[string]string{}
	for _, c := range p.Changes {
		if c.Address.Type == TypeQueue && (c.Action == Create || c.Action == DeleteThenCreate) && !a.stopped() {
			creating[p.Desired.Queues[c.Address.Name].Name] = c.Address.Name
		}
	}
	if len(creating) > 0 {
		intent := base.Clone()
		maps.Copy(intent.Creating, creating)
		v, err := a.writeDoc(ctx, base, intent, version, nil)
		if err != nil {
			err = fmt.Errorf("record the queues to create: %w", err)
			a.skipRest(err)
			return a.outcome(err)
		}
		base, version = intent, v
	}

	// Phase 1: create, update and replace queues.
	a.parallel(ctx, func(c ResourceChange) bool {
		return c.Address.Type == TypeQueue && (c.Action == Create || c.Action == Update || c.Action == DeleteThenCreate)
	}, func(ctx context.Context, c ResourceChange) error {
		return a.applyQueue(ctx, c, infos)
	})

	// Phase 2: one write of the runtime document.
	doc := base.Clone()
	if doc.Lineage == "" {
		doc.Lineage = newID()
	}
	var inDoc []ResourceChange // changes that land with this write
	var retire []ResourceChange
	for _, c := range p.Changes {
		if c.Action == NoOp || c.Address.Type == TypeTable {
			if c.Action == NoOp && c.Address.Type == TypeQueue && !p.RefreshOnly {
				if _, ok := p.LiveQueues[c.Address.Name]; ok {
					doc.Queues[c.Address.Name] = p.Desired.Queues[c.Address.Name]
				}
			}
			continue
		}
		if c.Address.Type == TypeQueue && c.Action != Delete {
			// Done in phase 1: record what succeeded, whatever happens next.
			if a.result(c.Address).Status == Succeeded {
				doc.Queues[c.Address.Name] = p.Desired.Queues[c.Address.Name]
			}
			continue
		}
		if err := a.interrupted(); err != nil {
			a.skip(c.Address, err)
			continue
		}
		switch c.Address.Type {
		case TypeQueue: // a delete: the others were done in phase 1
			// Retire the live queue the plan saw, which is not the
			// recorded one when an unrecorded queue stands in for it.
			e, ok := p.LiveQueues[c.Address.Name]
			if !ok {
				e = cur.doc.Queues[c.Address.Name]
			}
			e.Name = a.liveName(c, cur.doc)
			e.Retired = true
			doc.Queues[c.Address.Name] = e
			retire = append(retire, c)
		case TypeRunnerClass:
			if q := a.result(Address{TypeQueue, c.Address.Name}); q != nil && q.Status != Succeeded && c.Action != Delete {
				a.skip(c.Address, fmt.Errorf("depends on queue.%s, which did not apply", c.Address.Name))
				continue
			}
			setEntry(doc.RunnerClasses, p.Desired.RunnerClasses, c)
			inDoc = append(inDoc, c)
		case TypePool:
			setEntry(doc.Pools, p.Desired.Pools, c)
			inDoc = append(inDoc, c)
		case TypeBudget:
			setEntry(doc.Budgets, p.Desired.Budgets, c)
			inDoc = append(inDoc, c)
		case TypeVMCeiling:
			setEntry(doc.VMCeilings, p.Desired.VMCeilings, c)
			inDoc = append(inDoc, c)
		case TypePriority:
			setEntry(doc.Priorities, p.Desired.Priorities, c)
			inDoc = append(inDoc, c)
		}
	}
	if p.RefreshOnly {
		for k, e := range doc.Queues {
			if l, ok := p.LiveQueues[k]; ok {
				l.Retired = e.Retired
				doc.Queues[k] = l
			}
		}
	}
	for _, k := range p.Forget {
		if _, desired := p.Desired.Queues[k]; !desired || p.RefreshOnly {
			delete(doc.Queues, k)
		}
	}
	if p.RefreshOnly {
		for k := range doc.Queues {
			if _, ok := p.LiveQueues[k]; !ok {
				delete(doc.Queues, k)
			}
		}
	}

	a.settleCreating(ctx, doc, creating)

	version, werr := a.writeDoc(ctx, base, doc, version, append(slices.Clone(inDoc), retire...))
	if werr != nil {
		for _, c := range retire {
			a.skip(c.Address, fmt.Errorf("the runtime document was not written: %w", werr))
		}
		retire = nil
	}

	// Phase 3: delete the queues whose class is gone, then forget them.
	if len(retire) > 0 {
		retireSet := map[Address]bool{}
		for _, c := range retire {
			retireSet[c.Address] = true
		}
		a.parallel(ctx, func(c ResourceChange) bool { return retireSet[c.Address] }, func(ctx context.Context, c ResourceChange) error {
			name := doc.Queues[c.Address.Name].Name
			if err := a.live.Queues.DeleteQueue(ctx, name); err != nil && !errors.Is(err, backend.ErrQueueNotFound) {
				return fmt.Errorf("delete queue %s: %w", name, err)
			}
			return nil
		})
		after := doc.Clone()
		for _, c := range retire {
			if a.result(c.Address).Status == Succeeded {
				delete(after.Queues, c.Address.Name)
			}
		}
		if v, err := a.writeDoc(ctx, doc, after, version, nil); err != nil {
			// The queues are gone; the next apply forgets their records.
			werr = errors.Join(werr, fmt.Errorf("record the deleted queues: %w", err))
		} else {
			version = v
		}
	}
	a.res.StateVersion = version
	if werr == nil {
		werr = a.forgetLeases(ctx)
	}
	return a.outcome(werr)
}

// forgetLeases ends a complete destroy: with every pool, budget and
// ceiling gone, the grants recorded under them are removed too, so a
// daemon started on the emptied stack restores none. A destroy that did
// not complete keeps them (the pools they belong to may still exist).
func (a *applier) forgetLeases(ctx context.Context) error {
	if !a.plan.Destroy || len(a.plan.Targets) > 0 || a.live.Leases == nil || a.stopped() {
		return nil
	}
	for _, r := range a.res.Results {
		if r.Status != Succeeded {
			return nil
		}
	}
	n, err := a.live.Leases.DeleteLeaseRecords(ctx)
	a.res.LeaseRecordsDeleted = n
	if err != nil {
		return fmt.Errorf("remove the recorded leases (%d removed): %w; run rpd destroy again", n, err)
	}
	return nil
}

// settleCreating keeps in doc.Creating only the queues that may exist
// without being recorded: a create of this apply that failed (the call may
// have created it all the same) and is live, or an earlier one that the
// plan found live and that nothing in this apply recorded or deletes.
func (a *applier) settleCreating(ctx context.Context, doc *RuntimeDoc, creating map[string]string) {
	recorded := map[string]bool{}
	for _, q := range doc.Queues {
		recorded[q.Name] = true
	}
	for _, c := range a.plan.Changes {
		// A queue this apply deleted is gone: nothing to remember.
		if r := a.result(c.Address); r != nil && r.Status == Succeeded && c.Action == DeleteThenCreate {
			if n, ok := c.Before["name"].(string); ok {
				recorded[n] = true
			}
		}
	}
	for name, class := range doc.Creating {
		keep := false
		switch {
		case recorded[name]:
		case creating[name] != "":
			if r := a.result(Address{TypeQueue, class}); r != nil && r.Status == Failed {
				_, err := a.live.Queues.DescribeQueue(ctx, name)
				keep = !errors.Is(err, backend.ErrQueueNotFound)
			}
		default:
			fp, seen := a.plan.Fingerprints["queue "+name]
			keep = seen && fp != "absent"
		}
		if !keep {
			delete(doc.Creating, name)
		}
	}
}

// outcome turns the per-change results into Apply's error.
func (a *applier) outcome(extra error) error {
	var failed, skipped int
	var first, firstSkip error
	for _, r := range a.res.Results {
		switch r.Status {
		case Succeeded:
			switch r.Action {
			case Create:
				a.res.Done.Add++
			case Update:
				a.res.Done.Change++
			case Delete:
				a.res.Done.Destroy++
			case DeleteThenCreate:
				a.res.Done.Add++
				a.res.Done.Destroy++
			}
		case Failed:
			failed++
			if first == nil {
				first = fmt.Errorf("%s: %w", r.Address, r.Err)
			}
		default:
			skipped++
			if firstSkip == nil && r.Err != nil {
				firstSkip = fmt.Errorf("%s: %w", r.Address, r.Err)
			}
		}
	}
	var err error
	switch {
	case failed > 0:
		err = fmt.Errorf("%w: %d failed, %d skipped; first failure: %w; fix the cause and run apply again — it picks up where this one stopped", ErrApplyIncomplete, failed, skipped, first)
	case skipped > 0 && firstSkip != nil:
		err = fmt.Errorf("%w: %d skipped (%w); run apply again to finish", ErrApplyIncomplete, skipped, firstSkip)
	case skipped > 0:
		err = fmt.Errorf("%w: %d skipped; run apply again to finish", ErrApplyIncomplete, skipped)
	}
	if a.stopped() {
		err = errors.Join(ErrInterrupted, err)
	}
	if extra != nil && failed == 0 {
		err = errors.Join(err, extra)
	}
	return err
}

func (a *applier) interrupted() error {
	if a.stopped() {
		return ErrInterrupted
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lostErr == nil {
		select {
		case err := <-a.lost:
			a.lostErr = err
		default:
		}
	}
	return a.lostErr
}

// parallel runs fn for the plan's changes matching sel, at most
// Parallelism at a time. Changes not started because of Stop are skipped.
func (a *applier) parallel(ctx context.Context, sel func(ResourceChange) bool, fn func(context.Context, ResourceChange) error) {
	var g errgroup.Group
	g.SetLimit(a.opts.Parallelism)
	for _, c := range a.plan.Changes {
		if c.Action == NoOp || !sel(c) {
			continue
		}
		if err := a.interrupted(); err != nil {
			a.skip(c.Address, err)
			continue
		}
		if err := ctx.Err(); err != nil {
			a.skip(c.Address, err)
			continue
		}
		g.Go(func() error {
			if err := a.interrupted(); err != nil {
				a.skip(c.Address, err)
				return nil
			}
			_ = a.track(c.Address, c.Action, func() error { return fn(ctx, c) })
			return nil
		})
	}
	_ = g.Wait()
}

// liveName is the live queue a destructive queue change removes.
func (a *applier) liveName(c ResourceChange, cur *RuntimeDoc) string {
	if n, ok := c.Before["name"].(string); ok {
		return n
	}
	if cur == nil {
		return ""
	}
	return cur.Queues[c.Address.Name].Name
}

// checkGuards evaluates every guard of the plan against what is live now
// (idle runners may have arrived since the plan was made), changing
// nothing, and returns the Refusals, if any.
func (a *applier) checkGuards(ctx context.Context, cur *RuntimeDoc, infos map[string]*backend.QueueInfo) error {
	var held map[string]int
	for _, c := range a.plan.Changes {
		if c.Address.Type == TypePool && c.Action == Delete && a.live.Held != nil {
			h, err := a.live.Held.HeldSlots(ctx)
			if err != nil {
				return fmt.Errorf("read held pool slots: %w", err)
			}
			held = h
			break
		}
	}
	allow := a.opts.AllowDestroyNonEmpty || a.plan.AllowDestroyNonEmpty
	var refusals Refusals
	for _, c := range a.plan.Changes {
		if _, err := a.plan.guard(c, infos, cur, held, allow); err != nil {
			refusals = append(refusals, err)
		}
	}
	if len(refusals) > 0 {
		return refusals
	}
	return nil
}

func (a *applier) applyQueue(ctx context.Context, c ResourceChange, infos map[string]*backend.QueueInfo) error {
	des := a.plan.Desired.Queues[c.Address.Name]
	attrs := des.Attributes(a.plan.Stack)
	switch c.Action {
	case Update:
		if err := a.live.Queues.UpdateQueue(ctx, des.Name, attrs); err != nil {
			return fmt.Errorf("update queue %s: %w", des.Name, err)
		}
		return nil
	case DeleteThenCreate:
		old := a.liveName(c, nil)
		if err := a.live.Queues.DeleteQueue(ctx, old); err != nil && !errors.Is(err, backend.ErrQueueNotFound) {
			return fmt.Errorf("replace queue: delete %s: %w", old, err)
		}
	}
	if err := a.live.Queues.CreateQueue(ctx, des.Name, attrs); err != nil {
		// An earlier, interrupted apply may have created it already.
		if info, derr := a.live.Queues.DescribeQueue(ctx, des.Name); derr == nil && info.Attributes.Tags[backend.StackTag] == a.plan.Stack {
			if uerr := a.live.Queues.UpdateQueue(ctx, des.Name, attrs); uerr == nil {
				return nil
			}
		}
		return fmt.Errorf("create queue %s: %w", des.Name, err)
	}
	return nil
}

func setEntry[E any](dst, desired map[string]E, c ResourceChange) {
	if c.Action == Delete {
		delete(dst, c.Address.Name)
		return
	}
	dst[c.Address.Name] = desired[c.Address.Name]
}

// writeDoc writes next over prev (at version) unless they encode equally;
// the changes carried by the write succeed or fail with it.
func (a *applier) writeDoc(ctx context.Context, prev, next *RuntimeDoc, version int64, carried []ResourceChange) (int64, error) {
	nb, err := next.Encode()
	if err != nil {
		return version, err
	}
	pb, err := prev.Encode()
	if err != nil {
		return version, err
	}
	if version != 0 && string(pb) == string(nb) {
		for _, c := range carried {
			a.finish(a.result(c.Address), nil, 0)
		}
		return version, nil
	}
	start := time.Now()
	for _, c := range carried {
		if c.Address.Type != TypeQueue {
			a.emit(Event{Address: c.Address, Action: c.Action, Kind: EventStart})
		}
	}
	v, err := a.live.State.WriteState(ctx, nb, version)
	if err != nil {
		if errors.Is(err, backend.ErrVersionConflict) {
			err = fmt.Errorf("%w: the runtime document changed while applying (%w); run rpd plan again", ErrStalePlan, err)
		} else {
			err = fmt.Errorf("write the runtime document: %w", err)
		}
		elapsed := time.Now().Sub(start)
		for _, c := range carried {
			if c.Address.Type != TypeQueue {
				a.finish(a.result(c.Address), err, elapsed)
			}
		}
		return version, err
	}
	elapsed := time.Now().Sub(start)
	for _, c := range carried {
		if c.Address.Type != TypeQueue {
			a.finish(a.result(c.Address), nil, elapsed)
		}
	}
	return v, nil
}

type freshState struct {
	doc   *RuntimeDoc
	infos map[string]*backend.QueueInfo
}

// checkFresh refreshes everything the plan saw and refuses a stale plan.
func (a *applier) checkFresh(ctx context.Context) (freshState, int64, error) {
	p := a.plan
	doc, version, err := readDoc(ctx, a.live.State, p.Stack)
	if err != nil {
		return freshState{}, 0, err
	}
	if p.Lineage != "" && doc.Lineage != p.Lineage {
		now := "an empty state"
		if doc.Lineage != "" {
			now = fmt.Sprintf("a state of lineage %s (version %d)", doc.Lineage, version)
		}
		return freshState{}, 0, fmt.Errorf("%w: it was made against the state of lineage %s (version %d), but this backend holds %s — another state database, or a state that was rebuilt; nothing was applied — make a plan against this backend with rpd plan", ErrOtherState, p.Lineage, p.StateVersion, now)
	}
	if version != p.StateVersion || doc.Lineage != p.Lineage {
		return freshState{}, 0, fmt.Errorf("%w: the state changed since the plan was made (state version %d, now %d); nothing was applied — run rpd plan again", ErrStalePlan, p.StateVersion, version)
	}
	var names []string
	for k := range p.Fingerprints {
		if n, ok := strings.CutPrefix(k, "queue "); ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	infos, err := describeAll(ctx, a.live.Queues, names, a.opts.Parallelism)
	if err != nil {
		return freshState{}, 0, err
	}
	for _, n := range names {
		if got := fingerprint(infos[n]); got != p.Fingerprints["queue "+n] {
			return freshState{}, 0, fmt.Errorf("%w: queue %s changed since the plan was made; nothing was applied — run rpd plan again", ErrStalePlan, n)
		}
	}
	return freshState{doc: doc, infos: infos}, version, nil
}
