// Package groupcommit lets the writes of concurrent callers share one
// backend round trip: one SQLite transaction, one DynamoDB batch. It is
// the queue and its writer goroutine; what a batch does is the backend's.
//
// A Queue's writer takes whatever is queued whenever it is free (after
// yielding once, so that callers about to queue get in): there is no timer,
// so a lone write waits only for its own round trip, and writes arriving
// during one form the next batch. Each caller of Do waits for its own
// write's outcome, which the backend's commit function sets. Writes nobody
// waits for (Go) may wait instead for one that somebody does (DeferGo), so
// that they cost no round trip of their own.
//
// Not for: ordering across callers (a batch holds writes in arrival order,
// and commit decides what that means), or retries (commit's job).
package groupcommit
