package main

import (
	"context"
	"fmt"

	"github.com/rpdhq/rpd/daemon"
)

const watchHelp = `
Runs the configuration in DIR (every *.hcl file in it) or FILE, default the
current directory: applies it to the backend like "rpd apply", runs its
runtime components (pools, budgets, VM ceilings, runner-class pickup) and
serves them over the HTTP API (docs/api.md).

Whenever a file changes it reloads: load, validate, plan, apply, then
reconfigure the components in place. Held slots, permits and claims are
never dropped; a pool or budget removed while in use is kept until idle
(a pool declared with allow_destroy = true goes at once, with its holders). A
configuration that fails to load, validate or apply changes nothing: the
last good one stays active and the error (with file:line) is logged and
shown in GET /v1/status. An invalid configuration at start-up exits 1.

A non-loopback -listen address needs a bearer token (RPD_TOKEN or token in
the rpd block). SIGHUP reloads at once; SIGTERM and SIGINT drain in-flight
requests and exit 0.

Several daemons may serve one stack (docs/ha.md): the one holding the
stack's leader lease arbitrates pools, budgets and VM ceilings and applies
the configuration; the others forward those requests to it (at its
-advertise URL, default http://LISTEN) and serve runner pickup themselves.
A daemon that loses the lease restarts as a standby; SIGTERM on the leader
releases the lease, so a standby takes over at once.
`

func runWatch(ctx context.Context, e *env, args []string) int {
	var cf configFlags
	var df daemonFlags
	fs := newFlagSet("watch", "[options] [DIR|FILE]", watchHelp)
	cf.register(fs)
	df.register(fs)
	pos, code, ok := parseInterspersed(e, fs, args)
	if !ok {
		return code
	}
	path := "."
	switch len(pos) {
	case 0:
	case 1:
		path = pos[0]
	default:
		fmt.Fprintf(e.stderr, "rpd watch: expected one configuration directory or file, got %d: %v\n", len(pos), pos)
		return 1
	}
	return df.run(ctx, e, daemon.Options{Mode: daemon.ModeWatch, Path: path, Vars: cf.specVars(e), Diagnostics: cf.printer(e)})
}
