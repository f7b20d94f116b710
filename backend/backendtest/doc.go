// Package backendtest is the one conformance suite that every rpd backend
// passes: Run(t, factory) checks queue delay, visibility, stale handles,
// batches, retention, concurrent receivers, racing transitions, the
// condition-failed/transient split, state compare-and-set, lock contention
// and expiry, pool lease persistence and queue administration.
//
// TestConformance (conformance_test.go) runs it as subtests "local" and
// "aws" (on the emulators of internal/awstest). A backend whose service
// differs from the contract in a documented way says so in Deviations, and
// only the assertion concerned changes.
//
// Start reading at Run. It is a test helper: import it from tests only.
package backendtest
