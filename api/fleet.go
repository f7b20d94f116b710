package api

import "time"

// FleetStatus is a runner class's fleet as the leader reconciles it
// (docs/fleet.md): in GET /v1/classes/{class}, GET /v1/classes and
// /v1/status. Standbys report Leading false and the figures of their last
// pass as leader, if any.
type FleetStatus struct {
	// Leading: this daemon leads the stack and runs the reconciler.
	Leading bool `json:"leading"`
	// Desired idle runners now, and the schedule that set it ("" for the
	// base min_idle).
	Desired  int    `json:"desired_idle"`
	Schedule string `json:"schedule,omitempty"`
	// Runners by state: idle (in the pool), booting (launched, not yet
	// offered), claimed, terminating.
	Idle        int `json:"idle"`
	Booting     int `json:"booting"`
	Claimed     int `json:"claimed"`
	Terminating int `json:"terminating"`
	// CeilingRefused VMs the last pass wanted but the vm_ceiling refused.
	CeilingRefused int    `json:"ceiling_refused"`
	VMCeiling      string `json:"vm_ceiling"`
	UsageClass     string `json:"usage_class"`
	// SpotSnoozedUntil: after spot capacity errors, spot launches wait
	// until then (falling back to on-demand when allowed).
	SpotSnoozedUntil *time.Time `json:"spot_snoozed_until,omitempty"`
	// LaunchBackoffUntil: a failed launch call holds launches until then.
	LaunchBackoffUntil *time.Time `json:"launch_backoff_until,omitempty"`
	LastRun            *time.Time `json:"last_run,omitempty"`
	LastError          string     `json:"last_error,omitempty"`
	LastLaunchError    string     `json:"last_launch_error,omitempty"`
	// LastHour counts launches ("launch"), terminations by reason and
	// vanished runners over the last hour.
	LastHour map[string]int `json:"last_hour"`
	// Cumulative counters of this daemon's reconciler.
	Launched     map[string]uint64 `json:"launched"`      // by lifecycle: spot, on-demand
	Terminated   map[string]uint64 `json:"terminated"`    // by reason
	LaunchErrors map[string]uint64 `json:"launch_errors"` // by EC2 error code
	// IdleRunnerSeconds integrates the idle runners over time.
	IdleRunnerSeconds float64 `json:"idle_runner_seconds"`
	// PickupHitRatio is claimed / (claimed + exhausted) over the class's
	// pickups on this daemon; null before the first pickup.
	PickupHitRatio *float64 `json:"pickup_hit_ratio,omitempty"`
}
