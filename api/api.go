package api

import (
	"fmt"
	"time"
)

// MaxBodyBytes is the largest request body the daemon reads; a larger one is
// refused with 413 and CodeBodyTooLarge.
const MaxBodyBytes = 1 << 20

// MaxIDBytes is the longest string the daemon accepts anywhere in a request
// body: identifiers (task_id, worker_id, instance_id, owner, …) and names
// (priority_name, instance_type, …) alike. A longer one is refused with 400
// and CodeBadRequest, before anything is queued or stored.
const MaxIDBytes = 256

// MaxWaitSeconds caps every wait_seconds: a long-poll never holds a request
// longer, so the server's write timeout can stay bounded.
const MaxWaitSeconds = 300

// DefaultTTLSeconds is the lease TTL of a remote grant whose request gives
// no ttl_seconds (and whose pool declares no lease_ttl).
const DefaultTTLSeconds = 60

// Error codes carried in ErrorBody.Error.Code, each with the HTTP status the
// daemon sends it with.
const (
	CodeBadRequest       = "bad_request"        // 400: malformed JSON, unknown field, value out of range
	CodeUnauthorized     = "unauthorized"       // 401: missing or wrong bearer token
	CodeForbidden        = "forbidden"          // 403: the principal lacks the scope, or the grant is another principal's
	CodeNotFound         = "not_found"          // 404: unknown pool, budget, ceiling, class, lease, route
	CodeExhausted        = "exhausted"          // 404: pickup found no instance (Kind says global or local)
	CodeMethodNotAllowed = "method_not_allowed" // 405
	CodeTimeout          = "timeout"            // 408: wait_seconds elapsed before a grant, or the body arrived too slowly
	CodeUnavailable      = "unavailable"        // 409: not available now (wait_seconds 0, or can never fit, or stale usage)
	CodeBodyTooLarge     = "body_too_large"     // 413: body over MaxBodyBytes
	CodeHeadersTooLarge  = "headers_too_large"  // 431: request line and headers over 64 KiB
	CodeQueueFull        = "queue_full"         // 429: the pool's, budget's or ceiling's max_queued waiters are already waiting
	CodeRateLimited      = "rate_limited"       // 429: the token's rate_limit is spent; retry after Retry-After
	CodeInternal         = "internal"           // 500: backend failure; retry later
	CodeNotReady         = "not_ready"          // 503: no configuration loaded or backend unreachable
	// CodeNotLeader (503): this replica does not lead the stack and cannot
	// reach the one that does (Error.Leader names it, when known), or it
	// just lost the leadership; retry, at another address if you have one.
	CodeNotLeader = "not_leader"
)

// LeaderHeader is the header in which a standby names the leader it
// forwarded a request to (its advertise URL): a client may send its next
// pools, leases, budgets and ceilings requests there directly, and come
// back to its own addresses when the leader stops answering.
const LeaderHeader = "X-Rpd-Leader"

// Exhaustion kinds of a CodeExhausted error.
const (
	ExhaustedGlobal = "global" // the class queue is empty
	ExhaustedLocal  = "local"  // the same instance was seen too often for this request
)

// ErrorBody is the body of every non-2xx response: {"error":{...}}.
type ErrorBody struct {
	Error Error `json:"error"`
}

// Error is one API error. It implements error so the client can return it
// as is; Status is filled in by the client from the HTTP status line and is
// not part of the JSON.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Kind    string `json:"kind,omitempty"` // CodeExhausted only
	// Leader is the leader's advertise URL (CodeNotLeader only, when known).
	Leader string `json:"leader,omitempty"`
	Status int    `json:"-"`
}

func (e *Error) Error() string {
	if e.Kind != "" {
		return fmt.Sprintf("rpd: %s (%s, HTTP %d): %s", e.Code, e.Kind, e.Status, e.Message)
	}
	return fmt.Sprintf("rpd: %s (HTTP %d): %s", e.Code, e.Status, e.Message)
}

// Lease kinds.
const (
	KindPool   = "pool"   // slots of a named pool
	KindPermit = "permit" // a budget permit
)

// AcquireRequest is the body of POST /v1/pools/{name}/acquire.
type AcquireRequest struct {
	// TaskID names the holder; the daemon generates one when empty.
	TaskID string `json:"task_id,omitempty"`
	// Priority is the request's weight (higher is served first); at most
	// one of Priority and PriorityName may be set. Default 0.
	Priority *int `json:"priority,omitempty"`
	// PriorityName names a declared priority block.
	PriorityName string `json:"priority_name,omitempty"`
	// Slots to take, default 1.
	Slots int `json:"slots,omitempty"`
	// WaitSeconds bounds the long-poll: 0 answers at once (409 when no
	// slot is free), up to MaxWaitSeconds.
	WaitSeconds float64 `json:"wait_seconds,omitempty"`
	// TTLSeconds is the lease's TTL; default the pool's lease_ttl, else
	// DefaultTTLSeconds.
	TTLSeconds float64 `json:"ttl_seconds,omitempty"`
	// RequestID makes the request safe to retry: a request repeating the
	// RequestID of a grant still held returns that grant instead of a
	// second one (across a leader failover too). At most MaxRequestIDLen
	// bytes; the Go client sets a random one per call.
	RequestID string `json:"request_id,omitempty"`
}

// MaxRequestIDLen bounds a request_id.
const MaxRequestIDLen = 128

// Lease is a granted remote lease: pool slots or a budget permit. Extend it
// with POST /v1/leases/{id}/heartbeat before ExpiresAt or lose it.
type Lease struct {
	LeaseID    string    `json:"lease_id"`
	Kind       string    `json:"kind"`
	Pool       string    `json:"pool,omitempty"`
	Budget     string    `json:"budget,omitempty"`
	TaskID     string    `json:"task_id,omitempty"`
	Priority   int       `json:"priority"`
	Slots      int       `json:"slots,omitempty"`
	TTLSeconds float64   `json:"ttl_seconds"`
	GrantedAt  time.Time `json:"granted_at,omitzero"`
	ExpiresAt  time.Time `json:"expires_at"`
	// Budget permits only.
	ScanRingBytes   uint64 `json:"scan_ring_bytes,omitempty"`
	DeltaCacheBytes uint64 `json:"delta_cache_bytes,omitempty"`
	Spill           bool   `json:"spill,omitempty"`
	// RequestID is the request_id the grant was made for, if any.
	RequestID string `json:"request_id,omitempty"`
}

// PoolStatus is one pool in GET /v1/pools and GET /v1/pools/{name}.
type PoolStatus struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Total       int    `json:"total"`
	Used        int    `json:"used"`
	Available   int    `json:"available"`
	Queued      int    `json:"queued"`
	// QueuedByPriority groups the waiting requests, highest priority
	// (served first) first; [] when nobody waits.
	QueuedByPriority []QueuedPriority `json:"queued_by_priority"`
	// Leases counts the holders; HoldersURL lists them (GET /v1/leases).
	Leases     int    `json:"leases"`
	HoldersURL string `json:"holders_url"`
	// Retained is true for a pool removed from the configuration but kept
	// because slots are still held; it is removed once idle.
	Retained bool `json:"retained"`
}

// PoolList is the body of GET /v1/pools.
type PoolList struct {
	Pools []PoolStatus `json:"pools"`
}

// PermitRequest is the body of POST /v1/budgets/{name}/permits.
type PermitRequest struct {
	ScanRingBytes   uint64  `json:"scan_ring_bytes"`
	DeltaCacheBytes uint64  `json:"delta_cache_bytes"`
	Spill           bool    `json:"spill,omitempty"`
	WaitSeconds     float64 `json:"wait_seconds,omitempty"`
	TTLSeconds      float64 `json:"ttl_seconds,omitempty"`
	// RequestID: as AcquireRequest.RequestID.
	RequestID string `json:"request_id,omitempty"`
}

// Resource is one budgeted resource's figures.
type Resource struct {
	Total     uint64 `json:"total"`
	Available uint64 `json:"available"`
}

// SpillSlots are a budget's spill slots; Unlimited budgets report no figures.
type SpillSlots struct {
	Unlimited bool `json:"unlimited"`
	Total     int  `json:"total"`
	Available int  `json:"available"`
}

// BudgetStatus is the body of GET /v1/budgets/{name}.
type BudgetStatus struct {
	Name       string     `json:"name"`
	ScanRing   Resource   `json:"scan_ring_bytes"`
	DeltaCache Resource   `json:"delta_cache_bytes"`
	SpillSlots SpillSlots `json:"spill_slots"`
	Queued     int        `json:"queued"`
	// QueuedByPriority: permits are served FIFO, so at most one entry,
	// at priority 0.
	QueuedByPriority []QueuedPriority `json:"queued_by_priority"`
	Permits          int              `json:"permits"`
	HoldersURL       string           `json:"holders_url"`
	Retained         bool             `json:"retained"`
}

// BudgetList is the body of GET /v1/budgets.
type BudgetList struct {
	Budgets []BudgetStatus `json:"budgets"`
}

// ClaimRequest is the body of POST /v1/ceilings/{name}/claims.
type ClaimRequest struct {
	WorkerID    string  `json:"worker_id"`
	Count       int     `json:"count,omitempty"` // default 1
	WaitSeconds float64 `json:"wait_seconds,omitempty"`
	// RequestID: as AcquireRequest.RequestID.
	RequestID string `json:"request_id,omitempty"`
}

// Claim is a granted VM-ceiling claim. It counts against the ceiling until
// it is confirmed (and a later usage figure shows the VM), cancelled with
// DELETE, or ExpiresAt (the ceiling's claim_ttl) passes.
type Claim struct {
	ClaimID   string    `json:"claim_id"`
	Ceiling   string    `json:"ceiling"`
	WorkerID  string    `json:"worker_id"`
	Count     int       `json:"count"`
	Confirmed bool      `json:"confirmed"`
	GrantedAt time.Time `json:"granted_at,omitzero"`
	ExpiresAt time.Time `json:"expires_at"`
	// ConfirmedAt is when the claim was confirmed; absent until then.
	ConfirmedAt time.Time `json:"confirmed_at,omitzero"`
	// RequestID is the request_id the claim was granted for, if any.
	RequestID string `json:"request_id,omitempty"`
}

// UsageRequest is the body of PUT /v1/ceilings/{name}/usage: the provider's
// active VM count, pushed by an operator or a script.
type UsageRequest struct {
	Active *int `json:"active"`
}

// CeilingStatus is the body of GET /v1/ceilings/{name}.
type CeilingStatus struct {
	Name           string `json:"name"`
	Max            int    `json:"max"`
	ProviderActive int    `json:"provider_active"`
	LocalClaims    int    `json:"local_claims"`
	Effective      int    `json:"effective"`
	Available      int    `json:"available"`
	Queued         int    `json:"queued"`
	// QueuedByPriority: claims are served FIFO, so at most one entry, at
	// priority 0.
	QueuedByPriority []QueuedPriority `json:"queued_by_priority"`
	// Claims counts the claims that still count; HoldersURL lists them.
	Claims      int        `json:"claims"`
	HoldersURL  string     `json:"holders_url"`
	LastUsageAt *time.Time `json:"last_usage_at"`
	Stale       bool       `json:"stale"`
	LastError   string     `json:"last_error"`
	Retained    bool       `json:"retained"`
}

// CeilingList is the body of GET /v1/ceilings.
type CeilingList struct {
	Ceilings []CeilingStatus `json:"ceilings"`
}

// PickupRequest is the body of POST /v1/classes/{class}/pickup.
type PickupRequest struct {
	// WorkerID becomes the claimed instance's owner; generated when empty.
	WorkerID      string   `json:"worker_id,omitempty"`
	UsageClass    string   `json:"usage_class,omitempty"` // "spot" | "on-demand" | "" (any)
	InstanceTypes []string `json:"instance_types,omitempty"`
	MinCPU        int      `json:"min_cpu,omitempty"`
	MinMem        int      `json:"min_mem,omitempty"` // MiB
	ResourceClass string   `json:"resource_class,omitempty"`
	// WaitSeconds (0..20) is how long to wait for a matching runner to
	// become idle before answering exhausted.
	WaitSeconds int `json:"wait_seconds,omitempty"`
}

// Instance is a runner instance: the answer of a pickup, the body of an
// offer.
type Instance struct {
	InstanceID    string    `json:"instance_id"`
	Class         string    `json:"class"`
	State         string    `json:"state"`
	Owner         string    `json:"owner"`
	UsageClass    string    `json:"usage_class"`
	InstanceType  string    `json:"instance_type"`
	CPU           int       `json:"cpu"`
	Mem           int       `json:"mem"` // MiB
	ResourceClass string    `json:"resource_class"`
	Threshold     time.Time `json:"threshold"`
	// UpdatedAt is the record's last state change (null in an offer).
	UpdatedAt *time.Time `json:"updated_at"`
	// ClaimExpiresAt is the deadline of an unconfirmed claim (runner
	// classes with claim_ttl): confirm it by then or it lapses. Null when none.
	ClaimExpiresAt *time.Time `json:"claim_expires_at"`
}

// ConfirmInstanceRequest is the body of POST /v1/instances/{id}/confirm.
type ConfirmInstanceRequest struct {
	// Owner is the worker_id the instance was picked up with.
	Owner string `json:"owner"`
}

// ReleaseInstanceRequest is the optional body of POST /v1/instances/{id}/release.
type ReleaseInstanceRequest struct {
	// Owner must match the claimant when set.
	Owner string `json:"owner,omitempty"`
	// Retire removes the instance from service instead of re-offering it.
	Retire bool `json:"retire,omitempty"`
}

// ClassStatus is one runner class in status.
type ClassStatus struct {
	Name     string           `json:"name"`
	Queue    string           `json:"queue"`
	Mode     string           `json:"mode"`
	Outcomes map[string]int64 `json:"outcomes,omitempty"`
	// Fleet is set for a class with a fleet block.
	Fleet *FleetStatus `json:"fleet,omitempty"`
}

// ReloadResult is the outcome of one reload attempt.
type ReloadResult struct {
	OK bool      `json:"ok"`
	At time.Time `json:"at"`
	// Error is the reason a rejected configuration was rejected; each
	// diagnostic is prefixed by file:line:column.
	Error string `json:"error,omitempty"`
	// Changed reports whether the reload changed anything.
	Changed bool `json:"changed"`
	// ConfigVersion is the version active after the attempt.
	ConfigVersion int64   `json:"config_version"`
	DurationMS    float64 `json:"duration_ms"`
}

// Status is the body of GET /v1/status.
type Status struct {
	Mode          string `json:"mode"` // "watch" | "serve"
	Stack         string `json:"stack"`
	ConfigVersion int64  `json:"config_version"`
	ConfigHash    string `json:"config_hash"`
	// StateVersion is the state store version of the runtime document
	// last applied (watch mode) or followed (serve mode).
	StateVersion int64        `json:"state_version"`
	LastReload   ReloadResult `json:"last_reload"`
	StartedAt    time.Time    `json:"started_at"`
	// Role is "leader" (this daemon arbitrates the stack's pools, budgets
	// and VM ceilings) or "standby" (it forwards those requests to the
	// leader and serves runner pickup itself). Epoch is the leader epoch
	// this daemon leads under, 0 on a standby.
	Role   string        `json:"role"`
	Epoch  int64         `json:"epoch"`
	Leader *LeaderStatus `json:"leader,omitempty"`
	// ConfigMatchesLeader is false when this daemon's configuration hash
	// differs from the one the leader recorded (a replica with other files).
	ConfigMatchesLeader bool `json:"config_matches_leader"`
	// Version is the rpd build this daemon runs; LeaderVersion (on a
	// standby that reached the leader) the leader's, so that a rolling
	// update with mixed versions shows.
	Version       BuildVersion  `json:"version"`
	LeaderVersion *BuildVersion `json:"leader_version,omitempty"`
	// Source says whose figures the pools, budgets and ceilings are:
	// SourceLeader (the leader's, served by the leader itself or fetched
	// from it by a standby) or SourceUnavailable (a standby that cannot
	// reach the leader: those lists are null, never zeros, and
	// SourceError says why). Classes are always this daemon's own: every
	// replica serves runner pickup.
	Source      string `json:"source"`
	SourceError string `json:"source_error,omitempty"`
	// Components are inline: "pools", "budgets", "ceilings", "classes"
	// and "priorities" are members of the status object itself.
	Components
}

// Sources of Status's figures.
const (
	SourceLeader      = "leader"
	SourceUnavailable = "unavailable"
)

// BuildVersion names an rpd build: the release (or "dev"), the VCS
// revision it was built from and the Go toolchain.
type BuildVersion struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	GoVersion string `json:"go_version"`
}

// String is "v1.2.3 (abc123def456)", or the version alone.
func (v BuildVersion) String() string {
	if v.Revision == "" {
		return v.Version
	}
	r := v.Revision
	if len(r) > 12 {
		r = r[:12]
	}
	return v.Version + " (" + r + ")"
}

// LeaderStatus is the stack's leader as its lease record shows it.
type LeaderStatus struct {
	Holder     string    `json:"holder"`
	Address    string    `json:"address"`
	Mode       string    `json:"mode"`
	Epoch      int64     `json:"epoch"`
	Since      time.Time `json:"since"`
	ExpiresAt  time.Time `json:"expires_at"`
	ConfigHash string    `json:"config_hash"`
}

// Components is every runtime component the daemon serves.
type Components struct {
	Pools    []PoolStatus    `json:"pools"`
	Budgets  []BudgetStatus  `json:"budgets"`
	Ceilings []CeilingStatus `json:"ceilings"`
	Classes  []ClassStatus   `json:"classes"`
	// Priorities maps each declared priority name to its weight.
	Priorities map[string]int `json:"priorities"`
}
