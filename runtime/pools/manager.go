package pools

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultPool is the pool that exists from the start, cannot be deleted, and
// serves every Acquire that names no pool.
const DefaultPool = "default_pool"

// DefaultPoolSlots is the default pool's size unless Options says otherwise.
const DefaultPoolSlots = 16

// MaxSlots bounds a pool's slots (and so every request's and lease's). It
// keeps the sums of held and queued slots far from overflowing an int.
const MaxSlots = math.MaxInt32

// DefaultStoreTimeout bounds the store calls that have no caller context:
// the DeleteLease of (*Lease).Release and of lease expiry (each gets at
// least the timeout, and at most 1/64 more: the calls of a short window
// share one context).
const DefaultStoreTimeout = 5 * time.Second

// Options configures a Manager. The zero value is usable.
type Options struct {
	// DefaultPoolSlots sizes default_pool; 0 means DefaultPoolSlots (16).
	DefaultPoolSlots int
	// Clock drives lease expiry, request timeouts and wait times;
	// nil means SystemClock.
	Clock Clock
	// Store, if set, records every grant, heartbeat and release so that
	// Restore can re-count held slots after a restart. Nil keeps all state in
	// memory and keeps store calls off the acquire/release path entirely.
	Store Store
	// StoreTimeout bounds store calls made without a caller context
	// (release, expiry); 0 means DefaultStoreTimeout.
	StoreTimeout time.Duration
	// Logger receives expiry, restore and store-failure events; nil
	// discards them. Nothing is logged on the acquire/release path.
	Logger *slog.Logger
}

// Manager owns a set of named pools. All methods are safe for concurrent use.
//
// Pool lookup is lock-free: the name→pool table is an immutable snapshot
// replaced (copy-on-write, under mu) by CreatePool and DeletePool, so the
// acquire and release fast paths take only the one pool's mutex.
type Manager struct {
	clock        Clock
	store        Store
	storeTimeout time.Duration
	storeCtx     atomic.Pointer[sharedContext] // see storeContext
	log          *slog.Logger
	idPrefix     string // random per Manager, so lease IDs never repeat across restarts

	mu    sync.Mutex // serialises snapshot replacement
	pools atomic.Pointer[poolTable]

	// ids indexes held leases by ID. A lease enters it only once its ID
	// exists: at grant when a Store is set, or on the first (*Lease).ID call,
	// so the store-less fast path never touches it. Lock order: pool.mu, then idMu.
	idMu sync.Mutex
	ids  map[string]*Lease

	restoreMu sync.Mutex // one Restore at a time, so none counts a record twice
}

// NewManager returns a Manager holding only default_pool.
func NewManager(opts Options) (*Manager, error) {
	if opts.DefaultPoolSlots == 0 {
		opts.DefaultPoolSlots = DefaultPoolSlots
	}
	if opts.DefaultPoolSlots < 1 || opts.DefaultPoolSlots > MaxSlots {
		return nil, fmt.Errorf("pools: default pool slots %d: %w (use 1..%d)", opts.DefaultPoolSlots, ErrInvalidPool, MaxSlots)
	}
	if opts.StoreTimeout < 0 {
		return nil, fmt.Errorf("pools: store timeout %v: %w (use 0 for the default)", opts.StoreTimeout, ErrInvalidPool)
	}
	if opts.StoreTimeout == 0 {
		opts.StoreTimeout = DefaultStoreTimeout
	}
	if opts.Clock == nil {
		opts.Clock = SystemClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	var nonce [6]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, fmt.Errorf("pools: generating lease ID prefix: %w", err)
	}
	m := &Manager{
		clock:        opts.Clock,
		store:        opts.Store,
		storeTimeout: opts.StoreTimeout,
		log:          opts.Logger,
		idPrefix:     hex.EncodeToString(nonce[:]),
		ids:          make(map[string]*Lease),
	}
	m.pools.Store(newPoolTable(map[string]*pool{DefaultPool: newPool(m, PoolConfig{Name: DefaultPool, Slots: opts.DefaultPoolSlots})}))
	return m, nil
}

// PoolConfig is the full configuration of one pool.
type PoolConfig struct {
	Name        string
	Slots       int // total slots, 1..MaxSlots
	Description string
	// MaxQueued caps waiting requests; a request beyond it fails at once
	// with ErrQueueFull. 0 means unbounded.
	MaxQueued int
	// LeaseTTL is the TTL of leases whose Request sets none; 0 means leases
	// without a TTL unless the request sets one.
	LeaseTTL time.Duration
}

// Validate reports what is wrong with c (an error wrapping ErrInvalidPool),
// the check ConfigurePool and ConfigurePools make before changing anything.
func (c PoolConfig) Validate() error {
	if err := validateName(c.Name); err != nil {
		return err
	}
	switch {
	case c.Slots < 1 || c.Slots > MaxSlots:
		return fmt.Errorf("pools: pool %q: slots %d: %w (use 1..%d)", c.Name, c.Slots, ErrInvalidPool, MaxSlots)
	case c.MaxQueued < 0:
		return fmt.Errorf("pools: pool %q: max queued %d: %w (use 0 for unbounded)", c.Name, c.MaxQueued, ErrInvalidPool)
	case c.LeaseTTL < 0:
		return fmt.Errorf("pools: pool %q: lease TTL %v: %w (use 0 for none)", c.Name, c.LeaseTTL, ErrInvalidPool)
	}
	return nil
}

// validateName accepts 1–128 characters of [A-Za-z0-9_.-]; in particular no
// "/", which separates the pool from the rest of a lease ID.
func validateName(name string) error {
	if name == "" || len(name) > 128 {
		return fmt.Errorf("pools: pool name %q: %w (use 1 to 128 characters)", name, ErrInvalidPool)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return fmt.Errorf("pools: pool name %q: character %q: %w (use letters, digits, '_', '-', '.')", name, r, ErrInvalidPool)
		}
	}
	return nil
}

// poolTable is an immutable snapshot of the pools by name.
type poolTable struct {
	byName map[string]*pool
	// few holds every pool when there are at most fewPools of them. A
	// lookup then compares names (lengths first) instead of hashing: a
	// third of the map's cost, and most deployments have a handful of
	// pools.
	few []*pool
}

const fewPools = 8

func newPoolTable(byName map[string]*pool) *poolTable {
	t := &poolTable{byName: byName}
	if len(byName) <= fewPools {
		t.few = slices.Collect(maps.Values(byName))
	}
	return t
}

// get returns the named pool, or nil.
func (t *poolTable) get(name string) *pool {
	if t.few == nil {
		return t.byName[name]
	}
	for _, p := range t.few {
		if p.name == name {
			return p
		}
	}
	return nil
}

func (m *Manager) lookup(name string) *pool {
	if name == "" {
		name = DefaultPool
	}
	return m.pools.Load().get(name)
}

func (m *Manager) pool(name string) (*pool, error) {
	p := m.lookup(name)
	if p == nil {
		return nil, fmt.Errorf("pools: pool %q: %w (create it first, or omit the name for %s)", name, ErrUnknownPool, DefaultPool)
	}
	return p, nil
}

// CreatePool creates a pool of slots slots. It fails with ErrPoolExists if
// the name is taken and ErrInvalidPool for a bad name or slots outside
// 1..MaxSlots.
func (m *Manager) CreatePool(name string, slots int, description string) error {
	return m.configure(PoolConfig{Name: name, Slots: slots, Description: description}, true)
}

// ConfigurePool creates the pool if it does not exist, otherwise applies cfg
// to it in place exactly as UpdatePool does for the size (and sets the
// description, MaxQueued and LeaseTTL; lowering MaxQueued never drops
// requests already queued, and a new LeaseTTL applies to new leases only).
func (m *Manager) ConfigurePool(cfg PoolConfig) error {
	return m.configure(cfg, false)
}

// UpdatePool resizes a pool in place, while it is busy if need be.
// Growing grants waiting requests at once. Shrinking never preempts holders:
// Used may stay above Total until they release (Available reports 0, never
// less), and queued requests for more than the new total fail with
// ErrExceedsCapacity since they could never be granted.
func (m *Manager) UpdatePool(name string, slots int) error {
	p, err := m.pool(name)
	if err != nil {
		return err
	}
	if slots < 1 || slots > MaxSlots {
		return fmt.Errorf("pools: pool %q: slots %d: %w (use 1..%d)", p.name, slots, ErrInvalidPool, MaxSlots)
	}
	p.mu.Lock()
	if p.deleted {
		p.mu.Unlock()
		return fmt.Errorf("pools: pool %q: %w (deleted)", p.name, ErrUnknownPool)
	}
	p.resizeLocked(slots)
	p.mu.Unlock()
	return nil
}

// ConfigurePools applies ConfigurePool to each of cfgs, publishing the new
// pools in one snapshot: configuring n pools costs O(n) instead of the O(n²)
// of n ConfigurePool calls. Every cfg is validated first; if any is invalid
// the error (joined, one per invalid cfg) is returned and nothing changes.
// A name given twice is an error too.
func (m *Manager) ConfigurePools(cfgs ...PoolConfig) error {
	var errs []error
	seen := make(map[string]bool, len(cfgs))
	for _, c := range cfgs {
		if err := c.Validate(); err != nil {
			errs = append(errs, err)
		} else if seen[c.Name] {
			errs = append(errs, fmt.Errorf("pools: pool %q: configured twice in one call: %w", c.Name, ErrInvalidPool))
		}
		seen[c.Name] = true
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.configureLocked(cfgs, false)
}

func (m *Manager) configure(cfg PoolConfig, mustBeNew bool) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.configureLocked([]PoolConfig{cfg}, mustBeNew)
}

// configureLocked applies valid cfgs, creating missing pools in one new
// snapshot. With mustBeNew an existing pool is an error (before any change).
func (m *Manager) configureLocked(cfgs []PoolConfig, mustBeNew bool) error {
	old := m.pools.Load().byName
	var snap map[string]*pool
	for _, cfg := range cfgs {
		if p := old[cfg.Name]; p != nil {
			if mustBeNew {
				return fmt.Errorf("pools: pool %q: %w (use UpdatePool to resize it)", cfg.Name, ErrPoolExists)
			}
			p.mu.Lock()
			p.description, p.maxQueued, p.leaseTTL = cfg.Description, cfg.MaxQueued, cfg.LeaseTTL
			p.resizeLocked(cfg.Slots)
			p.mu.Unlock()
			continue
		}
		if snap == nil {
			snap = maps.Clone(old)
		}
		snap[cfg.Name] = newPool(m, cfg)
	}
	if snap != nil {
		m.pools.Store(newPoolTable(snap))
	}
	return nil
}

// DeletePool removes an idle pool. It fails with ErrDefaultPool for
// default_pool, ErrUnknownPool if there is no such pool, and ErrPoolInUse
// while any slot is held or any request is queued (the pool is then left
// unchanged).
func (m *Manager) DeletePool(name string) error {
	if name == DefaultPool {
		return fmt.Errorf("pools: pool %q: %w (resize it instead)", name, ErrDefaultPool)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.pools.Load().byName
	p := old[name]
	if p == nil {
		return fmt.Errorf("pools: pool %q: %w", name, ErrUnknownPool)
	}
	p.mu.Lock()
	if p.used > 0 || len(p.waiters) > 0 {
		used, queued := p.used, len(p.waiters)
		p.mu.Unlock()
		return fmt.Errorf("pools: pool %q: %d slot(s) held, %d request(s) queued: %w (release them or wait, then retry)", name, used, queued, ErrPoolInUse)
	}
	// Marked under the pool's lock, so an Acquire that loaded the old
	// snapshot sees it and fails with ErrUnknownPool instead of waiting.
	p.deleted = true
	p.mu.Unlock()
	snap := maps.Clone(old)
	delete(snap, name)
	m.pools.Store(newPoolTable(snap))
	return nil
}

// PoolStatus is a point-in-time view of one pool.
type PoolStatus struct {
	Name        string
	Description string
	Total       int // configured slots
	Used        int // slots held; may exceed Total after a shrink
	Available   int // max(Total-Used, 0)
	Queued      int // waiting requests
	QueuedSlots int // slots the waiting requests ask for
	// OldestWait is how long the longest-waiting request has waited.
	OldestWait time.Duration
	MaxQueued  int
	LeaseTTL   time.Duration
	Stats      PoolStats
}

// PoolStats are monotonic counters since the pool was created.
type PoolStats struct {
	Granted   uint64 // leases handed to callers (Restore not included)
	Released  uint64 // leases released by their holders
	Cancelled uint64 // requests whose context ended before a grant (or before the call)
	TimedOut  uint64 // requests whose Request.Timeout elapsed
	Expired   uint64 // leases whose TTL elapsed; their slots came back
	Rejected  uint64 // ErrExceedsCapacity, ErrQueueFull, or a store failure at grant
	Wait      WaitSummary
}

// WaitSummary summarises the waits of granted requests that had to queue.
// Requests granted at once are not included.
type WaitSummary struct {
	Count uint64
	Sum   time.Duration
	Max   time.Duration
}

// Mean is Sum/Count, or 0 when Count is 0.
func (w WaitSummary) Mean() time.Duration {
	if w.Count == 0 {
		return 0
	}
	return w.Sum / time.Duration(w.Count)
}

// PoolStatus reports one pool; an unknown name fails with ErrUnknownPool.
// It costs O(queued requests) for OldestWait.
func (m *Manager) PoolStatus(name string) (PoolStatus, error) {
	p, err := m.pool(name)
	if err != nil {
		return PoolStatus{}, err
	}
	return p.status(m.clock.Now()), nil
}

// ListPools reports every pool, sorted by name.
func (m *Manager) ListPools() []PoolStatus {
	snap := m.pools.Load().byName
	now := m.clock.Now()
	out := make([]PoolStatus, 0, len(snap))
	for _, name := range slices.Sorted(maps.Keys(snap)) {
		out = append(out, snap[name].status(now))
	}
	return out
}

// Lease returns the held lease with this ID, as reported by (*Lease).ID or a
// LeaseRecord, so a daemon can heartbeat or release it on behalf of a remote
// holder. A released or expired lease fails with ErrUnknownLease.
func (m *Manager) Lease(id string) (*Lease, error) {
	l, ok := m.Held(id)
	if !ok {
		return nil, fmt.Errorf("pools: lease %q: %w (released, expired, or never granted)", id, ErrUnknownLease)
	}
	return l, nil
}

// Held is Lease without the error, for a lookup that expects to miss (a
// request's first try, looking for the grant of an earlier one).
func (m *Manager) Held(id string) (*Lease, bool) {
	m.idMu.Lock()
	l := m.ids[id]
	m.idMu.Unlock()
	return l, l != nil
}
