package api

import "time"

// KindClaim is the kind of a VM-ceiling claim in GET /v1/leases (pool
// leases are KindPool, budget permits KindPermit).
const KindClaim = "claim"

// Grant is one grant the daemon counts: a pool lease, a budget permit or a
// VM-ceiling claim. Every field is always present; a field that does not
// apply to the kind is its zero value (times: null).
type Grant struct {
	Kind string `json:"kind"` // KindPool, KindPermit or KindClaim
	// ID is the lease ID (pools, permits) or the claim ID (claims): what
	// the heartbeat, release, confirm and cancel routes take.
	ID string `json:"id"`
	// Component is the pool, budget or vm_ceiling the grant counts against.
	Component string `json:"component"`
	// Principal is who took the grant (a token's name, or a client
	// certificate's subject); "" when the daemon configures no credential.
	// Only it, or an admin, may heartbeat or end the grant.
	Principal string `json:"principal"`
	TaskID    string `json:"task_id"`   // pool leases
	WorkerID  string `json:"worker_id"` // claims
	Priority  int    `json:"priority"`  // pool leases; 0 otherwise
	Slots     int    `json:"slots"`     // pool leases
	VMs       int    `json:"vms"`       // claims
	// Budget permits.
	ScanRingBytes   uint64 `json:"scan_ring_bytes"`
	DeltaCacheBytes uint64 `json:"delta_cache_bytes"`
	Spill           bool   `json:"spill"`
	// Confirmed is true for a claim whose VMs were confirmed.
	Confirmed bool       `json:"confirmed"`
	GrantedAt *time.Time `json:"granted_at"`
	// HeartbeatAt is the last heartbeat, or GrantedAt before the first;
	// null for claims (they are confirmed, not heartbeated).
	HeartbeatAt *time.Time `json:"heartbeat_at"`
	// ExpiresAt is when the grant lapses unless heartbeated (or, for an
	// unconfirmed claim, confirmed); null when it does not lapse.
	ExpiresAt *time.Time `json:"expires_at"`
}

// GrantList is the body of GET /v1/leases.
type GrantList struct {
	Leases []Grant `json:"leases"`
	// Total counts the grants the filter selects, all pages together;
	// NextOffset, when more follow, is the ?offset= of the next page.
	Total      int `json:"total"`
	NextOffset int `json:"next_offset,omitempty"`
}

// QueuedPriority is the requests waiting at one priority: pools serve the
// highest first; budgets and ceilings serve FIFO and report everything at
// priority 0.
type QueuedPriority struct {
	Priority int `json:"priority"`
	Requests int `json:"requests"`
	// Slots the requests ask for together (pools; 0 otherwise).
	Slots int `json:"slots"`
	// OldestWaitSeconds is how long the longest-waiting request has waited
	// (pools; 0 otherwise).
	OldestWaitSeconds float64 `json:"oldest_wait_seconds"`
	// TaskIDs names the first of the waiting requests (pools; at most 10),
	// in the order they are served.
	TaskIDs []string `json:"task_ids,omitempty"`
}

// PoolDetail is the body of GET /v1/pools/{name}: the status and every
// holder, oldest grant first.
type PoolDetail struct {
	PoolStatus
	Holders []Grant `json:"holders"`
}

// BudgetDetail is the body of GET /v1/budgets/{name}.
type BudgetDetail struct {
	BudgetStatus
	Holders []Grant `json:"holders"`
}

// CeilingDetail is the body of GET /v1/ceilings/{name}.
type CeilingDetail struct {
	CeilingStatus
	Holders []Grant `json:"holders"`
}

// QueueDepth is a runner class queue's approximate message counts: idle
// runners ready to be picked up, picked up but not yet settled, and
// re-queued with a delay.
type QueueDepth struct {
	Visible  int `json:"visible"`
	InFlight int `json:"in_flight"`
	Delayed  int `json:"delayed"`
}

// InstanceCounts are a runner class's instances in the instance table by
// state.
type InstanceCounts struct {
	Idle        int `json:"idle"`
	Claimed     int `json:"claimed"`
	Retired     int `json:"retired"`
	Terminating int `json:"terminating,omitempty"`
}

// RecentPickups are a class's pickup events over the last WindowSeconds
// (shorter just after the daemon started or the class appeared).
type RecentPickups struct {
	WindowSeconds float64          `json:"window_seconds"`
	Events        map[string]int64 `json:"events"`
}

// ClassDetail is one runner class in GET /v1/classes and the body of GET
// /v1/classes/{class}. Outcomes counts pickup events since the daemon
// started, Recent those of the last minutes; both carry every event name
// (see docs/api.md), zeros included.
type ClassDetail struct {
	Name      string           `json:"name"`
	Queue     string           `json:"queue"`
	Mode      string           `json:"mode"`
	Depth     QueueDepth       `json:"depth"`
	Instances InstanceCounts   `json:"instances"`
	Outcomes  map[string]int64 `json:"outcomes"`
	Recent    RecentPickups    `json:"recent"`
	// Errors lists what could not be read from the backend (the queue's
	// depth, the instance table); the figures it concerns are 0.
	Errors []string `json:"errors"`
	// Fleet is set for a class with a fleet block.
	Fleet *FleetStatus `json:"fleet,omitempty"`
}

// ClassList is the body of GET /v1/classes.
type ClassList struct {
	Classes []ClassDetail `json:"classes"`
}

// InstanceList is the body of GET /v1/classes/{class}/instances.
type InstanceList struct {
	Instances []Instance `json:"instances"`
	// Total and NextOffset page the list as GrantList's do.
	Total      int `json:"total"`
	NextOffset int `json:"next_offset,omitempty"`
}
