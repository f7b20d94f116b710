// Package open opens the backend a configuration names, for every caller
// alike: rpd's commands (plan, apply, force-unlock) and its daemon (watch,
// serve). It applies the backend defaults (backend.Config.WithDefaults) and
// hands back one Backend holding each interface those callers use: the
// control plane reconcile drives, and the data plane (queues, instance
// table, pool leases, grants, leader record) the daemon serves from.
//
// It is the only package that imports both backend/local and backend/aws;
// nothing below cmd/rpd and daemon imports it. It is not for tests of one
// backend, which open backend/local or backend/aws directly.
//
// Start reading at Open.
package open
