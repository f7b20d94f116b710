// Package client is the Go client of rpd's daemon API (rpd watch, rpd
// serve): one method per route, the JSON shapes of package api, and API
// errors returned as *api.Error with their HTTP status.
//
// It is what rpd run and rpd status use, and what Go workers embed to
// acquire pool slots, budget permits, VM-ceiling claims and runner
// instances. It imports nothing of rpd but package api.
//
// Not for: running the components in-process (use runtime/* directly).
//
// Start reading at New, then Client.Acquire and Client.Heartbeat: every
// remote grant is a lease that must be heartbeated before its TTL runs out.
package client
