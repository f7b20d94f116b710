// Package clocktest provides Fake, a manual clock for the tests of the
// packages that take an injectable clock (runtime/pools, runtime/ledger,
// daemon). Each declares its own Clock interface; a three-line adapter in
// its tests returns Fake's *Timer as that package's Timer.
//
// Not for: production code (it is imported by tests only, so the runtime
// packages still stand alone).
package clocktest
