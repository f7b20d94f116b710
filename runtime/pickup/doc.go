// Package pickup is the Pickup Manager and Claim Worker of the warm-runner
// pool (docs/language.md, runner_class): one queue per runner class, one JSON
// message per idle instance, and a Manager that receives messages, classifies each
// against a request's Requirements, claims a match in the instance table and
// gives misfits back, reporting exhaustion when the pool has nothing for the
// request.
//
// It is a plain library: it talks to a backend only through the Queue and
// InstanceTable interfaces of backend.go (implemented by backend/local and
// backend/aws) and imports nothing else of rpd. It is not the HTTP API, not
// the reconciler that creates queues, and not a health checker of claimed
// instances.
//
// Start reading at Manager.Pickup (manager.go), then hold.go (misfits held
// for the next requests), claim.go (the Claim Worker and Confirm),
// message.go (the strict message format), lifecycle.go (Offer and Release,
// which fill the pool) and maintain.go (lapsing unconfirmed claims and
// repairing the pool). docs/pickup.md explains the design beyond the seed.
//
// # Classification
//
// Each message is, for the waiting requests: pass-on (valid, meets a
// request's usage class, instance-type patterns, minimum cpu/mem and
// resource class), re-queue (valid, fits none of them: held in flight for
// the next requests, hold.go; with holding off, made visible again after
// Config.RequeueDelay), or discard (unparseable, too large, unknown usage
// class, unexpected fields, specs contradicting the class's Config,
// threshold past; logged with its reason, counted, deleted, never
// re-queued). A request ends with *ExhaustedError when a receive comes back
// empty (global; an empty short poll is confirmed by a second receive) or
// when it has seen one instanceId more than Config.LocalExhaustion times
// (local; the message that trips it is still re-queued).
//
// # Modes, and why lease mode loses nothing
//
// ModeDelete is the plain loop: receive, delete at once, filter in
// memory, send misfits back with a delay. Between the delete and the claim
// or re-send the idle runner exists only in the manager's memory; a crash
// there loses it (TestCrashLosesNothing counts how many).
//
// ModeLease (the default) never deletes a message before its fate is
// settled: a received message stays in flight under a visibility timeout;
// a misfit gets ChangeMessageVisibility(RequeueDelay); a match is deleted
// only after the conditional idle → claimed transition has committed; a
// discard is deleted. So at every instant an idle runner is either
// represented by a message that is visible or will become visible again
// (its visibility timeout runs out whatever happens to this process), or it
// has been claimed in the instance table, atomically, by exactly one owner.
// A crash can therefore only cause duplicates and delays: a message whose
// instance was already claimed reappears, its claim fails the condition
// (state idle, no owner, threshold not past), and it is dropped as a stale
// hint. A transient error during a claim is retried with backoff while the
// message is held; when the retries run out, a claim that may have
// committed is undone and the message given back.
//
// The one case a crash can leave an instance claimed without its requester
// knowing is the crash of the requester itself after the claim committed:
// the table then names the owner, and Release(id, owner) returns it. A
// claim given up after transient errors is undone before Pickup returns;
// if even the undo fails, Pickup says so with an *UncertainClaimError.
//
// # Sharing a queue between requests
//
// Concurrent Pickup calls share the receives: the goroutine of one waiting
// request (the leader) receives a batch sized to the number of waiting
// requests (at most 10), offers each message to the waiting requests in
// arrival order, and gives misfits back in one batch call while it
// receives the next batch; each request claims its match in its own
// goroutine. A request's frequency map lives in the request and is bounded
// by Config.MaxTracked.
//
// # Retries, confirmation, repair
//
// The owner of a Pickup is its retry key: a Pickup whose owner already
// holds a claim of the class that meets it returns that claim
// (InstanceTable.ClaimedBy), so a request cut after its claim committed is
// retried safely. With Config.ClaimTTL a claim carries a deadline; Confirm
// removes it, and Maintain returns the claims whose deadline passed to
// idle. Offer and Release write the table first and publish second (so a
// message never names a record that does not exist); a crash in between
// leaves an idle record without a message, which Maintain's repair (or
// Offer again, idempotent up to harmless duplicates) publishes.
package pickup
