package spec

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Defaults and limits of the language, as docs/language.md documents them.
// The SQS limits are AWS's own. Each one the runtime packages or backends
// also apply is checked equal to theirs by spec/limits_test.go, so that
// spec stays free of runtime imports without drifting from them.
const (
	DefaultStack        = "default"
	DefaultListen       = "127.0.0.1:7070"
	DefaultBackendType  = "local"
	DefaultLocalPath    = ".rpd/state.db"
	DefaultDefaultSlots = 16
	DefaultScanRing     = 256 << 20
	DefaultDeltaCache   = 512 << 20
	DefaultSpillSlots   = 16
	DefaultVisibility   = 30 * time.Second
	DefaultRetention    = 4 * 24 * time.Hour
	DefaultRequeueDelay = 3 * time.Second
	// Leader election (rpd { ha { … } }, docs/ha.md).
	DefaultHALease = 5 * time.Second
	DefaultHARenew = time.Second
	MinHALease     = 2 * time.Second
	MaxHALease     = 5 * time.Minute
	// MaxPickupClaimTTL bounds a runner class's pickup claim_ttl.
	MaxPickupClaimTTL    = 24 * time.Hour
	DefaultExhaustion    = 5
	DefaultClaimTTL      = 2 * time.Minute
	DefaultPollInterval  = 5 * time.Second
	DefaultStaleAfter    = 30 * time.Second
	DefaultUsageField    = "active"
	DefaultUsageTimeout  = 5 * time.Second
	MaxVisibility        = 12 * time.Hour
	MaxDelay             = 15 * time.Minute
	MinRetention         = 60 * time.Second
	MaxRetention         = 14 * 24 * time.Hour
	MaxQueueNameLen      = 80
	MaxStackLen          = 40
	MaxTablePrefixLen    = 200
	Unlimited            = "unlimited"
	maxSlots             = 1 << 30
	maxCeiling           = math.MaxInt32 // runtime/ledger's limit (MaxCount)
	maxSpillSlots        = 16384         // runtime/fatjob's limit
	maxBudgetBytes       = 1<<63 - 1     // runtime/fatjob's limit (MaxBudgetBytes)
	maxCPU               = 1 << 16
	maxLong              = 100 * 365 * 24 * time.Hour
	sqsWhy               = " (the SQS limit)"
	defaultTablePrefixOf = "rpd-"
)

var (
	rpdSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "stack"}, {Name: "listen"}, {Name: "token"}, {Name: "audit_log"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "backend", LabelNames: []string{"type"}}, {Type: "ha"}, {Type: "tls"}},
	}
	haSchema    = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "lease"}, {Name: "renew"}, {Name: "advertise"}}}
	localSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "path"}, {Name: "realtime_sync"}}}
	awsSchema   = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "region"}, {Name: "profile"}, {Name: "table_prefix"}}}
	classSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "cpu", Required: true}, {Name: "mem", Required: true},
			{Name: "instance_types"}, {Name: "allow_destroy"},
		},
		Blocks: []hcl.BlockHeaderSchema{{Type: "queue"}, {Type: "pickup"}, {Type: "fleet"}},
	}
	queueSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "name"}, {Name: "visibility_timeout"}, {Name: "retention"}, {Name: "delay"},
	}}
	pickupSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "requeue_delay"}, {Name: "local_exhaustion"}, {Name: "mode"}, {Name: "claim_ttl"},
	}}
	budgetSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "scan_ring"}, {Name: "delta_cache"}, {Name: "spill_slots"}, {Name: "max_queued"},
	}}
	ceilingSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "max", Required: true}, {Name: "claim_ttl"}, {Name: "poll_interval"},
			{Name: "stale_after"}, {Name: "grant"}, {Name: "max_queued"},
		},
		Blocks: []hcl.BlockHeaderSchema{{Type: "usage", LabelNames: []string{"type"}}},
	}
	usageSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "url", Required: true}, {Name: "field"}, {Name: "timeout"},
	}}
	poolSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "slots"}, {Name: "description"}, {Name: "lease_ttl"}, {Name: "max_queued"}, {Name: "allow_destroy"}, {Name: "max_wait"},
	}}
	prioritySchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "weight", Required: true}}}
)

// blockSchemas are the schemas above by block path: a nested block is
// "parent.type", a backend "rpd.backend.<type>".
var blockSchemas = map[string]*hcl.BodySchema{
	"rpd": rpdSchema, "rpd.backend.local": localSchema, "rpd.backend.aws": awsSchema, "rpd.ha": haSchema,
	"rpd.tls": tlsSchema, "token": tokenSchema,
	"runner_class": classSchema, "runner_class.queue": queueSchema, "runner_class.pickup": pickupSchema,
	"runner_class.fleet": fleetSchema, "runner_class.fleet.schedule": scheduleSchema,
	"budget": budgetSchema, "vm_ceiling": ceilingSchema, "vm_ceiling.usage.http": usageSchema, "vm_ceiling.usage.ec2": ec2UsageSchema,
	"pool": poolSchema, "priority": prioritySchema,
}

// Schema lists the attributes of every block of the language, by block
// path ("pool", "runner_class.queue", "rpd.backend.local"), read from the
// schemas the decoder itself uses: tests and tools that must cover every
// attribute start here, so a new one cannot be left out.
func Schema() map[string][]string {
	out := make(map[string][]string, len(blockSchemas))
	for path, schema := range blockSchemas {
		names := []string{}
		for _, a := range schema.Attributes {
			names = append(names, a.Name)
		}
		out[path] = names
	}
	return out
}

// decode is phase five and six: every block into its typed form, then the
// rules that span objects.
func decode(m *module, ctx *hcl.EvalContext) (*Config, hcl.Diagnostics) {
	d := &decoder{ctx: ctx, vars: map[string]bool{}, locals: map[string]bool{}, required: map[*hcl.Attribute]bool{}}
	for _, b := range m.variables {
		d.vars[b.Labels[0]] = true
	}
	for _, a := range m.locals {
		d.locals[a.Name] = true
	}
	cfg := &Config{Stack: DefaultStack, Listen: DefaultListen}
	d.rpd(m.rpd, cfg)

	queues := map[string]*RunnerClass{}
	classBlocks := map[string]*hcl.Block{}
	for _, b := range m.byType["runner_class"] {
		classBlocks[b.Labels[0]] = b
		rc := d.runnerClass(b, cfg.Stack)
		if first, ok := queues[rc.Queue.Name]; ok && validQueueName(rc.Queue.Name) {
			d.errorf(rc.queueNameRange(b), "Duplicate queue name", "Runner classes %q and %q (at %s) would both use the queue %q. Give one of them a different queue { name = ... }.", rc.Name, first.Name, rangeString(first.DeclRange), rc.Queue.Name)
		} else {
			queues[rc.Queue.Name] = &rc
		}
		cfg.RunnerClasses = append(cfg.RunnerClasses, rc)
	}
	for _, b := range m.byType["budget"] {
		cfg.Budgets = append(cfg.Budgets, d.budget(b))
	}
	for _, b := range m.byType["vm_ceiling"] {
		cfg.VMCeilings = append(cfg.VMCeilings, d.ceiling(b))
	}
	hasDefault := false
	for _, b := range m.byType["pool"] {
		p := d.pool(b)
		hasDefault = hasDefault || p.Name == DefaultPoolName
		cfg.Pools = append(cfg.Pools, p)
	}
	if !hasDefault {
		cfg.Pools = append(cfg.Pools, Pool{Name: DefaultPoolName, Slots: DefaultDefaultSlots})
	}
	for _, b := range m.byType["priority"] {
		cfg.Priorities = append(cfg.Priorities, d.priority(b))
	}
	d.tokens(m.byType["token"], cfg)

	d.checkFleets(cfg, classBlocks)

	sort.Slice(cfg.RunnerClasses, func(i, j int) bool { return cfg.RunnerClasses[i].Name < cfg.RunnerClasses[j].Name })
	sort.Slice(cfg.Budgets, func(i, j int) bool { return cfg.Budgets[i].Name < cfg.Budgets[j].Name })
	sort.Slice(cfg.VMCeilings, func(i, j int) bool { return cfg.VMCeilings[i].Name < cfg.VMCeilings[j].Name })
	sort.Slice(cfg.Pools, func(i, j int) bool { return cfg.Pools[i].Name < cfg.Pools[j].Name })
	sort.Slice(cfg.Priorities, func(i, j int) bool { return cfg.Priorities[i].Name < cfg.Priorities[j].Name })
	return cfg, d.diags
}

// content decodes a block body against schema and returns its attributes
// and nested blocks, refusing repeats of nested blocks named in single.
func (d *decoder) content(body hcl.Body, schema *hcl.BodySchema, single ...string) (hcl.Attributes, map[string]*hcl.Block) {
	c, ds := body.Content(schema)
	d.diags = append(d.diags, ds...)
	for _, as := range schema.Attributes {
		if a := c.Attributes[as.Name]; a != nil && as.Required {
			d.required[a] = true
		}
	}
	blocks := map[string]*hcl.Block{}
	for _, b := range c.Blocks {
		if first, ok := blocks[b.Type]; ok {
			d.diags = append(d.diags, duplicate("Duplicate "+b.Type+" block", "A "+b.Type+" block", b.DefRange, first.DefRange))
			continue
		}
		blocks[b.Type] = b
	}
	return c.Attributes, blocks
}

func (d *decoder) rpd(b *hcl.Block, cfg *Config) {
	cfg.Backend = Backend{Type: DefaultBackendType, Path: DefaultLocalPath}
	cfg.HA = HA{Lease: DefaultHALease, Renew: DefaultHARenew}
	if b == nil {
		return
	}
	attrs, blocks := d.content(b.Body, rpdSchema)
	d.ha(blocks["ha"], cfg)
	d.security(attrs["audit_log"], blocks["tls"], cfg)
	if a := attrs["stack"]; a != nil {
		if s, ok := d.str(a); ok {
			if validStack(s) {
				cfg.Stack = s
			} else {
				d.errorf(a.Expr.Range(), "Invalid stack name", "%q is not a valid stack name: use 1 to %d letters, digits, underscores and dashes, starting with a letter or digit. The stack prefixes queue and table names.", s, MaxStackLen)
			}
		}
	}
	if a := attrs["listen"]; a != nil {
		if s, ok := d.str(a); ok {
			if err := checkListen(s); err != nil {
				d.errorf(a.Expr.Range(), "Invalid listen address", "%q is not a listen address: %s. Use HOST:PORT, such as \"127.0.0.1:7070\".", s, err)
			} else {
				cfg.Listen = s
			}
		}
	}
	if s, ok := d.str(attrs["token"]); ok {
		cfg.Token = s
	}
	bb := blocks["backend"]
	if bb == nil {
		cfg.Backend.DeclRange = b.DefRange
		return
	}
	cfg.Backend = Backend{Type: bb.Labels[0], DeclRange: bb.DefRange}
	switch bb.Labels[0] {
	case "local":
		cfg.Backend.Path = DefaultLocalPath
		attrs, _ := d.content(bb.Body, localSchema)
		if a := attrs["path"]; a != nil {
			if s, ok := d.str(a); ok {
				if strings.TrimSpace(s) == "" || strings.ContainsRune(s, 0) {
					d.errorf(a.Expr.Range(), "Invalid backend path", "path must name a file, such as %q.", DefaultLocalPath)
				} else {
					cfg.Backend.Path = s
				}
			}
		}
		if v, ok := d.boolean(attrs["realtime_sync"]); ok {
			cfg.Backend.NormalPrioritySync = !v
		}
	case "aws":
		attrs, _ := d.content(bb.Body, awsSchema)
		cfg.Backend.Region, _ = d.str(attrs["region"])
		cfg.Backend.Profile, _ = d.str(attrs["profile"])
		cfg.Backend.TablePrefix = defaultTablePrefixOf + cfg.Stack
		if a := attrs["table_prefix"]; a != nil {
			if s, ok := d.str(a); ok {
				if validTablePrefix(s) {
					cfg.Backend.TablePrefix = s
				} else {
					d.errorf(a.Expr.Range(), "Invalid table_prefix", "%q cannot prefix DynamoDB table names: use 1 to %d letters, digits, '_', '-' and '.'.", s, MaxTablePrefixLen)
				}
			}
		}
	default:
		d.errorf(bb.LabelRanges[0], "Unknown backend type", "Backend %q does not exist: use \"local\" (an embedded SQLite file) or \"aws\" (SQS and DynamoDB).", bb.Labels[0])
	}
}

func (d *decoder) runnerClass(b *hcl.Block, stack string) RunnerClass {
	rc := RunnerClass{
		Name:          b.Labels[0],
		InstanceTypes: []string{"*"},
		Queue: QueueSpec{
			Name:              stack + "-rp-" + b.Labels[0],
			VisibilityTimeout: DefaultVisibility,
			Retention:         DefaultRetention,
		},
		Pickup: PickupSpec{
			RequeueDelay:    DefaultRequeueDelay,
			LocalExhaustion: DefaultExhaustion,
			Mode:            PickupModeLease,
		},
		DeclRange: b.DefRange,
	}
	attrs, blocks := d.content(b.Body, classSchema)
	if n, ok := d.integer(attrs["cpu"], 1, maxCPU, ""); ok {
		rc.CPU = n
	}
	if n, ok := d.size(attrs["mem"], 1, math.MaxUint64); ok {
		rc.Mem = n
	}
	if a := attrs["instance_types"]; a != nil {
		if l, ok := d.strList(a); ok {
			if len(l) == 0 {
				d.errorf(a.Expr.Range(), "Empty instance_types", "A class that allows no instance type can never hand out a runner: list at least one glob pattern, or omit instance_types to allow any (\"*\").")
			}
			good := true
			for _, p := range l {
				if !validGlob(p) {
					d.errorf(a.Expr.Range(), "Invalid glob pattern", "%q is not a valid glob pattern (Go's path.Match syntax: * ? [a-z] and \\ escapes).", p)
					good = false
				}
			}
			if good && len(l) > 0 {
				rc.InstanceTypes = l
			}
		}
	}
	if v, ok := d.boolean(attrs["allow_destroy"]); ok {
		rc.AllowDestroy = v
	}
	nameSet := false
	if qb := blocks["queue"]; qb != nil {
		qa, _ := d.content(qb.Body, queueSchema)
		if a := qa["name"]; a != nil {
			nameSet = true
			if s, ok := d.str(a); ok {
				if validQueueName(s) {
					rc.Queue.Name = s
				} else {
					d.errorf(a.Expr.Range(), "Invalid queue name", "%q is not a valid SQS queue name: use 1 to %d letters, digits, underscores and dashes.", s, MaxQueueNameLen)
					rc.Queue.Name = "" // don't also report a collision
				}
			}
		}
		if v, ok := d.duration(qa["visibility_timeout"], 0, MaxVisibility, true, sqsWhy); ok {
			rc.Queue.VisibilityTimeout = v
		}
		if v, ok := d.duration(qa["retention"], MinRetention, MaxRetention, true, sqsWhy); ok {
			rc.Queue.Retention = v
		}
		if v, ok := d.duration(qa["delay"], 0, MaxDelay, true, sqsWhy); ok {
			rc.Queue.Delay = v
		}
	}
	if !nameSet && !validQueueName(rc.Queue.Name) {
		d.errorf(b.LabelRanges[0], "Invalid queue name", "The default queue name %q (\"<stack>-rp-<class>\") is not a valid SQS queue name: it must be 1 to %d letters, digits, underscores and dashes. Shorten the class or stack name, or set queue { name = ... }.", rc.Queue.Name, MaxQueueNameLen)
		rc.Queue.Name = ""
	}
	if fb := blocks["fleet"]; fb != nil {
		d.fleet(fb, &rc)
	}
	if pb := blocks["pickup"]; pb != nil {
		pa, _ := d.content(pb.Body, pickupSchema)
		if v, ok := d.duration(pa["requeue_delay"], 0, MaxDelay, true, sqsWhy); ok {
			rc.Pickup.RequeueDelay = v
		}
		if n, ok := d.integer(pa["local_exhaustion"], 1, math.MaxInt32, ""); ok {
			rc.Pickup.LocalExhaustion = n
		}
		if v, ok := d.duration(pa["claim_ttl"], 0, MaxPickupClaimTTL, false, ""); ok {
			rc.Pickup.ClaimTTL = v
		}
		if a := pa["mode"]; a != nil {
			if s, ok := d.str(a); ok {
				switch s {
				case PickupModeLease, PickupModeDelete:
					rc.Pickup.Mode = s
				default:
					d.errorf(a.Expr.Range(), "Unknown pickup mode", "Mode %q does not exist: use %q (the default: keep the message in flight until the claim succeeds) or %q (delete on receive, re-send to requeue).", s, PickupModeLease, PickupModeDelete)
				}
			}
		}
	}
	return rc
}

// queueNameRange is where a queue-name collision is reported: the name
// attribute when set, else the class label.
func (rc *RunnerClass) queueNameRange(b *hcl.Block) hcl.Range {
	c, _, _ := b.Body.PartialContent(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "queue"}}})
	for _, qb := range c.Blocks {
		qc, _, _ := qb.Body.PartialContent(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "name"}}})
		if a := qc.Attributes["name"]; a != nil {
			return a.Expr.Range()
		}
	}
	return b.LabelRanges[0]
}

func (d *decoder) budget(b *hcl.Block) Budget {
	bu := Budget{Name: b.Labels[0], ScanRing: DefaultScanRing, DeltaCache: DefaultDeltaCache, DeclRange: b.DefRange}
	spill := DefaultSpillSlots
	bu.SpillSlots = &spill
	attrs, _ := d.content(b.Body, budgetSchema)
	if n, ok := d.size(attrs["scan_ring"], 1, maxBudgetBytes); ok {
		bu.ScanRing = n
	}
	if n, ok := d.size(attrs["delta_cache"], 1, maxBudgetBytes); ok {
		bu.DeltaCache = n
	}
	if a := attrs["spill_slots"]; a != nil {
		if v, ok := d.value(a); ok {
			if v.Type() == cty.String && v.AsString() == Unlimited {
				bu.SpillSlots = nil
			} else if n, ok := d.intOf(a, v, 1, maxSpillSlots, "", "a number of slots or \"unlimited\""); ok {
				spill = n
			}
		}
	}
	if n, ok := d.integer(attrs["max_queued"], 0, math.MaxInt32, ""); ok {
		bu.MaxQueued = n
	}
	return bu
}

func (d *decoder) ceiling(b *hcl.Block) VMCeiling {
	c := VMCeiling{
		Name:         b.Labels[0],
		ClaimTTL:     DefaultClaimTTL,
		PollInterval: DefaultPollInterval,
		StaleAfter:   DefaultStaleAfter,
		Grant:        GrantNextUsage,
		DeclRange:    b.DefRange,
	}
	attrs, blocks := d.content(b.Body, ceilingSchema)
	if n, ok := d.integer(attrs["max"], 1, maxCeiling, ""); ok {
		c.Max = n
	}
	if v, ok := d.duration(attrs["claim_ttl"], time.Second, maxLong, false, ""); ok {
		c.ClaimTTL = v
	}
	if n, ok := d.integer(attrs["max_queued"], 0, math.MaxInt32, ""); ok {
		c.MaxQueued = n
	}
	pollOK := true
	if a := attrs["poll_interval"]; a != nil {
		v, ok := d.duration(a, time.Millisecond, maxLong, false, "")
		if ok {
			c.PollInterval = v
		}
		pollOK = ok
	}
	if a := attrs["stale_after"]; a != nil {
		if v, ok := d.duration(a, time.Millisecond, maxLong, false, ""); ok {
			c.StaleAfter = v
		}
	}
	if pollOK && c.StaleAfter < c.PollInterval {
		r := b.DefRange
		if a := attrs["stale_after"]; a != nil {
			r = a.Expr.Range()
		} else if a := attrs["poll_interval"]; a != nil {
			r = a.Expr.Range()
		}
		d.errorf(r, "stale_after shorter than poll_interval", "stale_after (%s) is shorter than poll_interval (%s): every usage figure would be stale before the next arrives and nothing would ever be granted. Make stale_after at least poll_interval (usually several times it).", FormatDuration(c.StaleAfter), FormatDuration(c.PollInterval))
	}
	if pollOK && c.StaleAfter >= c.PollInterval && c.ClaimTTL <= c.StaleAfter {
		r := b.DefRange
		if a := attrs["claim_ttl"]; a != nil {
			r = a.Expr.Range()
		} else if a := attrs["stale_after"]; a != nil {
			r = a.Expr.Range()
		}
		d.errorf(r, "claim_ttl not longer than stale_after", "claim_ttl (%s) must be longer than stale_after (%s): a local claim may only lapse once a fresh usage figure could show its VM, or the ceiling can be over-booked. Raise claim_ttl or lower stale_after.", FormatDuration(c.ClaimTTL), FormatDuration(c.StaleAfter))
	}
	if a := attrs["grant"]; a != nil {
		if s, ok := d.str(a); ok {
			switch s {
			case GrantNextUsage, GrantImmediate:
				c.Grant = s
			default:
				d.errorf(a.Expr.Range(), "Unknown grant mode", "Grant mode %q does not exist: use %q (the default: decide when the next usage figure arrives) or %q.", s, GrantNextUsage, GrantImmediate)
			}
		}
	}
	if ub := blocks["usage"]; ub != nil {
		switch ub.Labels[0] {
		case UsageEC2:
			c.Usage = d.ec2Usage(ub)
		case UsageHTTP:
			u := &UsageSource{Type: UsageHTTP, Field: DefaultUsageField, Timeout: DefaultUsageTimeout}
			ua, _ := d.content(ub.Body, usageSchema)
			if a := ua["url"]; a != nil {
				if s, ok := d.str(a); ok {
					if err := checkHTTPURL(s); err != nil {
						d.errorf(a.Expr.Range(), "Invalid usage URL", "%q is not a usable URL: %s.", s, err)
					} else {
						u.URL = s
					}
				}
			}
			if a := ua["field"]; a != nil {
				if s, ok := d.str(a); ok {
					if !validFieldPath(s) {
						d.errorf(a.Expr.Range(), "Invalid usage field", "%q is not a JSON field path: use names separated by dots, such as \"active\" or \"data.vms.active\".", s)
					} else {
						u.Field = s
					}
				}
			}
			if v, ok := d.duration(ua["timeout"], time.Millisecond, maxLong, false, ""); ok {
				u.Timeout = v
			}
			c.Usage = u
		default:
			d.errorf(ub.LabelRanges[0], "Unknown usage source type", "Usage source %q does not exist: use \"http\" (a JSON figure polled from a URL) or \"ec2\" (the stack's tagged EC2 instances). Omit the usage block to push figures with PUT /v1/ceilings/NAME/usage.", ub.Labels[0])
		}
	}
	return c
}

func (d *decoder) pool(b *hcl.Block) Pool {
	p := Pool{Name: b.Labels[0], DeclRange: b.DefRange}
	attrs, _ := d.content(b.Body, poolSchema)
	if a := attrs["slots"]; a != nil {
		d.required[a] = p.Name != DefaultPoolName
		if n, ok := d.integer(a, 1, maxSlots, ""); ok {
			p.Slots = n
		}
	} else if p.Name == DefaultPoolName {
		p.Slots = DefaultDefaultSlots
	} else {
		d.errorf(b.Body.MissingItemRange(), "Missing required argument", "The argument \"slots\" is required: how many slots pool %q holds.", p.Name)
	}
	if s, ok := d.str(attrs["description"]); ok {
		p.Description = s
	}
	if a := attrs["lease_ttl"]; a != nil && neverExpires(a, d.ctx) {
		d.errorf(a.Expr.Range(), "Invalid value for \"lease_ttl\"", "A pool lease cannot live forever: a worker that vanished would hold its slots for good. Omit lease_ttl or set 0 for the daemon's default TTL (%ds), or give a duration of at least 1s.", int(DefaultLeaseTTL.Seconds()))
	} else if v, ok := d.duration(a, 0, maxLong, false, ""); ok {
		if v != 0 && v < time.Second {
			d.errorf(a.Expr.Range(), "Invalid value for \"lease_ttl\"", "lease_ttl must be 0 (the daemon's default TTL, %ds) or at least 1s; got %s.", int(DefaultLeaseTTL.Seconds()), v)
		} else {
			p.LeaseTTL = v
		}
	}
	if n, ok := d.integer(attrs["max_queued"], 0, math.MaxInt32, ""); ok {
		p.MaxQueued = n
	}
	if v, ok := d.duration(attrs["max_wait"], 0, maxLong, false, ""); ok {
		p.MaxWait = v
	}
	if v, ok := d.boolean(attrs["allow_destroy"]); ok {
		p.AllowDestroy = v
	}
	return p
}

// neverExpires reports whether a is written as a lease that never expires:
// "never", "forever", "infinite" or a negative duration.
func neverExpires(a *hcl.Attribute, ctx *hcl.EvalContext) bool {
	v, diags := a.Expr.Value(ctx)
	if diags.HasErrors() || v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		return false
	}
	switch s := strings.ToLower(strings.TrimSpace(v.AsString())); {
	case s == "never", s == "forever", s == "infinite", s == "inf":
		return true
	default:
		return strings.HasPrefix(s, "-")
	}
}

func (d *decoder) priority(b *hcl.Block) Priority {
	p := Priority{Name: b.Labels[0], DeclRange: b.DefRange}
	attrs, _ := d.content(b.Body, prioritySchema)
	if n, ok := d.integer(attrs["weight"], math.MinInt32, math.MaxInt32, ""); ok {
		p.Weight = n
	}
	return p
}

// validQueueName reports whether s is a valid standard SQS queue name.
func validQueueName(s string) bool {
	if len(s) == 0 || len(s) > MaxQueueNameLen {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func validStack(s string) bool {
	return len(s) <= MaxStackLen && validName(s)
}

func validTablePrefix(s string) bool {
	if len(s) == 0 || len(s) > MaxTablePrefixLen {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// ha decodes the rpd block's ha block (leader election, docs/ha.md).
func (d *decoder) ha(b *hcl.Block, cfg *Config) {
	if b == nil {
		return
	}
	cfg.HA.DeclRange = b.DefRange
	attrs, _ := d.content(b.Body, haSchema)
	if v, ok := d.duration(attrs["lease"], MinHALease, MaxHALease, false, " (a leader stops granting one second before its lease runs out)"); ok {
		cfg.HA.Lease = v
	}
	if a := attrs["renew"]; a != nil {
		if v, ok := d.duration(a, 50*time.Millisecond, MaxHALease, false, ""); ok {
			if v >= cfg.HA.Lease/2 {
				d.errorf(a.Expr.Range(), `Invalid value for "renew"`, "renew must be less than half the lease (%s), so that one lost renewal does not end the leadership; got %s.", FormatDuration(cfg.HA.Lease), FormatDuration(v))
			} else {
				cfg.HA.Renew = v
			}
		}
	} else if cfg.HA.Renew >= cfg.HA.Lease/2 {
		cfg.HA.Renew = cfg.HA.Lease / 5
	}
	if a := attrs["advertise"]; a != nil {
		if s, ok := d.str(a); ok {
			if err := checkHTTPURL(s); err != nil {
				d.errorf(a.Expr.Range(), "Invalid advertise URL", "%q is not an advertise URL: %s. Use the URL other replicas reach this daemon at, such as \"http://10.0.0.5:7070\".", s, err)
			} else {
				cfg.HA.Advertise = strings.TrimRight(s, "/")
			}
		}
	}
}

func checkListen(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("missing or malformed port")
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Errorf("host %q is not a host name or IP address", host)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not a number between 0 and 65535", port)
	}
	return nil
}

func checkHTTPURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("it does not parse")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("the scheme must be http or https")
	}
	if u.Host == "" {
		return fmt.Errorf("it has no host")
	}
	return nil
}

func validFieldPath(s string) bool {
	if s == "" {
		return false
	}
	for _, part := range strings.Split(s, ".") {
		if part == "" {
			return false
		}
	}
	return true
}
