// Package pools provides named pools of slots, Airflow-style: a pool has N
// slots, Acquire waits for a grant, and waiting requests are served highest
// priority first, FIFO among equal priorities (docs/language.md, pool).
//
// Beyond that: a request may take several slots; waiting honours
// context cancellation, a per-request timeout and a per-pool queue cap;
// leases may carry a TTL renewed by Heartbeat, so a holder that dies (a
// remote worker behind the daemon's HTTP API) gives its slots back; pools
// resize in place while busy; and grants are written through a Store so that
// Restore re-counts slots still held after a restart.
//
// Fairness is strict head of line: only the head of the queue is granted,
// and while it does not fit nobody behind it is, even a request that would.
// No backfilling means no priority inversion of large requests.
//
// Not for: cross-process coordination by itself (one Manager is the
// authority; remote holders go through the daemon), or preemption of running
// holders (shrinking a pool waits for them).
//
// Start reading at Manager (manager.go) and Manager.Acquire (acquire.go);
// the queue and its invariants are in pool.go, leases in lease.go, crash
// recovery in restore.go. The package imports nothing of rpd.
package pools
