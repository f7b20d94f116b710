// Package daemon is rpd's long-running process (rpd watch, rpd serve): it
// runs the runtime components (pools, budgets, VM ceilings, runner-class
// pickup), serves them over a JSON HTTP API, and keeps them in step with
// the configuration without dropping work.
//
// The daemon is parts with one-way imports (TestImportRules holds them):
//
//   - this package is the edge and the wiring: routes and middleware
//     (server.go, handlers.go), forwarding to the leader (forward.go), the
//     status, the election's takeover, reloads and their one owner
//     goroutine (reload.go);
//   - daemon/arbiter holds the grants: pools, budgets and VM ceilings, the
//     records of every grant, and the one grant pipeline every pool lease,
//     budget permit and VM-ceiling claim passes through (request_id latch,
//     wait-or-try, fenced record, give-back);
//   - daemon/inventory serves the runner classes (pickup, offers, the
//     instance table) and runs the fleet, whose VMs are claims on the
//     arbiter's ceilings;
//   - under daemon/internal: component (what every kind of set shares: a
//     reload's input, the Set interface, the keyed set), httpapi (the error
//     model, body guards, answers), security (principals, scopes, TLS,
//     audit), leader (the election and the fenced stores), records
//     (background record deletes), holders (who holds what) and h1 (the
//     API's server over plain HTTP; net/http serves TLS).
//
// The daemon's only input is the runtime document (reconcile.RuntimeDoc):
// watch mode builds it from the loaded configuration (component.WatchInput),
// keeping each entry's source range for error messages; serve mode reads it
// from the backend's state store.
//
// Reloads follow Caddy: prepare every set (each runtime package's own
// checks, new components built but not started), push the configuration
// to the backend (reconcile's plan and apply, in watch mode), and only then
// commit each set, reconfiguring its components in place, so no held slot,
// permit or claim is dropped and waiters keep waiting under the new
// limits. A configuration that fails anywhere changes nothing; the error,
// with file:line, is in /v1/status and the reload metrics. One goroutine
// (reload.go's reloader) runs every reload and a new leader's apply.
//
// Durability: every grant is recorded, fenced with the leader's epoch,
// before it is answered, so a restarted daemon or a new leader (even after
// kill -9) still counts it, under the same ID; a grant whose record cannot
// be written is given back.
//
// Not for: loading HCL (spec), planning (reconcile), the components'
// semantics (runtime/*), or talking to a daemon (package client).
//
// Start reading at New and Daemon.Run (daemon.go), then handlers.go (the
// edge of every grant route), arbiter/grant.go (the pipeline) and one kind
// (arbiter/pools.go), then reload.go. docs/api.md documents the API.
package daemon
