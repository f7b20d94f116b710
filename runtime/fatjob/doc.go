// Package fatjob is the global resource pool for "fat" jobs (docs/language.md, budget): one
// system-wide budget of scan-ring bytes, delta-cache bytes and spill slots,
// handed out as all-or-nothing Permits so that concurrent repository scans
// and archive extractions cannot together exceed the machine's memory.
//
// A job describes its needs as a Request (GitRepo and Archive build the usual
// ones) and asks the Pool for a Permit: TryAcquire never blocks and suits a
// scheduler that re-enqueues with backoff; Acquire waits in a FIFO queue so a
// large job is not starved by a stream of small ones. Either way the job
// holds everything it asked for, or nothing. Permit.Release gives it all
// back exactly once, from any goroutine, so `defer perm.Release()` and a
// lease-expiry goroutine can both call it safely.
//
// Pool.Reconfigure changes the budgets in place while permits are held (a
// shrink revokes nothing; it only holds back new permits), and Pool.Stats
// exposes counters and gauges for metrics.
//
// What it is not: it does not enforce how much memory a job really uses, nor
// that a job without a spill grant does not spill (seed limitation 4); it has
// no priorities, no per-object limits and no persistence of its own:
// permits live in one process, and an owner that records them elsewhere
// re-creates them after a restart with Pool.Restore.
//
// A permit costs at most one small allocation, and usually none when the
// caller releases it before returning (see Permit).
//
// Start reading at Pool (its comment states the fairness policy and how the
// lock-free path stays fair), then TryAcquire, Acquire and Reconfigure in
// pool.go; Permit is in permit.go.
package fatjob
