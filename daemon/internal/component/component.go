// Package component is what every kind of runtime component a daemon runs
// has in common: the Input of a reload (the runtime document, where its
// entries were declared), the Set interface each kind implements (prepare
// a document, commit it, sweep, status, close), and the helpers a keyed set
// builds its prepare and commit from. Reloads follow Caddy: every set
// prepares, and only when all did is anything committed.
package component

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/reconcile"
	"github.com/rpdhq/rpd/spec"
)

// input is what a reload runs: the runtime document (the daemon's only
// source of component settings), where each of its entries was declared,
// and the configuration's daemon settings (the rpd block).
type Input struct {
	doc *reconcile.RuntimeDoc
	// ranges maps an address ("pool.db") to its declaration, for error
	// locations; empty in serve mode, where the document comes from the
	// state store.
	ranges map[string]hcl.Range
	// cfg is the loaded configuration in watch mode (what apply pushes),
	// the start-up one in serve mode; components never read it.
	cfg *spec.Config
}

// watchInput is watch mode's input: the document applying cfg would write.
func WatchInput(cfg *spec.Config) *Input {
	in := &Input{doc: reconcile.DesiredDoc(cfg), ranges: map[string]hcl.Range{}, cfg: cfg}
	add := func(t reconcile.ResourceType, name string, r hcl.Range) {
		in.ranges[reconcile.Address{Type: t, Name: name}.String()] = r
	}
	for _, c := range cfg.RunnerClasses {
		add(reconcile.TypeRunnerClass, c.Name, c.DeclRange)
	}
	for _, b := range cfg.Budgets {
		add(reconcile.TypeBudget, b.Name, b.DeclRange)
	}
	for _, v := range cfg.VMCeilings {
		add(reconcile.TypeVMCeiling, v.Name, v.DeclRange)
	}
	for _, p := range cfg.Pools {
		add(reconcile.TypePool, p.Name, p.DeclRange)
	}
	for _, p := range cfg.Priorities {
		add(reconcile.TypePriority, p.Name, p.DeclRange)
	}
	return in
}

// Errorf reports a problem with the entry at addr, prefixed with the
// file:line,column of its declaration when known.
func (in *Input) Errorf(addr reconcile.Address, format string, args ...any) error {
	msg := fmt.Sprintf("%s %q: %s", addr.Type, addr.Name, fmt.Sprintf(format, args...))
	r, ok := in.ranges[addr.String()]
	if !ok || r.Filename == "" {
		return errors.New(msg)
	}
	return fmt.Errorf("%s:%d,%d: %s", r.Filename, r.Start.Line, r.Start.Column, msg)
}

// Locate prefixes err with the file:line,column of addr's declaration,
// when known; err names the object itself.
func (in *Input) Locate(addr reconcile.Address, err error) error {
	r, ok := in.ranges[addr.String()]
	if !ok || r.Filename == "" {
		return err
	}
	return fmt.Errorf("%s:%d,%d: %w", r.Filename, r.Start.Line, r.Start.Column, err)
}

// componentSet is one kind of runtime component (pools, budgets, VM
// ceilings, runner classes) kept in step with the runtime document. Like
// Caddy's apps, every set is treated alike: a reload prepares each set,
// and commits them only when all prepared. Each set guards its own state
// with its own lock; its methods are safe for concurrent use, and none
// does I/O while holding that lock.
type Set interface {
	// Prepare validates the document's entries of this kind against the
	// component's own rules and builds what is new, changing nothing. The
	// returned commit applies the change in place; a reload calls it at
	// most once, after every set prepared.
	Prepare(in *Input) (commit CommitFunc, err error)
	// Sweep removes components dropped from the configuration that have
	// become idle.
	Sweep(ctx context.Context)
	// Status adds the set's components to a status report.
	Status(out *api.Components)
	// Close stops the set's background work.
	Close()
}

// commitFunc applies a prepared change and returns one line per component
// it changed. Reconfigure calls cannot fail on a validated entry; should
// one fail anyway, that component keeps its old settings, the rest is
// applied, and the error names it.
type CommitFunc func() (changes []string, err error)

// entryChange names what changed between two entries of one kind: each
// attribute that differs, by its JSON tag, with its old and new value
// ("pool.db: slots 5 -> 6, description changed"). Long text and nested
// settings are named without their values.
func EntryChange[E comparable](addr string, old, cur E) string {
	var parts []string
	ov, cv := reflect.ValueOf(old), reflect.ValueOf(cur)
	t := ov.Type()
	for i := range t.NumField() {
		a, b := ov.Field(i).Interface(), cv.Field(i).Interface()
		if a == b {
			continue
		}
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		_, stringer := a.(fmt.Stringer)
		switch x := a.(type) {
		case string:
			if len(x)+len(b.(string)) > 60 {
				parts = append(parts, name+" changed")
			} else {
				parts = append(parts, fmt.Sprintf("%s %q -> %q", name, x, b))
			}
		case uint64:
			parts = append(parts, fmt.Sprintf("%s %s -> %s", name, spec.FormatSize(x), spec.FormatSize(b.(uint64))))
		default:
			if ov.Field(i).Kind() == reflect.Struct && !stringer {
				parts = append(parts, name+" changed")
			} else {
				parts = append(parts, fmt.Sprintf("%s %v -> %v", name, a, b))
			}
		}
	}
	return addr + ": " + strings.Join(parts, ", ")
}

// DocInput is serve mode's input: the state store's runtime document,
// with the start-up configuration (its entries carry no source ranges).
func DocInput(doc *reconcile.RuntimeDoc, cfg *spec.Config) *Input {
	return &Input{doc: doc, cfg: cfg}
}

// Config is the configuration in carries (see Input.cfg).
func (in *Input) Config() *spec.Config { return in.cfg }

// Doc is the runtime document in runs.
func (in *Input) Doc() *reconcile.RuntimeDoc { return in.doc }

// Prepare prepares every set: all of them, or an error joining every
// problem found, each with the file:line of its declaration.
func Prepare(in *Input, sets ...Set) ([]CommitFunc, error) {
	var commits []CommitFunc
	var errs []error
	for _, s := range sets {
		commit, err := s.Prepare(in)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		commits = append(commits, commit)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return commits, nil
}

// Commit applies prepared changes, in order; it returns one line per
// component changed and every error joined.
func Commit(commits []CommitFunc) ([]string, error) {
	var changes []string
	var errs []error
	for _, fn := range commits {
		ch, err := fn()
		changes = append(changes, ch...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return changes, errors.Join(errs...)
}

// Gauge and Counter send one series of a set's Collect.
func Gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

// Counter: see Gauge.
func Counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}

// B2F is a boolean as a series value.
func B2F(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Every calls fn every interval until ctx ends (the sets' sweeps, serve
// mode's reading of the state store).
func Every(ctx context.Context, interval time.Duration, fn func(ctx context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn(ctx)
		}
	}
}
