// Package snapshot backs up one stack's backend and restores it, into the
// same kind of backend or the other: a backup of the embedded (local)
// backend restored into the aws backend is how a stack that outgrew one
// machine moves, and the way back is the same.
//
// A Snapshot holds what a stack cannot rebuild from its configuration
// files: the state document (what rpd apply applied, with the runtime
// document every daemon follows), every grant record under its ID with its
// holder (pool leases, budget permits, VM-ceiling claims), and the runner
// inventory (the instance records of the configured runner classes). It
// does not hold what rpd rebuilds: queues (rpd apply creates them, and the
// daemon's pool repair publishes a message for every idle instance that has
// none), the leader lease (the first daemon to start takes it) and the
// state lock.
//
// Take reads while daemons run: it never locks, and it retries until the
// leader epoch and the state version are the same before and after the
// read, so that no takeover or apply happened in between. Each kind of
// grant is read by one query (on the local backend one SQLite read
// transaction, a point in time, plus the grant journal's records not yet
// applied to it; on DynamoDB a scan, consistent per page).
//
// Restore writes into an empty backend: it refuses one that holds a state
// document or grants, or whose stack a daemon leads, or a backup of another
// stack, unless forced. Start reading at Take and Restore (snapshot.go).
package snapshot
