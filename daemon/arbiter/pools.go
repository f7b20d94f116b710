package arbiter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/daemon/internal/component"
	"github.com/rpdhq/rpd/daemon/internal/holders"
	"github.com/rpdhq/rpd/daemon/internal/httpapi"
	"github.com/rpdhq/rpd/daemon/internal/records"
	"github.com/rpdhq/rpd/daemon/internal/security"
	"github.com/rpdhq/rpd/internal/answer"
	"github.com/rpdhq/rpd/reconcile"
	"github.com/rpdhq/rpd/runtime/pools"
	"github.com/rpdhq/rpd/spec"
)

// defaultTTL is the TTL of a remote grant whose request sets none: a pool
// lease (when its pool's lease_ttl is 0 or unset) or a budget permit.
const defaultTTL = api.DefaultTTLSeconds * time.Second

// PoolConfig is the one conversion of a pool entry to the pools package's
// configuration. A lease_ttl of 0 means the daemon's default TTL: a remote
// lease that never expired would be held forever by a vanished worker.
func PoolConfig(name string, e reconcile.PoolEntry) pools.PoolConfig {
	ttl := time.Duration(e.LeaseTTL)
	if ttl == 0 {
		ttl = defaultTTL
	}
	return pools.PoolConfig{Name: name, Slots: e.Slots, Description: e.Description, MaxQueued: e.MaxQueued, LeaseTTL: ttl}
}

// poolSet is the pools of the configuration, served by one pools.Manager,
// and the named priorities requests may ask for.
type poolSet struct {
	log *slog.Logger
	mgr *pools.Manager
	// loadLeases lists every recorded pool lease (the backend's lease
	// store), to find the holders of a pool removed with allow_destroy.
	loadLeases func(ctx context.Context) ([]pools.LeaseRecord, error)

	mu   sync.Mutex
	decl map[string]reconcile.PoolEntry // the active configuration's pools
	// gone holds pools removed from the configuration but still in use;
	// the value is their last allow_destroy: true drops their holders.
	gone  map[string]bool
	prios map[string]int
}

var _ component.Set = (*poolSet)(nil)

func newPoolSet(log *slog.Logger, mgr *pools.Manager, loadLeases func(context.Context) ([]pools.LeaseRecord, error)) *poolSet {
	return &poolSet{log: log, mgr: mgr, loadLeases: loadLeases, decl: map[string]reconcile.PoolEntry{}, gone: map[string]bool{}, prios: map[string]int{}}
}

// PoolEntries are the document's pools; default_pool exists even when the
// document does not hold it (a state store nothing was applied to yet).
func PoolEntries(doc *reconcile.RuntimeDoc) map[string]reconcile.PoolEntry {
	entries := maps.Clone(doc.Pools)
	if _, ok := entries[spec.DefaultPoolName]; !ok {
		entries[spec.DefaultPoolName] = reconcile.PoolEntry{Slots: spec.DefaultDefaultSlots}
	}
	return entries
}

func (s *poolSet) Prepare(in *component.Input) (component.CommitFunc, error) {
	entries := PoolEntries(in.Doc())
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		if err := PoolConfig(name, entries[name]).Validate(); err != nil {
			errs = append(errs, in.Locate(reconcile.Address{Type: reconcile.TypePool, Name: name}, err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	prios := PriorityWeights(in.Doc())
	return func() ([]string, error) { return s.commit(entries, prios) }, nil
}

// PriorityWeights is the one conversion of the document's priorities: the
// weight a request's priority_name stands for.
func PriorityWeights(doc *reconcile.RuntimeDoc) map[string]int {
	prios := make(map[string]int, len(doc.Priorities))
	for name, p := range doc.Priorities {
		prios[name] = p.Weight
	}
	return prios
}

func (s *poolSet) commit(entries map[string]reconcile.PoolEntry, prios map[string]int) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var changes []string
	var cfgs []pools.PoolConfig
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		e := entries[name]
		delete(s.gone, name)
		old, had := s.decl[name]
		switch {
		case had && old == e:
			continue
		case had:
			changes = append(changes, component.EntryChange("pool."+name, old, e))
		default:
			changes = append(changes, fmt.Sprintf("pool.%s: created with %d slots", name, e.Slots))
		}
		s.decl[name] = e
		cfgs = append(cfgs, PoolConfig(name, e))
	}
	for _, name := range slices.Sorted(maps.Keys(s.decl)) {
		if _, ok := entries[name]; !ok {
			s.gone[name] = s.decl[name].AllowDestroy
			delete(s.decl, name)
			changes = append(changes, fmt.Sprintf("pool.%s: removed from the configuration", name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(prios)) {
		old, had := s.prios[name]
		switch {
		case !had:
			changes = append(changes, fmt.Sprintf("priority.%s: created with weight %d", name, prios[name]))
		case old != prios[name]:
			changes = append(changes, fmt.Sprintf("priority.%s: weight %d -> %d", name, old, prios[name]))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.prios)) {
		if _, ok := prios[name]; !ok {
			changes = append(changes, fmt.Sprintf("priority.%s: removed from the configuration", name))
		}
	}
	s.prios = prios
	// One call publishes every new pool at once (n ConfigurePool calls
	// cost O(n²) for n new pools); prepare validated each.
	if err := s.mgr.ConfigurePools(cfgs...); err != nil {
		return changes, fmt.Errorf("configure pools: %w", err)
	}
	return changes, nil
}

// sweep deletes removed pools once idle. A pool removed with allow_destroy
// first loses its holders: they are found through the lease store, which
// records every grant (read without the set's lock held); waiting requests
// are not cancelled (new ones are refused), so the pool goes once the last
// of them has given up.
func (s *poolSet) Sweep(ctx context.Context) {
	s.mu.Lock()
	gone := maps.Clone(s.gone)
	s.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(gone)) {
		if gone[name] {
			s.dropHolders(ctx, name)
		}
		s.mu.Lock()
		err := pools.ErrPoolInUse
		if _, still := s.gone[name]; still { // not declared again meanwhile
			err = s.mgr.DeletePool(name)
			if err == nil || errors.Is(err, pools.ErrUnknownPool) {
				delete(s.gone, name)
			}
		}
		s.mu.Unlock()
		switch {
		case err == nil, errors.Is(err, pools.ErrUnknownPool):
			s.log.Info("removed pool dropped from the configuration", "pool", name)
		case errors.Is(err, pools.ErrPoolInUse):
			// Kept until its holders release; reported as retained.
		default:
			s.log.Warn("cannot remove pool dropped from the configuration", "pool", name, "err", err)
		}
	}
}

func (s *poolSet) dropHolders(ctx context.Context, name string) {
	if s.loadLeases == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	recs, err := s.loadLeases(ctx)
	if err != nil {
		s.log.Warn("cannot list the leases of a destroyed pool; retrying at the next sweep", "pool", name, "err", err)
		return
	}
	n := 0
	for _, r := range recs {
		if r.Pool != name {
			continue
		}
		if l, err := s.mgr.Lease(r.LeaseID); err == nil {
			_ = l.Release()
			n++
		}
	}
	if n > 0 {
		s.log.Warn("pool removed with allow_destroy = true: its holders lost their slots", "pool", name, "leases", n)
	}
}

func (s *poolSet) Close() {}

// retained reports whether name was removed from the configuration and is
// kept only for its holders.
func (s *poolSet) retained(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.gone[name]
	return ok
}

func (s *poolSet) priority(name string) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.prios[name]
	return w, ok
}

func (s *poolSet) list() []api.PoolStatus {
	s.mu.Lock()
	gone := maps.Clone(s.gone)
	s.mu.Unlock()
	list := s.mgr.ListPools()
	out := make([]api.PoolStatus, 0, len(list))
	for _, st := range list {
		_, retained := gone[st.Name]
		ps := poolStatus(st, retained)
		holders.WithPoolCounts(s.mgr, &ps)
		out = append(out, ps)
	}
	slices.SortFunc(out, func(a, b api.PoolStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// get reports one pool with its holders.
func (s *poolSet) get(name string) (api.PoolDetail, error) {
	st, err := s.mgr.PoolStatus(name)
	if err != nil {
		return api.PoolDetail{}, err
	}
	ps := poolStatus(st, s.retained(name))
	holders := holders.WithPoolHolding(s.mgr, &ps)
	return api.PoolDetail{PoolStatus: ps, Holders: holders}, nil
}

// acquire grants slots of a declared pool, waiting up to wait (at most
// the pool's max_wait); a removed pool (kept for its holders) grants
// nothing.
func (s *poolSet) acquire(ctx context.Context, name string, req pools.Request, wait time.Duration) (*pools.Lease, error) {
	s.mu.Lock()
	e, declared := s.decl[name]
	_, gone := s.gone[name]
	s.mu.Unlock()
	if gone {
		return nil, httpapi.NotFound("pool %q was removed from the configuration; it is kept only until its holders release", name)
	}
	if limit := time.Duration(e.MaxWait); declared && limit > 0 && wait > limit {
		return nil, httpapi.BadRequest("wait_seconds %v is above pool %s's max_wait of %s: ask for at most %v seconds", wait.Seconds(), name, e.MaxWait, limit.Seconds())
	}
	return s.mgr.Acquire(ctx, name, req)
}

func (s *poolSet) lease(id string) (*pools.Lease, error) { return s.mgr.Lease(id) }

// holders lists the leases of every pool (or of the pool only, when not
// ""), by pool name, the pools sorted.
func (s *poolSet) holders(only string) (names []string, byPool map[string][]pools.Holder) {
	byPool = map[string][]pools.Holder{}
	for _, st := range s.mgr.ListPools() {
		if only != "" && st.Name != only {
			continue
		}
		h, _, err := s.mgr.Holders(st.Name)
		if err != nil {
			continue // deleted since ListPools
		}
		names = append(names, st.Name)
		byPool[st.Name] = h
	}
	slices.Sort(names)
	return names, byPool
}

func (s *poolSet) Status(out *api.Components) {
	out.Pools = s.list()
	s.mu.Lock()
	defer s.mu.Unlock()
	maps.Copy(out.Priorities, s.prios)
}

// poolStatus is a pool as the API reports it. A retained pool (removed
// from the configuration, kept for its holders) grants nothing more, so
// nothing is available in it, whatever its free slots.
func poolStatus(s pools.PoolStatus, retained bool) api.PoolStatus {
	available := s.Available
	if retained {
		available = 0
	}
	return api.PoolStatus{Name: s.Name, Description: s.Description, Total: s.Total, Used: s.Used, Available: available, Queued: s.Queued, Retained: retained}
}

func (s *poolSet) collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	gone := maps.Clone(s.gone)
	s.mu.Unlock()
	for _, st := range s.mgr.ListPools() {
		n := st.Name
		_, retained := gone[n]
		component.Gauge(ch, descPoolSlots, float64(st.Total), n)
		component.Gauge(ch, descPoolUsed, float64(st.Used), n)
		component.Gauge(ch, descPoolAvailable, float64(poolStatus(st, retained).Available), n) // 0 once retained
		component.Gauge(ch, descPoolQueued, float64(st.Queued), n)
		component.Gauge(ch, descPoolRetained, component.B2F(retained), n)
		ev := st.Stats
		for _, e := range []struct {
			ev string
			v  uint64
		}{{"granted", ev.Granted}, {"released", ev.Released}, {"cancelled", ev.Cancelled}, {"timed_out", ev.TimedOut}, {"expired", ev.Expired}, {"rejected", ev.Rejected}} {
			component.Counter(ch, descPoolEvents, float64(e.v), n, e.ev)
		}
		component.Counter(ch, descPoolWaits, float64(ev.Wait.Count), n)
		component.Counter(ch, descPoolWaitSecs, ev.Wait.Sum.Seconds(), n)
	}
}

// poolRequest validates an acquire body and converts it.
func (a *Arbiter) poolRequest(req api.AcquireRequest) (pools.Request, time.Duration, error) {
	var pr pools.Request
	wait, err := httpapi.WaitDuration(req.WaitSeconds)
	if err != nil {
		return pr, 0, err
	}
	ttl, err := httpapi.TTLDuration(req.TTLSeconds, 0) // 0: the pool's lease_ttl (default 60 s)
	if err != nil {
		return pr, 0, err
	}
	if req.Slots < 0 {
		return pr, 0, httpapi.BadRequest("slots %d must be at least 1 (0 or absent means 1)", req.Slots)
	}
	prio := 0
	switch {
	case req.Priority != nil && req.PriorityName != "":
		return pr, 0, httpapi.BadRequest("give priority or priority_name, not both")
	case req.Priority != nil:
		prio = *req.Priority
	case req.PriorityName != "":
		w, ok := a.comp.pools.priority(req.PriorityName)
		if !ok {
			return pr, 0, httpapi.BadRequest("unknown priority_name %q: declare it with a priority block, or pass a numeric priority", req.PriorityName)
		}
		prio = w
	}
	pr = pools.Request{TaskID: req.TaskID, Priority: prio, Slots: max(req.Slots, 1), TTL: ttl, Timeout: wait}
	if wait == 0 {
		// Answer at once: a request that cannot be granted immediately
		// times out on the next clock tick instead of waiting.
		pr.Timeout = time.Nanosecond
	}
	return pr, wait, nil
}

// CheckAcquire validates an acquire body without acquiring (the fuzz
// target's view of the pool kind's checks).
func (a *Arbiter) CheckAcquire(req api.AcquireRequest) error {
	_, _, err := a.poolRequest(req)
	return err
}

// AcquireLease grants slots of pool to ctx's principal (the pool kind of
// the grant pipeline). Its record is written by the pools package's Store,
// fenced; the returned release gives the lease back when its answer cannot
// be delivered.
func (a *Arbiter) AcquireLease(ctx context.Context, pool string, req api.AcquireRequest) (api.Lease, func(), error) {
	pr, wait, err := a.poolRequest(req)
	if err != nil {
		return api.Lease{}, nil, err
	}
	pr.Owner = security.PrincipalOf(ctx).Owner()
	ctx = answerWithLease(ctx)
	var latch string
	if req.RequestID != "" {
		if err := httpapi.CheckRequestID(req.RequestID); err != nil {
			return api.Lease{}, nil, err
		}
		// The lease of a request_id has a fixed ID, restored under it
		// by a new leader: a retry finds the grant already made. The
		// latch key (latchKey's "pool/db/<id>", spelt "pool/db/r-<id>")
		// ends with it: one string for both.
		latch = "pool/" + pool + "/r-" + req.RequestID
		pr.ID = latch[len("pool/"):]
	}
	l, err := grant(ctx, a, latch, grantKind[*pools.Lease]{
		existing: func() (*pools.Lease, string, string, bool) {
			l, ok := a.comp.pools.mgr.Held(pr.ID)
			if !ok {
				return nil, "", "", false
			}
			return l, l.Owner(), "lease " + holders.ExternalLeaseID(pr.ID), true
		},
		// The pools package waits pr.Timeout itself.
		take: func(ctx context.Context) (*pools.Lease, error) { return a.comp.pools.acquire(ctx, pool, pr, wait) },
		fail: func(err error) error {
			switch {
			case wait == 0 && errors.Is(err, pools.ErrTimeout):
				return &httpapi.Error{Status: http.StatusConflict, Code: api.CodeUnavailable,
					Msg: "no free slot in pool " + pool + " now; retry, or pass wait_seconds to wait for one"}
			case errors.Is(err, pools.ErrTimeout):
				return &httpapi.Error{Status: http.StatusRequestTimeout, Code: api.CodeTimeout, Msg: err.Error()}
			}
			return err
		},
	})
	if err != nil {
		return api.Lease{}, nil, err
	}
	return poolLease(l), func() { _ = l.Release() }, nil
}

func poolLease(l *pools.Lease) api.Lease { return leaseAnswer(l.Record()) }

// leaseAnswer is the answer of the acquire that granted rec, or of the
// heartbeat that recorded it.
func leaseAnswer(rec pools.LeaseRecord) api.Lease {
	return api.Lease{
		LeaseID:    holders.ExternalLeaseID(rec.LeaseID),
		Kind:       api.KindPool,
		Pool:       rec.Pool,
		TaskID:     rec.TaskID,
		Priority:   rec.Priority,
		Slots:      rec.Slots,
		TTLSeconds: rec.TTL.Seconds(),
		ExpiresAt:  rec.ExpiresAt,
	}
}

// Heartbeat extends a pool lease or a budget permit by its TTL. A
// heartbeat's answer and its expires_at promise the grant until then, to
// this daemon and to the next leader, which restores it from its record:
// so it returns only once the extended expiry is written under this
// daemon's epoch. When it is not, it fails with a 503 and the client
// retries (at another replica); its last answer still stands, as the
// record still says (docs/ha.md, "A new leader never shortens a promise").
func (a *Arbiter) Heartbeat(ctx context.Context, id string) (api.Lease, error) {
	if isPermitID(id) {
		if err := a.permits.holderOnly(ctx, id); err != nil {
			return api.Lease{}, err
		}
		l, err := a.permits.heartbeat(id)
		if err != nil {
			return api.Lease{}, err
		}
		if err := a.permits.recordHeartbeat(ctx, l); err != nil {
			return api.Lease{}, heartbeatNotRecorded(id, err)
		}
		return l, nil
	}
	l, err := a.heldLease(ctx, id, "; acquire again")
	if err != nil {
		return api.Lease{}, err
	}
	ctx = answerWithLease(ctx)
	if err := l.Heartbeat(ctx); err != nil {
		if errors.Is(err, pools.ErrStore) {
			err = heartbeatNotRecorded(id, err)
		}
		return api.Lease{}, err
	}
	return poolLease(l), nil
}

// heldLease finds pool lease id (external form) for ctx's principal.
func (a *Arbiter) heldLease(ctx context.Context, id, hint string) (*pools.Lease, error) {
	l, err := a.comp.pools.lease(holders.InternalLeaseID(id))
	if err != nil {
		return nil, httpapi.NotFound("no lease %s: it was released, expired, or never existed%s", id, hint)
	}
	if owner := l.Owner(); security.HolderOnly(ctx, "", owner) != nil {
		// Named in the refusal only: the name costs an allocation.
		return nil, security.HolderOnly(ctx, "lease "+id, owner)
	}
	return l, nil
}

// heartbeatNotRecorded is the error of a heartbeat whose extended expiry
// could not be written: 503 not_leader when this daemon lost the
// leadership, else 503 not_ready. Either way the client retries, and the
// expiry of its last 200 stands.
func heartbeatNotRecorded(id string, err error) error {
	if httpapi.LostLeadership(err) {
		return err
	}
	return &httpapi.Error{Status: http.StatusServiceUnavailable, Code: api.CodeNotReady,
		Msg: fmt.Sprintf("the heartbeat of %s could not be recorded in the backend (%v); the expiry of its last answered heartbeat stands: retry, at another replica if you have one", id, err)}
}

// Release ends a pool lease or a budget permit. The slots are free when
// it returns; the record's delete is queued.
func (a *Arbiter) Release(ctx context.Context, id string) error {
	if isPermitID(id) {
		if err := a.permits.holderOnly(ctx, id); err != nil {
			return err
		}
		return a.permits.release(id, "")
	}
	l, err := a.heldLease(ctx, id, "")
	if err != nil {
		return err
	}
	if err := l.Release(); err != nil {
		// The slots are free; only the durable record's delete failed, and
		// its TTL or the next Restore drops it.
		a.log.Warn("lease released but its record was not deleted", "lease", id, "err", err)
	}
	return nil
}

// Pools reports every pool.
func (a *Arbiter) Pools() []api.PoolStatus { return a.comp.pools.list() }

// Pool reports one pool with its holders.
func (a *Arbiter) Pool(_ context.Context, name string) (api.PoolDetail, error) {
	return a.comp.pools.get(name)
}

// leaseAnswerKey marks the context of an acquire or a heartbeat whose
// answer is the lease as it records it (AcquireLease, Heartbeat), offered
// to be sent early (package answer).
type leaseAnswerKey struct{}

// answerWithLease marks ctx, when its request may be answered early, for
// the lease store to arm its answer with the lease it records.
func answerWithLease(ctx context.Context) context.Context {
	if !answer.Offered(ctx) {
		return ctx
	}
	return context.WithValue(ctx, leaseAnswerKey{}, struct{}{})
}

// answeringLeases is the pools' store. Recording a lease for a request
// marked with leaseAnswerKey (its grant, or its heartbeat's new expiry),
// it arms the request's answer, which the grant journal's writer sends the
// moment the record is durable, before it wakes the request's goroutine.
type answeringLeases struct{ *records.AsyncDeleteStore }

func (s answeringLeases) CreateLease(ctx context.Context, rec pools.LeaseRecord) error {
	s.arm(ctx, rec)
	return s.AsyncDeleteStore.CreateLease(ctx, rec)
}

func (s answeringLeases) PutLease(ctx context.Context, rec pools.LeaseRecord) error {
	s.arm(ctx, rec)
	return s.AsyncDeleteStore.PutLease(ctx, rec)
}

func (answeringLeases) arm(ctx context.Context, rec pools.LeaseRecord) {
	if ctx.Value(leaseAnswerKey{}) != nil {
		httpapi.ArmJSON(ctx, http.StatusOK, leaseAnswer(rec))
	}
}
