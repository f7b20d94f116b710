// Package daemon is rpd's long-running process (rpd watch, rpd serve): it
// runs the runtime components (pools, budgets, VM ceilings, runner-class
// pickup), serves them over a JSON HTTP API, and keeps them in step with
// the configuration without dropping work.
//
// The daemon's only input is the runtime document (reconcile.RuntimeDoc):
// watch mode builds it from the loaded configuration (reconcile.DesiredDoc),
// keeping each entry's source range for error messages; serve mode reads it
// from the backend's state store. Each kind of component is a set (poolSet,
// budgetSet, ceilingSet, classSet) behind one small interface,
// componentSet: prepare a document, commit it, sweep, status.
//
// Reloads follow Caddy: prepare every set (each runtime package's own
// checks, new components built but not started), push the configuration
// to the backend (reconcile's plan and apply, in watch mode), and only then
// commit each set, reconfiguring its components in place
// (pools.Manager.ConfigurePools, fatjob/ledger/pickup Reconfigure), so no
// held slot, permit or claim is dropped and waiters keep waiting under the
// new limits. A configuration that fails anywhere changes nothing; the
// error, with file:line, is in /v1/status and the reload metrics.
//
// Durability: pool leases are written through the backend's lease store at
// grant and heartbeat, and budget permits (permits.go) and VM-ceiling claims
// through its grant store (grants.go) at grant, heartbeat and confirm, so a
// restarted daemon (even after kill -9) still counts them, under the same
// IDs. A grant whose record cannot be written is given back.
// Claimed runner instances are durable in the instance table but have no
// TTL: their holders release them.
//
// Security (docs/security.md): auth.go finds each request's principal (a
// named token compared by its SHA-256, RPD_TOKEN, or a client certificate)
// and checks its scope against routeScopes; every grant records its
// principal with its record, so only it or an admin ends it (holderOnly).
// tlsconf.go serves TLS, re-reading rotated certificate files, and verifies
// the leader a standby forwards to; audit.go writes the audit log.
//
// Not for: loading HCL (spec), planning (reconcile), the components'
// semantics (runtime/*), or talking to a daemon (package client).
//
// Start reading at New and Daemon.Run (daemon.go), then reload.go (the
// reload state machine), components.go (the componentSet interface), one
// set with its HTTP handlers (pools.go, budgets.go, ceilings.go,
// classes.go) and server.go (routes, error model, authentication). docs/api.md documents
// the API.
package daemon
