// Package api holds the JSON wire types of rpd's daemon HTTP API: the request
// and response bodies of every route, the error envelope and its codes.
//
// Both the daemon (which decodes requests and encodes responses) and the Go
// client import it, so the two can never disagree about a field name. It
// holds data only: no behaviour beyond small helpers on the types, no HTTP.
//
// Start with Error and the Code constants (the error model every route
// shares), then the per-component types: AcquireRequest/Lease (pools),
// PermitRequest/Permit (budgets), ClaimRequest/Claim (VM ceilings),
// PickupRequest/Instance (runner classes) and Status. docs/api.md documents
// each route with these shapes.
package api
