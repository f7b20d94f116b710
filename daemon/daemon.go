package daemon

import (
	"cmp"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/backend/ec2"
	"github.com/rpdhq/rpd/daemon/arbiter"
	"github.com/rpdhq/rpd/daemon/internal/component"
	"github.com/rpdhq/rpd/daemon/internal/gcfloor"
	"github.com/rpdhq/rpd/daemon/internal/h1"
	"github.com/rpdhq/rpd/daemon/internal/leader"
	"github.com/rpdhq/rpd/daemon/internal/security"
	"github.com/rpdhq/rpd/daemon/inventory"
	"github.com/rpdhq/rpd/daemon/watch"
	"github.com/rpdhq/rpd/internal/open"
	"github.com/rpdhq/rpd/reconcile"
	"github.com/rpdhq/rpd/runtime/pools"
	"github.com/rpdhq/rpd/spec"
)

// Modes of a daemon.
const (
	// ModeWatch runs the configuration in Options.Path and re-applies it
	// whenever its files change (rpd watch).
	ModeWatch = "watch"
	// ModeServe runs the runtime document of the backend's state store and
	// follows it as rpd apply changes it (rpd serve).
	ModeServe = "serve"
)

// DefaultListen is the API address when neither Options.Listen nor the
// configuration's listen attribute says otherwise.
const DefaultListen = spec.DefaultListen

// GCPercent and GCFloor are how rpd serve and rpd watch run the garbage
// collector when GOGC is not in their environment (TuneGC). The daemon's
// live heap is a few MB and every request allocates, so at Go's default
// of 100 the collector runs many times a second under load, and each
// cycle's assists and pauses land in the grants' latency tail. GOGC is
// GCPercent (400), raised after each collection while the live heap is
// small so that the heap goal stays at least GCFloor: a 4 MB live heap is
// collected every 60 MB of allocation (GOGC 1500) instead of every 16, and
// one of 16 MB or more at GOGC 400 as before.
const (
	GCPercent = 400
	GCFloor   = 64 << 20
)

// TuneGC runs the collector as rpd serve and rpd watch do (GCPercent,
// GCFloor) until the returned func, which puts back the GOGC it found.
// BenchmarkAcquireReleaseHTTP runs with it, as the daemon does.
func TuneGC() (restore func()) { return gcfloor.Start(GCPercent, GCFloor).Stop }

// Options configure a Daemon.
type Options struct {
	// Mode is ModeWatch or ModeServe.
	Mode string
	// Path is the configuration directory or file. Required in watch mode;
	// in serve mode it only says where the backend is (default: the
	// defaults of an empty configuration).
	Path string
	// Vars are the configuration's variable values.
	Vars spec.Vars
	// Diagnostics, when set, receives the diagnostics of the start-up load
	// of the configuration, warnings included, with its parsed files (for
	// source snippets), so that a caller prints them without loading the
	// configuration a second time. Errors also fail New with a
	// *ConfigError.
	Diagnostics func(files map[string]*hcl.File, diags hcl.Diagnostics)
	// Listen overrides the configuration's listen address.
	Listen string
	// Token is the bearer token from RPD_TOKEN; it overrides the
	// configuration's token. Required (from either) to listen on a
	// non-loopback address.
	Token string
	// Logger receives the daemon's logs; nil discards them.
	Logger *slog.Logger
	// Watch tunes the directory watcher (watch mode). Its Logger defaults
	// to Logger.
	Watch watch.Options
	// ManualReload turns the directory watcher off: watch mode then
	// reloads only on Daemon.Reload (SIGHUP, POST /v1/reload), for
	// deployments that reload after a checkout completes.
	ManualReload bool
	// StatePoll is how often serve mode reads the state store's version
	// (default 1s).
	StatePoll time.Duration
	// DrainTimeout bounds the graceful shutdown (default 10s).
	DrainTimeout time.Duration
	// Clock drives the daemon's own timers, the TTLs of remote budget
	// permits (it is the pools package's Clock interface); nil means the
	// wall clock. The runtime components keep the wall clock: request
	// waits and pool lease TTLs are real time.
	Clock pools.Clock
	// BodyReadTimeout bounds the time a request body may take to arrive
	// (default 5s): a body shorter than its Content-Length answers 408
	// then instead of holding the connection.
	BodyReadTimeout time.Duration
	// SweepInterval is how often components dropped from the
	// configuration are checked for idleness and removed (default 1s).
	SweepInterval time.Duration
	// Advertise is the URL other replicas of the stack reach this daemon
	// at (RPD_ADVERTISE, -advertise); it overrides the configuration's
	// ha.advertise. Empty: http:// and the listen address (with the host
	// name for an unspecified address such as 0.0.0.0), https:// with
	// TLS.
	Advertise string
	// CAFile (RPD_CA_FILE) verifies the leader a standby forwards to over
	// https; it overrides the tls block's ca_file and client_ca_file.
	CAFile string
	// LateAnswers turns off answers sent early: a grant's answer is then
	// written by its request's goroutine once woken, instead of by the
	// grant journal's writer the moment the grant is durable (package
	// internal/answer). For same-run comparisons.
	LateAnswers bool
	// Stdout receives the audit log when audit_log is "-" (default
	// os.Stdout).
	Stdout io.Writer
}

// Daemon serves the runtime components over HTTP and keeps them in step
// with the configuration. Create it with New, run it with Run.
type Daemon struct {
	opts    Options
	log     *slog.Logger
	backend *open.Backend
	// arb holds the stack's grants; inv the runner classes and the fleet.
	arb     *arbiter.Arbiter
	inv     *inventory.Inventory
	ec2     *ec2Opener
	metrics *metrics
	// plain is the API's server over plain connections, once it runs.
	plain atomic.Pointer[h1.Server]
	// elector holds or contends for the stack's leader lease; forward
	// sends a standby's pools, budgets and ceilings requests to the leader.
	elector *leader.Elector
	forward *forwarder
	// serving is set once this daemon, as leader, has restored the stack's
	// grants and answers arbitrated requests itself.
	serving atomic.Bool
	// apply pushes a validated configuration to the backend (reconcile's
	// plan and apply) before the components are reconfigured; nil in serve
	// mode, where rpd apply does it.
	apply    func(ctx context.Context, cfg *spec.Config) error
	reloader *reloader
	// stack and base are the start-up configuration's stack and the
	// settings serve mode takes from it (backend, listen, token).
	stack string
	base  *spec.Config
	// stateVersion is the state store version of the runtime document last
	// applied (watch) or followed (serve).
	stateVersion atomic.Int64
	// creds are the accepted credentials (auth.go), swapped on reload;
	// tls, when set, serves HTTPS and verifies the leader (tlsconf.go);
	// audit is the audit log (nil: none).
	creds    atomic.Pointer[security.Credentials]
	tls      *security.TLSFiles
	roots    *x509.CertPool // RPD_CA_FILE, on a daemon without tls
	audit    *security.AuditLog
	sec      *security.Metrics
	stopping atomic.Bool
	started  time.Time
	ln       net.Listener
	handler  http.Handler
	runOnce  sync.Once
}

// New loads the configuration, opens the backend, builds every runtime
// component, restores held pool leases and binds the listen address. An
// invalid configuration fails with a *ConfigError; a non-loopback listen
// address without a token fails too.
func New(ctx context.Context, opts Options) (*Daemon, error) {
	if opts.Mode != ModeWatch && opts.Mode != ModeServe {
		return nil, fmt.Errorf("daemon: unknown mode %q; use %q or %q", opts.Mode, ModeWatch, ModeServe)
	}
	if opts.Advertise != "" {
		if u, err := url.Parse(opts.Advertise); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("daemon: advertise address %q: use the URL other replicas reach this daemon at, such as http://10.0.0.5:7070", opts.Advertise)
		}
		opts.Advertise = strings.TrimRight(opts.Advertise, "/")
	}
	if opts.Mode == ModeWatch && opts.Path == "" {
		return nil, errors.New("daemon: watch mode needs the configuration directory or file")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.StatePoll <= 0 {
		opts.StatePoll = time.Second
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = 10 * time.Second
	}
	if opts.BodyReadTimeout <= 0 {
		opts.BodyReadTimeout = 5 * time.Second
	}
	if opts.SweepInterval <= 0 {
		opts.SweepInterval = time.Second
	}
	if opts.Clock == nil {
		opts.Clock = pools.SystemClock{}
	}
	d := &Daemon{opts: opts, log: opts.Logger, started: time.Now(), reloader: newReloader()}
	d.metrics = newMetrics(d)
	d.sec = security.NewMetrics(d.metrics.reg)
	if d.opts.Stdout == nil {
		d.opts.Stdout = os.Stdout
	}

	cfg, hash, err := d.initialConfig()
	if err != nil {
		return nil, err
	}
	d.stack, d.base = cfg.Stack, cfg
	listen := opts.Listen
	if listen == "" {
		listen = cfg.Listen
	}
	if listen == "" {
		listen = DefaultListen
	}
	if err := d.secure(cfg, listen); err != nil {
		return nil, err
	}

	d.backend, err = open.Open(ctx, cfg.Stack, reconcile.BackendConfigOf(cfg.Backend), open.Options{Logger: d.log})
	if err != nil {
		return nil, fmt.Errorf("open the %s backend: %w", cfg.Backend.Type, err)
	}
	d.backend.Observe(d.metrics.obs.backendCall)
	// Listen before the election: the advertised address defaults to the
	// bound one.
	d.ln, err = net.Listen("tcp", listen)
	if err != nil {
		d.close()
		return nil, fmt.Errorf("listen on %s: %w", listen, err)
	}
	advertise := cmp.Or(opts.Advertise, cfg.HA.Advertise, d.scheme()+strings.TrimPrefix(defaultAdvertise(d.ln.Addr().String()), "http://"))
	d.elector = leader.NewElector(d.backend.Leader, cfg.HA.Lease, cfg.HA.Renew, advertise, opts.Mode,
		func() string { return d.reloader.state().hash }, d.log.With("component", "leader"))
	d.forward = newForwarder(d)
	// The one place the grants' stores are assembled: the backend's,
	// fenced with the epoch this daemon leads under.
	d.ec2 = &ec2Opener{stack: cfg.Stack, region: cfg.Backend.Region, profile: cfg.Backend.Profile, log: d.log.With("component", "ec2")}
	d.arb, err = arbiter.New(arbiter.Options{
		Logger:      d.log,
		Clock:       opts.Clock,
		Backend:     d.backend,
		Leases:      leader.NewPools(d.elector, d.backend.FencedPools, d.backend.Pools),
		Grants:      leader.NewGrants(d.elector, d.backend.FencedGrants, d.backend.Grants),
		Arbitrating: d.arbitrating,
		EC2:         d.ec2.open,
	})
	if err != nil {
		d.close()
		return nil, err
	}
	d.inv = inventory.New(inventory.Options{
		Logger:      d.log,
		Backend:     d.backend,
		Arbiter:     d.arb,
		Arbitrating: d.arbitrating,
		Epoch: func() int64 {
			epoch, _ := d.elector.Leading()
			return epoch
		},
		EC2: d.ec2.open,
	}, opts.Clock.Now)
	d.metrics.reg.MustRegister(d.arb.Collectors()...)
	d.metrics.reg.MustRegister(d.inv.Collectors()...)
	if opts.Mode == ModeWatch {
		d.apply = d.reconcileApply
	}
	d.handler = d.routes()

	var res api.ReloadResult
	if opts.Mode == ModeWatch {
		res = api.ReloadResult{Error: "start-up cancelled"}
		d.reloader.do(ctx, func() { res = d.applyDoc(ctx, d.reloader.state(), component.WatchInput(cfg), hash, time.Now()) })
	} else {
		res = d.Reload(ctx)
	}
	d.auditReload("start", res)
	if !res.OK {
		d.close()
		return nil, fmt.Errorf("start-up configuration rejected:\n%s", res.Error)
	}
	won, err := d.firstElection(ctx)
	if err != nil {
		d.close()
		return nil, fmt.Errorf("take part in the leader election of stack %s: %w", d.stack, err)
	}
	if won {
		if err := d.takeOver(ctx, true); err != nil {
			// Hand the lease back at once, so a standby need not wait it
			// out; ctx may be the very stop that failed the takeover.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			if rerr := d.elector.Resign(rctx); rerr != nil {
				d.log.Warn("could not release the leader lease after a failed start; a standby takes over when it expires", "err", rerr)
			}
			cancel()
			d.close()
			return nil, err
		}
	} else {
		l := d.elector.View()
		d.log.Info("standing by: another daemon leads the stack", "leader", l.Holder, "address", l.Address, "epoch", l.Epoch, "expires_at", l.ExpiresAt)
	}
	return d, nil
}

// initialConfig loads the start-up configuration: the watched one, or in
// serve mode the one that says where the backend is.
func (d *Daemon) initialConfig() (*spec.Config, string, error) {
	files, hash := map[string][]byte{"(defaults)": nil}, ""
	l := spec.NewLoader()
	var cfg *spec.Config
	var diags hcl.Diagnostics
	if d.opts.Path != "" {
		snap, err := watch.Take(d.opts.Path)
		if err == nil && len(snap.Files) == 0 {
			err = errNoFiles
		}
		if err != nil {
			// The loader says what is wrong with the path the way every
			// other command does.
			if cfg, diags = l.Load(d.opts.Path, d.opts.Vars); !diags.HasErrors() {
				return nil, "", err
			}
		}
		files, hash = snap.Files, snap.Hash
	}
	if !diags.HasErrors() {
		cfg, diags = l.LoadSources(files, d.opts.Vars)
	}
	if d.opts.Diagnostics != nil && len(diags) > 0 {
		d.opts.Diagnostics(l.Files(), diags)
	}
	if diags.HasErrors() {
		return nil, "", &ConfigError{Diags: diags, Files: l.Files()}
	}
	return cfg, hash, nil
}

// Addr is the address the API listens on.
func (d *Daemon) Addr() string { return d.ln.Addr().String() }

// Handler is the daemon's HTTP API, for tests that serve it themselves.
func (d *Daemon) Handler() http.Handler { return d.handler }

// Run serves the API, follows the configuration and sweeps idle dropped
// components until ctx is done, then shuts down gracefully: it stops
// accepting connections, wakes every waiting request (they answer 503),
// waits up to DrainTimeout for in-flight requests, and closes the backend.
// Held pool leases, budget permits and VM-ceiling claims are already
// recorded in the backend and are restored by the next daemon, under the
// same IDs. Run returns nil after a clean shutdown.
func (d *Daemon) Run(ctx context.Context) error {
	ran := false
	d.runOnce.Do(func() { ran = true })
	if !ran {
		return errors.New("daemon: Run called twice")
	}
	baseCtx, baseCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer baseCancel()
	srv, ln := d.newAPIServer(baseCtx)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	// The election outlives the other loops: a draining leader keeps its
	// lease, and so may still record the releases and grants in flight.
	electCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElection()
	var election sync.WaitGroup
	election.Go(func() { d.elector.Loop(electCtx, func(ctx context.Context) error { return d.takeOver(ctx, false) }) })
	loopCtx, stopLoops := context.WithCancel(ctx)
	var loops sync.WaitGroup
	loops.Go(func() { d.arb.Run(loopCtx, d.opts.SweepInterval) })
	loops.Go(func() { d.inv.Run(loopCtx, d.opts.SweepInterval) })
	switch d.opts.Mode {
	case ModeWatch:
		if d.opts.ManualReload {
			break
		}
		wopts := d.opts.Watch
		if wopts.Logger == nil {
			// Without it a watcher error or the fall-back to polling would
			// go unlogged.
			wopts.Logger = d.log.With("component", "watch")
		}
		w := watch.New(d.opts.Path, wopts)
		loops.Go(func() {
			_ = w.Run(loopCtx, func(reason watch.Reason) { d.reloadIfChanged(loopCtx) })
		})
	case ModeServe:
		loops.Go(func() { d.followLoop(loopCtx) })
	}
	d.log.Info("rpd daemon listening", "mode", d.opts.Mode, "addr", d.Addr(), "advertise", d.elector.Address, "role", d.Status().Role,
		"backend", d.backend.Config.Type, "config_version", d.reloader.state().version)

	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
		err = fmt.Errorf("serve the API on %s: %w", d.Addr(), err)
	case <-d.elector.Lost:
		err = ErrSteppedDown
	}
	d.stopping.Store(true)
	d.arb.SetStopping()
	d.log.Info("shutting down: handing over, then draining in-flight requests", "timeout", d.opts.DrainTimeout)
	stopLoops()
	baseCancel() // long-polls give up and answer 503
	drained := d.drain(context.WithoutCancel(ctx), srv)
	// Hand over as soon as the requests in flight had handoverGrace to
	// finish: their record writes land under this daemon's epoch, the
	// queued deletes are flushed, and the lease is released so that a
	// standby takes over at once, whatever is still connected. A grant
	// still in flight after that is fenced (answered 503, nothing held).
	select {
	case <-drained:
	case <-time.After(handoverGrace):
	}
	loops.Wait()
	d.closeRuntime()
	stopElection()
	election.Wait()
	d.reloader.stop()
	if !errors.Is(err, ErrSteppedDown) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if rerr := d.elector.Resign(rctx); rerr != nil {
			d.log.Warn("could not release the leader lease; a standby takes over when it runs out", "err", rerr)
		}
		cancel()
	}
	<-drained
	d.closeBackend()
	d.audit.Close()
	d.log.Info("rpd daemon stopped")
	return err
}

// handoverGrace is how long a stopping leader lets the requests in flight
// finish before it releases its lease: they are answered by then unless a
// backend call stalls.
const handoverGrace = 500 * time.Millisecond

// drain shuts srv down within Options.DrainTimeout and closes the channel
// it returns when every connection is closed. Connections that carry no
// request are closed at once, those that never sent one included (Go's
// Shutdown waits up to 5 s for a new connection's first request), and
// keep-alives are off, so a connection closes after its answer in flight.
func (d *Daemon) drain(ctx context.Context, srv apiServer) <-chan struct{} {
	srv.SetKeepAlivesEnabled(false)
	done := make(chan struct{})
	ctx, cancel := context.WithTimeout(ctx, d.opts.DrainTimeout)
	go func() {
		defer close(done)
		defer cancel()
		if serr := srv.Shutdown(ctx); serr != nil {
			d.log.Warn("drain timed out; closing the remaining connections", "err", serr)
			_ = srv.Close()
		}
	}()
	go func() {
		// Shutdown closes the listener first; a connection accepted just
		// before that becomes known a moment later, so look again until
		// the drain ends.
		t := time.NewTicker(25 * time.Millisecond)
		defer t.Stop()
		for {
			srv.CloseQuiet()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return done
}

func (d *Daemon) close() {
	d.reloader.stop()
	d.closeRuntime()
	d.closeBackend()
	d.audit.Close()
}

// closeRuntime stops the components and writes the queued record deletes.
func (d *Daemon) closeRuntime() {
	if d.inv != nil {
		d.inv.Close()
	}
	if d.arb != nil {
		d.arb.Close()
	}
}

// ec2Opener opens the stack's EC2 client on first use, from the AWS
// configuration chain (the backend block's region and profile, when the
// aws backend is used), for the fleet and usage "ec2" ceilings alike.
type ec2Opener struct {
	stack, region, profile string
	log                    *slog.Logger

	mu sync.Mutex
	c  *ec2.Client
}

func (o *ec2Opener) open(ctx context.Context) (*ec2.Client, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.c != nil {
		return o.c, nil
	}
	c, err := ec2.Open(ctx, ec2.Options{Stack: o.stack, Region: o.region, Profile: o.profile, Logger: o.log})
	if err != nil {
		return nil, err
	}
	o.c = c
	return c, nil
}

func (d *Daemon) closeBackend() {
	if d.backend != nil {
		if err := d.backend.Close(); err != nil {
			d.log.Warn("closing the backend", "err", err)
		}
	}
}

// checkSecurity builds the credentials of cfg (reading token files anew),
// refusing a configuration that would leave a non-loopback listener
// without one, or with a weak secret. A changed listen address, tls block
// or audit_log needs a restart.
func (d *Daemon) checkSecurity(cfg *spec.Config) (*security.Credentials, error) {
	if d.ln == nil {
		return d.creds.Load(), nil // start-up: New checked what it binds
	}
	creds, err := security.NewCredentials(cfg, d.opts.Token, d.Addr())
	if err != nil {
		return nil, err
	}
	d.warnRestartOnly(cfg)
	if cfg.Stack != d.stack || !sameBackend(cfg.Backend, d.base.Backend) {
		return nil, fmt.Errorf("the configuration moves the daemon to stack %q on backend %s, but it serves stack %q on backend %s; restart the daemon to switch stacks or backends",
			cfg.Stack, backendText(cfg.Backend), d.stack, backendText(d.base.Backend))
	}
	if d.opts.Listen == "" && cfg.Listen != "" && cfg.Listen != d.Addr() {
		if prev := d.reloader.state().cfg; prev == nil || prev.Listen != cfg.Listen {
			d.log.Warn("the listen address changed in the configuration; it takes effect when the daemon restarts", "listening", d.Addr(), "configured", cfg.Listen)
		}
	}
	return creds, nil
}

// sameBackend reports whether two backend blocks name the same store.
func sameBackend(a, b spec.Backend) bool {
	return a.Type == b.Type && a.Path == b.Path && a.Region == b.Region && a.Profile == b.Profile && a.TablePrefix == b.TablePrefix
}

func backendText(b spec.Backend) string {
	if b.Type == "aws" {
		return fmt.Sprintf("aws (region %q, table prefix %q)", b.Region, b.TablePrefix)
	}
	return fmt.Sprintf("local (%s)", b.Path)
}

// ErrSteppedDown is what Daemon.Run returns when the daemon lost the
// leadership of its stack (another daemon took the lease while this one
// was paused, partitioned or could not renew): it drained and closed, and
// holds nothing. Start a new Daemon: it comes back as a standby.
var ErrSteppedDown = leader.ErrSteppedDown
