// Package reconcile turns a loaded configuration into changes of live
// state and makes them: the engine behind rpd plan and rpd apply.
//
// Every declared object is a resource with an address ("queue.medium",
// "pool.default_pool", "table.state"). Infrastructure resources (queues, and
// on aws the tables) live in the backend; runtime resources (runner
// classes' settings, budgets, VM ceilings, pools, priorities) live in one
// versioned JSON document in the backend's state store, RuntimeDoc, which
// daemons follow.
//
// MakePlan refreshes live state (read-only, bounded parallelism), diffs it
// against the configuration and returns a Plan: inert data listing every
// resource's change (Action: create, update, replace, delete, no-op) with
// before/after values, drift (live objects changed since rpd applied them)
// and live-impact warnings. Apply takes the state lock, refuses a stale
// plan, and executes the changes in dependency order with progress events,
// continuing past failures with independent changes. EncodePlan and
// DecodePlan read and write saved plans.
//
// This package never prints and never opens a backend: rendering lives in
// cmd/rpd's views, and backends implement the interfaces of package backend
// (QueueAdmin, StateStore, Locker, TableAdmin) that Live holds. Only objects tagged with the stack (StackTag) are managed; an
// untagged object of the same name is an error, never adopted.
//
// Start reading at plan.go (Plan, MakePlan), then apply.go (Apply) and
// runtime_doc.go (RuntimeDoc).
package reconcile
