// Package local is rpd's default backend: one SQLite file (modernc.org/sqlite,
// pure Go, WAL mode), no server. It implements the queues with SQS semantics
// (pickup.Queue and backend.QueueAdmin), the instance table with atomic
// conditional transitions (pickup.InstanceTable), the stack's versioned state
// document and lock (backend.StateStore, backend.Locker), the persistence
// of pool leases (pools.Store) and of the daemon's other grants
// (backend.GrantStore), and the leader lease that fences them.
//
// A leader's grant records (written through the fenced stores) are made
// durable by the grant journal, append-only files per leader epoch beside
// the database (<path>.journal/): one append and one fdatasync per
// group-commit batch, then a read of the segment's seal flag. SQLite is fed
// from the journal behind the answer at synchronous=NORMAL, and reads merge
// the records not applied yet. A takeover seals the old epoch's segment; a
// record is counted exactly when its write was answered as a success
// (journalwriter.go; docs/backends.md has the argument). A torn or corrupt
// tail is never read past (journal.go).
//
// Several processes may use the same file at once (the CLI and a daemon):
// every write is one short BEGIN IMMEDIATE transaction or a single
// conditional statement, so SQLite's file lock serialises them, and a busy
// file is waited for (busy_timeout) rather than failed.
//
// The statements on hot paths are prepared once at Open and reused
// (stmts.go); the rest are parsed per call.
//
// Start reading at Open (local.go), then queue.go for the message semantics,
// instances.go for Transition, and commit.go then journalwriter.go for the
// grant records. It is not a general-purpose SQS or DynamoDB emulator: only
// what rpd's interfaces need is there.
package local
