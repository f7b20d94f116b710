package fleet

import (
	"maps"
	"slices"
	"time"
)

// ClassStatus is what an operator sees of one class's fleet.
type ClassStatus struct {
	Class                               string
	Desired                             int
	Schedule                            string // the active schedule that set Desired; "" for the base
	Idle, Booting, Claimed, Terminating int
	// CeilingRefused VMs the last pass wanted but the ceiling did not grant.
	CeilingRefused int
	// SpotSnoozedUntil is when spot launches resume (zero: not snoozed).
	SpotSnoozedUntil time.Time
	// LaunchBackoffUntil: a failed launch holds launches back until then.
	LaunchBackoffUntil time.Time
	LastRun            time.Time
	LastError          string // the last pass's, "" when it went well
	LastLaunchError    string
	// LastHour counts launches ("launch"), terminations by reason and
	// vanished runners ("vanished") over the last hour.
	LastHour map[string]int
	// Cumulative counters since the reconciler started.
	Launched     map[string]uint64 // by lifecycle
	Terminated   map[Reason]uint64 // by reason
	LaunchErrors map[string]uint64 // by error code
	IdleSeconds  float64           // idle runner-seconds
}

// Status reports every class, sorted by name, and the error of the last
// pass that could not list the cloud ("" when it could).
func (r *Reconciler) Status() ([]ClassStatus, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.opts.Now()
	out := make([]ClassStatus, 0, len(r.classes))
	for _, name := range slices.Sorted(maps.Keys(r.classes)) {
		cs := r.classes[name]
		p := cs.lastPlan
		st := ClassStatus{
			Class: name, Desired: p.Desired, Schedule: p.Schedule, Idle: p.Idle, Booting: p.Booting, Claimed: p.Claimed,
			Terminating: p.Terminating, CeilingRefused: cs.refused, LastRun: cs.lastRun, LastError: cs.lastErr,
			LastLaunchError: cs.lastLaunchErr, LastHour: map[string]int{},
			Launched: maps.Clone(cs.launched), Terminated: maps.Clone(cs.terminated), LaunchErrors: maps.Clone(cs.launchErrs),
			IdleSeconds: cs.idleSecs,
		}
		if cs.lastRun.IsZero() {
			st.Desired, st.Schedule = cs.Config.Desired(now)
		}
		if now.Before(cs.snoozeUntil) {
			st.SpotSnoozedUntil = cs.snoozeUntil
		}
		if now.Before(cs.errUntil) {
			st.LaunchBackoffUntil = cs.errUntil
		}
		for _, e := range cs.events {
			if now.Sub(e.at) <= eventWindow {
				st.LastHour[e.kind] += e.n
			}
		}
		out = append(out, st)
	}
	return out, r.lastErr
}
