package component

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/rpdhq/rpd/reconcile"
)

// Retention is what every component of a keyed set carries: whether it was
// removed from the configuration and is kept only while in use.
type Retention struct {
	Retained bool
}

// Retain marks the component retained; it reports whether it was not yet.
func (r *Retention) Retain() bool {
	was := r.Retained
	r.Retained = true
	return !was
}

// Keep marks the component declared again.
func (r *Retention) Keep() { r.Retained = false }

// IsRetained reports whether the component is kept only for its holders.
func (r *Retention) IsRetained() bool { return r.Retained }

// Member is a keyed set's component: a pointer to a struct that embeds
// Retention.
type Member interface {
	Retain() bool
	Keep()
	IsRetained() bool
}

// Keyed is what the keyed sets (budgets, VM ceilings, runner classes)
// share: their components by name under one lock, a reload's prepare and
// commit over the document's entries of their kind, and the lookups that
// tell a declared component from one retained for its holders. No I/O is
// done with the lock held.
type Keyed[E comparable, B any, C Member] struct {
	typ   reconcile.ResourceType
	hooks Hooks[E, B, C]

	mu sync.Mutex
	m  map[string]C
}

// Hooks are what differs between keyed sets. B is what a new component
// is built from in prepare (a fatjob.Pool, a ledger, a pickup manager).
type Hooks[E comparable, B any, C Member] struct {
	// Check validates an entry as the runtime package would.
	Check func(name string, e E) error
	// Rebuild reports whether cur must be replaced by a new component for
	// e; nil: only new names are built.
	Rebuild func(cur C, e E) bool
	// Build builds the parts of a new component (prepare, or commit when
	// it was swept since); ok false builds nothing (no backend).
	Build func(name string, e E) (b B, ok bool, err error)
	// Create makes the component from its parts, replacing cur when had;
	// it returns its change line. Called with the lock held.
	Create func(name string, e E, b B, cur C, had bool) (C, string)
	// Update reconfigures cur in place for e and returns its change line,
	// "" for none. Called with the lock held, cur no longer retained.
	Update func(name string, cur C, e E) (string, error)
}

// NewKeyed returns an empty keyed set of the document's entries of typ.
func NewKeyed[E comparable, B any, C Member](typ reconcile.ResourceType, hooks Hooks[E, B, C]) *Keyed[E, B, C] {
	return &Keyed[E, B, C]{typ: typ, hooks: hooks, m: map[string]C{}}
}

// Prepare checks every entry and builds the components that must be new,
// changing nothing; the returned commit installs them and updates the
// others in place, and retains the components no longer declared. Every
// problem found is joined, each located at its entry's declaration.
func (k *Keyed[E, B, C]) Prepare(in *Input, entries map[string]E) (CommitFunc, error) {
	k.mu.Lock()
	have := maps.Clone(k.m)
	k.mu.Unlock()
	entries = maps.Clone(entries)
	fresh := map[string]B{}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		e := entries[name]
		if err := k.hooks.Check(name, e); err != nil {
			errs = append(errs, in.Errorf(reconcile.Address{Type: k.typ, Name: name}, "%v", err))
			continue
		}
		if cur, ok := have[name]; ok && (k.hooks.Rebuild == nil || !k.hooks.Rebuild(cur, e)) {
			continue
		}
		b, ok, err := k.hooks.Build(name, e)
		switch {
		case err != nil:
			errs = append(errs, in.Errorf(reconcile.Address{Type: k.typ, Name: name}, "%v", err))
		case ok:
			fresh[name] = b
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return func() ([]string, error) { return k.commit(entries, fresh) }, nil
}

// commit installs what prepare built and updates the rest, in name order.
// An entry that fails keeps its old component, and the error names it.
func (k *Keyed[E, B, C]) commit(entries map[string]E, fresh map[string]B) ([]string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var changes []string
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		change, err := k.commitOne(name, entries[name], fresh)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", k.typ, name, err))
			continue
		}
		if change != "" {
			changes = append(changes, change)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(k.m)) {
		if _, ok := entries[name]; !ok && k.m[name].Retain() {
			changes = append(changes, fmt.Sprintf("%s.%s: removed from the configuration", k.typ, name))
		}
	}
	return changes, errors.Join(errs...)
}

func (k *Keyed[E, B, C]) commitOne(name string, e E, fresh map[string]B) (string, error) {
	cur, had := k.m[name]
	b, built := fresh[name]
	if !built && !had { // swept since prepare
		var err error
		if b, built, err = k.hooks.Build(name, e); err != nil {
			return "", err
		}
		if !built {
			return "", nil // nothing to build it on (no backend)
		}
	}
	if built {
		c, change := k.hooks.Create(name, e, b, cur, had)
		k.m[name] = c
		return change, nil
	}
	cur.Keep() // declared again
	return k.hooks.Update(name, cur, e)
}

// Live returns the component of a declared name (not of a retained one).
func (k *Keyed[E, B, C]) Live(name string) (C, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	c, ok := k.m[name]
	if !ok || c.IsRetained() {
		var zero C
		return zero, false
	}
	return c, true
}

// With runs fn with the lock held, on the components by name.
func (k *Keyed[E, B, C]) With(fn func(m map[string]C)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	fn(k.m)
}

// Sweep removes the retained components idle reports true for (called
// with the lock held: no I/O) and returns them by name.
func (k *Keyed[E, B, C]) Sweep(idle func(c C) bool) map[string]C {
	k.mu.Lock()
	defer k.mu.Unlock()
	removed := map[string]C{}
	for name, c := range k.m {
		if c.IsRetained() && idle(c) {
			delete(k.m, name)
			removed[name] = c
		}
	}
	return removed
}
