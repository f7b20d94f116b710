// Package arbiter holds a daemon's grants: the component sets (pools,
// budgets, VM ceilings, runner classes, the fleet) kept in step with the
// runtime document, the records of every grant in the backend, and the one
// grant pipeline (grant.go) that every pool lease, budget permit and
// VM-ceiling claim passes through: the request_id latch, wait-or-try, the
// record written under the leader's epoch, and the give-back when it
// cannot be written. A grant kind is what differs: how to find, take,
// record and give back one of its grants (a grantKind).
//
// It speaks the API's types (package api) and errors (httpapi.Error) but
// no HTTP: the daemon's edge decodes requests, calls it, and answers.
package arbiter
