package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/daemon/internal/component"
	"github.com/rpdhq/rpd/daemon/watch"
	"github.com/rpdhq/rpd/reconcile"
	"github.com/rpdhq/rpd/spec"
)

// reloadState is the daemon's configuration state. It is replaced as a
// whole (never mutated), so readers load it without locks.
type reloadState struct {
	// version increments on every successful reload that changes
	// something; 0 until the first configuration is active.
	version int64
	hash    string // snapshot hash of the active configuration
	print   string // fingerprint of the active runtime document (see fingerprint)
	// attempted is the snapshot hash the last reload attempted, good or
	// bad: a rejected configuration is not retried until its content
	// changes.
	attempted string
	// cfg holds the active daemon settings (stack, listen, token, backend).
	cfg  *spec.Config
	last api.ReloadResult
	// rejected counts the reloads rejected since the last good one, so
	// that the recovery is logged (the last log line is then not a stale
	// error).
	rejected int
}

// reloader owns the configuration state: one goroutine (run) carries out
// the reloads (file watch, SIGHUP, POST /v1/reload, serve mode's follow
// tick) and a new leader's apply, one at a time, in the order they arrive
// on jobs. Callers hand it work and wait; none holds a lock over the I/O a
// reload does. Readers load the published state without locks.
type reloader struct {
	cur     atomic.Pointer[reloadState]
	jobs    chan reloadJob
	quit    chan struct{} // closed by stop
	stopped chan struct{} // closed when run returns
	once    sync.Once
}

// reloadJob is one piece of work for the owner; done is closed after fn ran.
type reloadJob struct {
	fn   func()
	done chan struct{}
}

func newReloader() *reloader {
	r := &reloader{jobs: make(chan reloadJob), quit: make(chan struct{}), stopped: make(chan struct{})}
	go r.run()
	return r
}

func (r *reloader) run() {
	defer close(r.stopped)
	for {
		select {
		case j := <-r.jobs:
			j.fn()
			close(j.done)
		case <-r.quit:
			return
		}
	}
}

// do runs fn on the owner, after the work handed in before it, and waits
// for it. It reports false, fn not run, when ctx ended before the owner
// took fn, or the reloader was stopped.
func (r *reloader) do(ctx context.Context, fn func()) bool {
	j := reloadJob{fn: fn, done: make(chan struct{})}
	select {
	case r.jobs <- j:
	case <-ctx.Done():
		return false
	case <-r.stopped:
		return false
	}
	<-j.done // the owner finishes what it took
	return true
}

// stop ends the owner after the work it is doing; later calls of do
// report false.
func (r *reloader) stop() {
	r.once.Do(func() { close(r.quit) })
	<-r.stopped
}

func (r *reloader) state() *reloadState {
	if s := r.cur.Load(); s != nil {
		return s
	}
	return &reloadState{}
}

// Reload reloads the configuration now, even if its files did not change
// (SIGHUP, POST /v1/reload), and returns the result. In serve mode it
// re-reads the runtime document.
func (d *Daemon) Reload(ctx context.Context) api.ReloadResult {
	return d.reload(ctx, true)
}

// reloadIfChanged is the watcher's reload: a snapshot whose hash was
// already attempted is a no-op.
func (d *Daemon) reloadIfChanged(ctx context.Context) api.ReloadResult {
	return d.reload(ctx, false)
}

// reload hands a reload to the reloader's owner and returns its result.
func (d *Daemon) reload(ctx context.Context, force bool) api.ReloadResult {
	var res api.ReloadResult
	ran := d.reloader.do(ctx, func() {
		defer d.auditReloadSince(d.reloader.state().last.At, force)
		if d.opts.Mode == ModeServe {
			res = d.follow(ctx, force)
			return
		}
		res = d.reloadFiles(ctx, force)
	})
	if !ran {
		st := d.reloader.state()
		return api.ReloadResult{OK: false, At: time.Now().UTC(), ConfigVersion: st.version,
			Error: "the reload did not run: the daemon is stopping, or the request was cancelled; the active configuration is unchanged"}
	}
	return res
}

// reloadFiles is watch mode's reload, on the owner: snapshot the
// directory, load it, and apply it unless it was already attempted.
func (d *Daemon) reloadFiles(ctx context.Context, force bool) api.ReloadResult {
	start := time.Now()
	prev := d.reloader.state()
	snap, err := watch.Take(d.opts.Path)
	if err != nil {
		return d.reject(prev, "", start, err)
	}
	if !force && snap.Hash == prev.attempted {
		return prev.last
	}
	cfg, err := loadSnapshot(snap, d.opts.Vars)
	if err != nil {
		return d.reject(prev, snap.Hash, start, err)
	}
	return d.applyDoc(ctx, prev, component.WatchInput(cfg), snap.Hash, start)
}

// applyDoc is build → validate → swap for a runtime document: every
// set is prepared before anything is touched, and a failure keeps the last
// good configuration active. It runs on the reloader's owner (or in New,
// before anything else can reload).
func (d *Daemon) applyDoc(ctx context.Context, prev *reloadState, in *component.Input, hash string, start time.Time) api.ReloadResult {
	cfg := in.Config()
	creds, err := d.checkSecurity(cfg)
	if err != nil {
		return d.reject(prev, hash, start, err)
	}
	commits, err := d.prepare(in)
	if err != nil {
		return d.reject(prev, hash, start, err)
	}
	if _, notLeader := d.elector.Leading(); d.apply != nil && notLeader == nil {
		// Only the leader applies; standbys validate and run the same
		// files (their pickup serves runners) and report their hash.
		if err := d.apply(ctx, cfg); err != nil {
			// A guard (deleting a queue that holds idle runners) or an
			// unmanaged object is the configuration's doing: not retried
			// until it changes. Anything else (a busy lock, an unreachable
			// backend) is forgotten, so the next trigger or the periodic
			// resync tries the same content again.
			attempted := ""
			if errors.Is(err, reconcile.ErrGuard) || errors.Is(err, reconcile.ErrNotManaged) || errors.Is(err, reconcile.ErrWrongStack) {
				attempted = hash
			}
			return d.reject(prev, attempted, start, fmt.Errorf("apply: %w", err))
		}
	}
	changes, commitErr := d.arb.Commit(ctx, commits)
	d.inv.Sweep(ctx)
	if prev.cfg != nil && prev.cfg.Token != cfg.Token {
		changes = append(changes, "rpd.token: changed")
	}
	d.creds.Store(creds)
	print := fingerprint(in.Doc())
	next := &reloadState{version: prev.version, hash: hash, print: print, attempted: hash, cfg: cfg}
	changed := print != prev.print || len(changes) > 0
	if changed {
		next.version++
	}
	now := time.Now()
	next.last = api.ReloadResult{OK: commitErr == nil, At: now.UTC(), Changed: changed, ConfigVersion: next.version, DurationMS: ms(now.Sub(start))}
	if commitErr != nil {
		next.last.Error = commitErr.Error()
	}
	d.reloader.cur.Store(next)
	d.metrics.version.Set(float64(next.version))
	if commitErr != nil {
		d.metrics.reloads.WithLabelValues("failure").Inc()
		d.metrics.lastOK.Set(0)
		d.log.Error("configuration partly applied", "version", next.version, "err", commitErr)
		return next.last
	}
	d.metrics.reloads.WithLabelValues("success").Inc()
	d.metrics.lastOK.Set(1)
	d.metrics.lastSuccessTS.Set(float64(now.UnixNano()) / 1e9)
	if changed {
		// Only the leader applies to the backend; a standby (or a daemon
		// before its first election) only runs the configuration.
		msg := "configuration applied"
		if _, err := d.elector.Leading(); err != nil || d.apply == nil {
			msg = "configuration loaded (the leader applies it to the backend)"
		}
		d.log.Info(msg, "version", next.version, "hash", short(hash), "changes", strings.Join(changes, "; "), "duration", now.Sub(start))
	}
	if prev.rejected > 0 { // also when the fix restored what was active
		d.log.Info(fmt.Sprintf("configuration applied again after %s", plural(prev.rejected, "rejected reload")), "version", next.version)
	}
	return next.last
}

// reject records a failed reload; the active configuration stays.
func (d *Daemon) reject(prev *reloadState, hash string, start time.Time, err error) api.ReloadResult {
	next := *prev
	next.attempted = hash
	next.rejected++
	now := time.Now()
	next.last = api.ReloadResult{OK: false, At: now.UTC(), Error: err.Error(), ConfigVersion: prev.version, DurationMS: ms(now.Sub(start))}
	d.reloader.cur.Store(&next)
	d.metrics.reloads.WithLabelValues("failure").Inc()
	d.metrics.lastOK.Set(0)
	d.log.Error("configuration rejected; the last good configuration stays active", "version", prev.version, "err", err)
	return next.last
}

// plural is "1 rejected reload", "2 rejected reloads".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}

// ConfigError is a configuration that does not load: its diagnostics, with
// the parsed files for printing snippets.
type ConfigError struct {
	Diags hcl.Diagnostics
	Files map[string]*hcl.File
}

func (e *ConfigError) Error() string { return formatDiags(e.Diags) }

// errNoFiles: the configuration directory holds no *.hcl file.
var errNoFiles = errors.New("the configuration has no *.hcl files")

// loadSnapshot loads a configuration from a snapshot's files.
func loadSnapshot(snap watch.Snapshot, vars spec.Vars) (*spec.Config, error) {
	if len(snap.Files) == 0 {
		return nil, errNoFiles
	}
	l := spec.NewLoader()
	cfg, diags := l.LoadSources(snap.Files, vars)
	if diags.HasErrors() {
		return nil, &ConfigError{Diags: diags, Files: l.Files()}
	}
	return cfg, nil
}

// formatDiags renders the errors of diags one per line, each prefixed by
// file:line,column.
func formatDiags(diags hcl.Diagnostics) string {
	var lines []string
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		msg := d.Summary
		if d.Detail != "" {
			msg += ": " + d.Detail
		}
		if s := d.Subject; s != nil {
			msg = fmt.Sprintf("%s:%d,%d: %s", s.Filename, s.Start.Line, s.Start.Column, msg)
		}
		lines = append(lines, msg)
	}
	return strings.Join(lines, "\n")
}

// fingerprint identifies a runtime document's meaning: the hash of its
// encoding (sorted keys, no source positions), so that moving a block or
// editing a comment is not a change.
func fingerprint(doc *reconcile.RuntimeDoc) string {
	b, err := doc.Encode()
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Status reports the daemon's own state. On a standby its pools, budgets
// and ceilings are idle copies that hold nothing, and Source is empty: GET
// /v1/status shows the leader's figures instead (statusView).
func (d *Daemon) Status() api.Status {
	st := d.reloader.state()
	out := api.Status{
		Mode:          d.opts.Mode,
		ConfigVersion: st.version,
		ConfigHash:    st.hash,
		StateVersion:  d.stateVersion.Load(),
		LastReload:    st.last,
		StartedAt:     d.started.UTC(),
		Components:    d.components(),
		Version:       buildVersion(),
	}
	if st.cfg != nil {
		out.Stack = st.cfg.Stack
	}
	out.Role = "standby"
	if d.arbitrating() {
		out.Role = "leader"
		out.Epoch, _ = d.elector.Leading()
		out.Source = api.SourceLeader
	}
	if l := d.elector.View(); l.Holder != "" {
		out.Leader = &api.LeaderStatus{Holder: l.Holder, Address: l.Address, Mode: l.Mode, Epoch: l.Epoch, Since: l.AcquiredAt, ExpiresAt: l.ExpiresAt, ConfigHash: l.ConfigHash}
		out.ConfigMatchesLeader = l.ConfigHash == st.hash
	}
	return out
}

// prepare prepares every set, the arbiter's and the inventory's: all of
// them, or every problem found.
func (d *Daemon) prepare(in *component.Input) ([]component.CommitFunc, error) {
	grants, err1 := d.arb.Prepare(in)
	runners, err2 := d.inv.Prepare(in)
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	return append(grants, runners...), nil
}

// components reports every component for /v1/status.
func (d *Daemon) components() api.Components {
	out := d.arb.Components()
	d.inv.Status(&out)
	return out
}
