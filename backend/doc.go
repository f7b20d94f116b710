// Package backend is the contract between rpd's two storage backends and
// the code that drives them: the control-plane interfaces (QueueAdmin,
// StateStore, Locker, TableAdmin) with their values and sentinel errors, and
// the validation of queue names and attributes, so that backend/local and
// backend/aws reject exactly the same input.
//
// It is a leaf: it imports nothing of rpd, so that reconcile (which drives
// these interfaces) and the backends (which implement them) both import it
// and a backend links neither the configuration language nor the planner.
// The data-plane interfaces stay with their consumers: runtime/pickup (Queue,
// InstanceTable) and runtime/pools (Store).
//
// Start reading at queue_admin.go and state.go; then backend/local, the
// embedded default; backend/aws is the same semantics on SQS + DynamoDB;
// backend/backendtest is the one conformance suite both pass, and
// backend/faulty wraps a queue or instance table to inject failures in tests.
//
// This package is not for callers choosing a backend: they open
// backend/local or backend/aws directly.
package backend
