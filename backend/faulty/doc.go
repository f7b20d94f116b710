// Package faulty wraps a pickup.Queue, pickup.InstanceTable or
// backend.GrantStore to inject the failures a real backend produces: a
// chosen call fails with a transient error (before or after its effect took
// place), is delayed, or — for Receive — delivers its messages a second
// time. Tests of the pickup
// manager and other callers use it to show that their retries lose nothing
// and that duplicates are harmless.
//
// Start reading at Injector and Fault. It is for tests: nothing in
// production should wrap a backend with it.
package faulty
