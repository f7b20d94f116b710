// Package security is who may do what on a daemon's API: the principal of
// a request (a named token compared by its SHA-256 in constant time,
// RPD_TOKEN, a verified client certificate, or everyone on a loopback
// daemon without credentials), the scopes each route needs (RouteScopes,
// one table), holder-only ends of grants (HolderOnly), the TLS files served
// and re-read when they rotate, and the audit log.
//
// docs/security.md is the user's side of it.
package security
