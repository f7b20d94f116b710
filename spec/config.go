package spec

import (
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Config is a loaded, fully validated rpd configuration: every *.hcl file of
// one directory (or one file), with variables resolved, defaults applied and
// every object in deterministic (name) order.
//
// A Config is immutable once returned by the loader: callers must treat every
// field, slice and map reachable from it as read-only.
type Config struct {
	// Stack namespaces everything rpd creates (queue names, tags, state keys).
	Stack string
	// Listen is the daemon API address (default "127.0.0.1:7070").
	Listen string
	// Token is the daemon's bearer token from the configuration, if any.
	Token string
	// Backend says where live state lives.
	Backend Backend
	// HA tunes the leader election among the daemons of the stack.
	HA HA
	// AuditLog is where the daemon appends its audit log, one JSON line per
	// state-changing request and per reload: a file, "-" for standard
	// output, "" for none.
	AuditLog string
	// TLS, when not nil, makes the daemon serve HTTPS (docs/security.md).
	TLS *TLS
	// Tokens are the named bearer tokens, sorted by name.
	Tokens []Token

	// Each slice is sorted by Name.
	RunnerClasses []RunnerClass
	Budgets       []Budget
	VMCeilings    []VMCeiling
	Pools         []Pool // always contains DefaultPoolName
	Priorities    []Priority

	// Files lists the source files the configuration was loaded from, sorted.
	Files []string
}

// DefaultPoolName is the pool that exists even when not declared
// (docs/language.md, pool); spec/limits_test.go holds it equal to the
// runtime's pools.DefaultPool.
const DefaultPoolName = "default_pool"

// DefaultLeaseTTL is the TTL the daemon gives a remote grant whose request
// and pool set none; spec/limits_test.go holds it equal to the wire
// contract's api.DefaultTTLSeconds, so that spec imports nothing of rpd.
const DefaultLeaseTTL = 60 * time.Second

// Backend is the rpd block's backend "TYPE" { ... } block.
type Backend struct {
	Type string // "local" (default) or "aws"

	// local
	Path string // SQLite file, default ".rpd/state.db", relative to the working directory
	// NormalPrioritySync is realtime_sync = false: the grant journal's
	// synced appends keep their thread in the normal scheduling class.
	NormalPrioritySync bool

	// aws: everything else comes from the AWS SDK's config chain.
	Region  string
	Profile string
	// TablePrefix prefixes the DynamoDB tables rpd creates (default "rpd-<stack>").
	TablePrefix string

	DeclRange hcl.Range
}

// HA is the rpd block's ha block: the leader lease the daemons of a stack
// elect their one arbiter with (docs/ha.md).
type HA struct {
	// Lease is how long a leader's lease lasts without renewal (default
	// 5s); a standby takes over when it runs out, and the leader stops
	// granting one second before.
	Lease time.Duration
	// Renew is how often the leader renews (default 1s; less than Lease/2).
	Renew time.Duration
	// Advertise is the URL other replicas reach this daemon at; empty means
	// http:// and the listen address.
	Advertise string

	DeclRange hcl.Range
}

// RunnerClass is a runner_class "NAME" block: one SQS queue of idle runners.
type RunnerClass struct {
	Name          string
	CPU           int      // vCPUs a message of this class must carry
	Mem           uint64   // bytes a message of this class must carry
	InstanceTypes []string // glob patterns (path.Match syntax), validated
	Queue         QueueSpec
	Pickup        PickupSpec
	// AllowDestroy lets apply/watch delete the class's queue even when it
	// still holds idle runners.
	AllowDestroy bool
	// Fleet is nil unless the class declares a fleet block (rpd launches
	// and terminates its runners, spec/fleet.go).
	Fleet *Fleet

	DeclRange hcl.Range
}

// QueueSpec is a runner class's nested queue block.
type QueueSpec struct {
	Name              string        // default "<stack>-rp-<class>"
	VisibilityTimeout time.Duration // default 30s, SQS range 0..12h
	Retention         time.Duration // default 4 days (SQS default), SQS range 60s..14d
	Delay             time.Duration // default 0, SQS range 0..15m
}

// Pickup modes.
const (
	PickupModeLease  = "lease"
	PickupModeDelete = "delete"
)

// PickupSpec is a runner class's nested pickup block.
type PickupSpec struct {
	RequeueDelay    time.Duration // default 3s, 0..15m
	LocalExhaustion int           // default 5, >= 1
	Mode            string        // PickupModeLease (default) or PickupModeDelete
	// ClaimTTL: a claim not confirmed within it lapses and the runner is
	// offered again (docs/pickup.md); 0 (default) = claims need no
	// confirmation.
	ClaimTTL time.Duration
}

// Budget is a budget "NAME" block (docs/language.md).
type Budget struct {
	Name       string
	ScanRing   uint64 // bytes, default 256 MiB, > 0
	DeltaCache uint64 // bytes, default 512 MiB, > 0
	// SpillSlots is nil for unlimited; otherwise > 0 (default 16).
	SpillSlots *int
	MaxQueued  int // waiting permits; 0 = unbounded

	DeclRange hcl.Range
}

// Grant modes of a VM ceiling.
const (
	GrantNextUsage = "next_usage"
	GrantImmediate = "immediate"
)

// VMCeiling is a vm_ceiling "NAME" block (docs/language.md).
type VMCeiling struct {
	Name         string
	Max          int           // > 0
	ClaimTTL     time.Duration // default 2m
	PollInterval time.Duration // default 5s
	StaleAfter   time.Duration // default 30s, must be >= PollInterval
	Grant        string        // GrantNextUsage (default) or GrantImmediate
	MaxQueued    int           // waiting claims and tickets; 0 = unbounded
	// Usage is nil when the figure is pushed by an operator (PUT .../usage).
	Usage *UsageSource

	DeclRange hcl.Range
}

// UsageSource is a vm_ceiling's nested usage "TYPE" block: "http" (a JSON
// figure polled from a URL) or "ec2" (the stack's tagged EC2 instances).
type UsageSource struct {
	Type    string        // UsageHTTP or UsageEC2
	URL     string        // http
	Field   string        // http: JSON field (dot path) holding the active count, default "active"
	Timeout time.Duration // default 5s
	// Unit is what an ec2 source counts: UsageUnitVMs (default) or
	// UsageUnitCPUs; Tags are its extra tag filters.
	Unit string
	Tags map[string]string
}

// Pool is a pool "NAME" block (docs/language.md).
type Pool struct {
	Name        string
	Slots       int // > 0; default_pool defaults to 16
	Description string
	LeaseTTL    time.Duration // 0 = the daemon's default TTL (DefaultLeaseTTL)
	MaxQueued   int           // 0 = unbounded
	// MaxWait bounds the wait_seconds a request for the pool may ask for;
	// 0 = no bound (beyond the API's own).
	MaxWait time.Duration
	// AllowDestroy lets apply/watch delete the pool even while slots are held.
	AllowDestroy bool

	DeclRange hcl.Range // zero for an undeclared default_pool
}

// Priority is a priority "NAME" block: a named weight clients may ask for.
type Priority struct {
	Name   string
	Weight int

	DeclRange hcl.Range
}
