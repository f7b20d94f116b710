package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/rpdhq/rpd/daemon"
)

const serveHelp = `
Runs the runtime components (pools, budgets, VM ceilings, runner-class
pickup) of the runtime document that "rpd apply" wrote to the backend's
state store, serves them over the HTTP API (docs/api.md), and follows the
document: a new version applied elsewhere is hot-applied within a few
seconds, without dropping held slots, permits or claims.

DIR or FILE, when given, is only read for the backend, the stack, the
listen address and the token; the runtime itself comes from the state
store. A non-loopback -listen address needs a bearer token (RPD_TOKEN or
token in the rpd block).

SIGHUP re-reads the state store at once; SIGTERM and SIGINT drain in-flight
requests and exit 0.

Several daemons may serve one stack (docs/ha.md): the one holding the
stack's leader lease arbitrates pools, budgets and VM ceilings; the others forward those requests to it (at its
-advertise URL, default http://LISTEN) and serve runner pickup themselves.
A daemon that loses the lease restarts as a standby; SIGTERM on the leader
releases the lease, so a standby takes over at once.
`

func runServe(ctx context.Context, e *env, args []string) int {
	var cf configFlags
	var df daemonFlags
	fs := newFlagSet("serve", "[options] [DIR|FILE]", serveHelp)
	cf.register(fs)
	df.register(fs)
	pos, code, ok := parseInterspersed(e, fs, args)
	if !ok {
		return code
	}
	path := ""
	switch len(pos) {
	case 0:
	case 1:
		path = pos[0]
	default:
		fmt.Fprintf(e.stderr, "rpd serve: expected at most one configuration directory or file, got %d: %v\n", len(pos), pos)
		return 1
	}
	return df.run(ctx, e, daemon.Options{Mode: daemon.ModeServe, Path: path, Vars: cf.specVars(e), Diagnostics: cf.printer(e)})
}

// parseInterspersed parses flags placed before and after the positional
// arguments ("rpd watch DIR -listen ADDR", as the daemon's usage is often
// written) and returns the positional ones.
func parseInterspersed(e *env, fs *flag.FlagSet, args []string) ([]string, int, bool) {
	var pos []string
	for {
		if code, ok := parseFlags(e, fs, args); !ok {
			return nil, code, false
		}
		if fs.NArg() == 0 {
			return pos, 0, true
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// daemonFlags are the flags watch and serve share.
type daemonFlags struct {
	listen    string
	advertise string
	logLevel  string
	logFormat string
}

func (f *daemonFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.listen, "listen", "", "API address HOST:PORT (default: listen in the rpd block, else "+daemon.DefaultListen+")")
	fs.StringVar(&f.advertise, "advertise", "", "URL the other replicas of the stack reach this daemon at (default: RPD_ADVERTISE, else advertise in the rpd block's ha block, else http://LISTEN)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&f.logFormat, "log-format", logText, "log format on stderr: text (key=value) or json (one JSON object a line, configuration errors included)")
}

// run starts a daemon with opts and runs it until ctx ends (SIGTERM,
// SIGINT), reloading on SIGHUP.
func (f *daemonFlags) run(ctx context.Context, e *env, opts daemon.Options) int {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		fmt.Fprintf(e.stderr, "rpd %s: -log-level %q: use debug, info, warn or error\n", opts.Mode, f.logLevel)
		return 1
	}
	log, err := daemonLogger(e.stderr, f.logFormat, level)
	if err != nil {
		fmt.Fprintf(e.stderr, "rpd %s: %v\n", opts.Mode, err)
		return 1
	}
	fatal := func(err error) { fmt.Fprintf(e.stderr, "Error: %v\n", err) }
	if f.logFormat == logJSON {
		opts.Diagnostics = diagnosticsLogger(log)
		fatal = func(err error) { log.Error("rpd daemon failed", "err", err) }
	}
	if _, set := e.getenv("GOGC"); !set {
		defer daemon.TuneGC()()
	}
	opts.Logger = log
	opts.Listen = f.listen
	opts.Token, _ = e.getenv("RPD_TOKEN")
	opts.CAFile, _ = e.getenv("RPD_CA_FILE")
	opts.Stdout = e.stdout
	opts.Advertise = f.advertise
	if opts.Advertise == "" {
		opts.Advertise, _ = e.getenv("RPD_ADVERTISE")
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		d, err := daemon.New(ctx, opts)
		if err != nil {
			var ce *daemon.ConfigError
			if errors.As(err, &ce) && opts.Diagnostics != nil {
				return 1 // printed through opts.Diagnostics
			}
			if ce == nil && ctx.Err() != nil {
				// Asked to stop while starting (or while restarting as a
				// standby after a step-down): a clean stop, not a failure.
				log.Info("rpd daemon stopped while starting", "err", err)
				return 0
			}
			fatal(err)
			return 1
		}
		err = runDaemon(ctx, d, hup, log)
		if errors.Is(err, daemon.ErrSteppedDown) {
			if ctx.Err() != nil {
				return 0 // asked to stop while stepping down
			}
			// It holds nothing now; a fresh daemon starts as a standby.
			log.Info("restarting as a standby")
			continue
		}
		if err != nil {
			fatal(err)
			return 1
		}
		return 0
	}
}

// runDaemon runs d until ctx ends or it steps down, reloading on SIGHUP.
func runDaemon(ctx context.Context, d *daemon.Daemon, hup <-chan os.Signal, log *slog.Logger) error {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for {
			select {
			case <-runCtx.Done():
				return
			case <-hup:
				res := d.Reload(runCtx)
				if res.OK {
					log.Info("SIGHUP: configuration reloaded", "config_version", res.ConfigVersion, "changed", res.Changed)
				} else {
					log.Error("SIGHUP: configuration rejected", "config_version", res.ConfigVersion, "err", res.Error)
				}
			}
		}
	}()
	return d.Run(runCtx)
}
