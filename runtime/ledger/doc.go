// Package ledger keeps a VM ceiling (docs/language.md, vm_ceiling): it hands out VMs to workers
// without ever letting provider-active VMs plus VMs it has granted exceed Max,
// even while the provider's usage figure lags behind VMs that are still
// booting.
//
// The race (a provider's figure that does not yet count the VMs just
// granted) is closed by local claims. Every grant creates a Claim
// that counts against the ceiling on top of the provider's figure until the
// worker cancels it (VM never started), it expires after ClaimTTL unconfirmed,
// or the worker confirms it and a usage figure taken after the confirmation
// arrives (from then on the provider's figure covers the VM). By default
// (GrantNextUsage) requests wait for the next figure and are then granted in
// FIFO order, as many as fit; with no fresh figure within StaleAfter the
// ledger grants nothing.
//
// Start reading at Ledger (ledger.go): New, Request/TryRequest, ObserveUsage
// and Status; then Claim (claim.go), the UsageSource implementations
// (source.go, http_source.go) and the poll loop (run.go).
//
// What it is not: it does not start VMs or talk to a cloud API, it does not
// persist claims (a restarted ledger starts empty and stale, so it grants
// nothing until a fresh figure arrives), and it knows nothing of HCL, the
// daemon or its HTTP API; the daemon maps a vm_ceiling block onto Config and
// a usage "http" block onto HTTPSource.
package ledger
