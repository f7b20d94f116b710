// Package backend holds what rpd's two storage backends share: the sentinel
// errors that are not part of a consumer's contract, and the validation of
// queue names and attributes, so that backend/local and backend/aws reject
// exactly the same input.
//
// The interfaces the backends implement are declared by their consumers:
// runtime/pickup (Queue, InstanceTable), reconcile (QueueAdmin, StateStore,
// Locker) and runtime/pools (Store). Start reading at backend/local, the
// embedded default; backend/aws is the same semantics on SQS + DynamoDB;
// backend/backendtest is the one conformance suite both pass, and
// backend/faulty wraps a queue or instance table to inject failures in tests.
//
// This package is not for callers choosing a backend: they open
// backend/local or backend/aws directly.
package backend
