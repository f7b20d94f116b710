// Package client is the Go client of rpd's daemon API (rpd watch, rpd
// serve): one method per route, the JSON shapes of package api, and API
// errors returned as *api.Error with their HTTP status.
//
// It is what rpd run and rpd status use, and what Go workers embed to
// acquire pool slots, budget permits, VM-ceiling claims and runner
// instances. It imports nothing of rpd but package api.
//
// Requests to a plain-http address reached without a proxy go over the
// client's own HTTP/1.1 connections (kept alive and pooled, each request
// written and its answer read on the calling goroutine), which halves the
// client's CPU per call against net/http's Transport (66 to 38 µs per
// acquire+release pair in BenchmarkAcquireReleaseHTTP); https addresses,
// proxied ones and WithHTTPClient use net/http. A daemon serving TLS is
// reached at its https:// address, verified with WithCAFile (a private CA)
// or WithTLSConfig (a client certificate too, for mutual TLS); its bearer
// token is WithToken (docs/security.md).
//
// Not for: running the components in-process (use runtime/* directly).
//
// Start reading at New, then Client.Acquire and Client.Heartbeat: every
// remote grant is a lease that must be heartbeated before its TTL runs out.
package client
