// Package fleet keeps a runner class's warm runners (docs/fleet.md): how
// many idle runners it wants (a base min_idle, raised by cron schedules in
// their time zones), which VMs to launch, and which to terminate (idle
// runners above the desired count or past their age or threshold, VMs that
// never offered themselves, instances nobody in rpd knows, runners
// released for good), and whose records to retire (their VM vanished).
//
// Decide (plan.go) is the engine: a pure function from a class's inventory,
// its launch intents and the cloud's list, at an instant, to a Plan. The
// Reconciler (reconciler.go) runs it for every class and carries the plan
// out through four small interfaces it declares, in the order that keeps
// the invariants:
//
//   - every VM is claimed on the class's vm_ceiling (Ceiling) before it is
//     launched, so the VMs never exceed the ceiling, and a launch intent is
//     recorded (Intents, fenced by the leader's epoch) before the cloud is
//     asked, so a leader that dies mid-launch leaves it to its successor,
//     which finds the VMs by their launch tag instead of launching again;
//   - an idle runner leaves the pool (Pool.Withdraw: idle → terminating,
//     its message deleted) before its VM is terminated, so no pickup can
//     claim a runner that is being terminated, and a claimed runner is
//     never terminated;
//   - spot capacity errors fall back to on-demand (when allowed) and snooze
//     spot, 5 minutes doubling to an hour; any other launch error holds the
//     class's launches back, 10 seconds doubling to 5 minutes.
//
// It is a plain library: no EC2 import (the daemon's Cloud is backend/ec2),
// no HCL, no daemon; time comes from Options.Now. The property tests run
// the real pickup manager and ledger around a simulated cloud; the day
// simulation (BenchmarkFleetDay) compares warm-pool policies.
//
// Start reading at Decide, then Reconciler.Pass.
package fleet
