package spec

import (
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
	"time"
	_ "time/tzdata" // schedules name IANA time zones; the binary must not depend on the host's zoneinfo

	"github.com/hashicorp/hcl/v2"
	"github.com/robfig/cron/v3"
	"github.com/zclconf/go-cty/cty"
)

// Fleet is a runner class's fleet block: rpd launches and terminates the
// class's EC2 runners itself (docs/fleet.md).
type Fleet struct {
	// LaunchTemplate is the EC2 launch template's name, or its ID (lt-…).
	LaunchTemplate string
	// Version is the template version: "$Default" (default), "$Latest" or a number.
	Version string
	// UsageClass is FleetSpot or FleetOnDemand (default).
	UsageClass string
	// Fallback is what a spot launch falls back to on capacity and quota
	// errors: FleetOnDemand (default) or FleetNoFallback.
	Fallback string
	// VMCeiling names the vm_ceiling every launch is claimed on first.
	VMCeiling string
	// Subnets are optional launch overrides (subnet IDs); none = the template's.
	Subnets []string
	// MinIdle is how many idle runners the class keeps warm outside schedules.
	MinIdle int
	// MaxIdleAge terminates an idle runner idle this long; 0 = never.
	MaxIdleAge time.Duration
	// BootTimeout terminates a launched VM that has not offered itself by then.
	BootTimeout time.Duration
	// OrphanGrace terminates an instance tagged with the stack and unknown
	// to rpd once it has run this long.
	OrphanGrace time.Duration
	// Interval is the reconcile period (pickups and offers also wake it).
	Interval time.Duration
	// MaxLaunch bounds the VMs one pass launches (default 50).
	MaxLaunch int
	// Schedules raise MinIdle while active; the largest active one wins.
	// Sorted by name.
	Schedules []FleetSchedule

	DeclRange hcl.Range
}

// FleetSchedule is a fleet's schedule "NAME" block.
type FleetSchedule struct {
	Name string
	// Cron is a five-field cron expression (or a descriptor such as
	// "@daily") of the start times, read in Timezone.
	Cron     string
	Duration time.Duration
	Timezone string // IANA name, default "UTC"
	MinIdle  int
}

// Fleet usage classes and fallbacks.
const (
	FleetSpot       = "spot"
	FleetOnDemand   = "on-demand"
	FleetNoFallback = "none"
)

// Defaults and limits of the fleet block (docs/language.md, fleet).
const (
	DefaultFleetVersion     = "$Default"
	DefaultFleetBootTimeout = 5 * time.Minute
	DefaultFleetOrphanGrace = 10 * time.Minute
	DefaultFleetInterval    = 15 * time.Second
	DefaultFleetMaxLaunch   = 50
	DefaultScheduleTimezone = "UTC"
	MaxFleetIdle            = 10000
	MaxFleetLaunch          = 1000
	MaxFleetSubnets         = 32
	MaxScheduleDuration     = 31 * 24 * time.Hour
	MaxFleetInterval        = time.Hour
)

// Usage source types and units of a vm_ceiling.
const (
	UsageHTTP     = "http"
	UsageEC2      = "ec2"
	UsageUnitVMs  = "vms"
	UsageUnitCPUs = "vcpus"
)

var (
	fleetSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "launch_template", Required: true}, {Name: "version"}, {Name: "usage_class"}, {Name: "fallback"},
			{Name: "vm_ceiling", Required: true}, {Name: "subnets"}, {Name: "min_idle"}, {Name: "max_idle_age"},
			{Name: "boot_timeout"}, {Name: "orphan_grace"}, {Name: "interval"}, {Name: "max_launch"},
		},
		Blocks: []hcl.BlockHeaderSchema{{Type: "schedule", LabelNames: []string{"name"}}},
	}
	scheduleSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "cron", Required: true}, {Name: "duration", Required: true}, {Name: "timezone"}, {Name: "min_idle", Required: true},
	}}
	ec2UsageSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "unit"}, {Name: "tags"}}}
)

// cronParser reads the five standard fields and descriptors (@daily,
// @every 1h); ParseCron is the one place that decides the syntax, so the
// daemon schedules exactly what validate accepted.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseCron parses a schedule's cron expression in the time zone loc.
func ParseCron(expr string, loc *time.Location) (cron.Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	if strings.HasPrefix(strings.TrimSpace(expr), "CRON_TZ=") || strings.HasPrefix(strings.TrimSpace(expr), "TZ=") {
		return nil, fmt.Errorf("%q names its time zone inline: use the schedule's timezone attribute", expr)
	}
	return cronParser.Parse("CRON_TZ=" + loc.String() + " " + expr)
}

// fleet decodes a runner class's fleet block.
func (d *decoder) fleet(b *hcl.Block, rc *RunnerClass) {
	f := &Fleet{
		Version: DefaultFleetVersion, UsageClass: FleetOnDemand, Fallback: FleetOnDemand,
		BootTimeout: DefaultFleetBootTimeout, OrphanGrace: DefaultFleetOrphanGrace, Interval: DefaultFleetInterval,
		MaxLaunch: DefaultFleetMaxLaunch, DeclRange: b.DefRange,
	}
	c, ds := b.Body.Content(fleetSchema)
	d.diags = append(d.diags, ds...)
	for _, as := range fleetSchema.Attributes {
		if a := c.Attributes[as.Name]; a != nil && as.Required {
			d.required[a] = true
		}
	}
	attrs := c.Attributes
	if a := attrs["launch_template"]; a != nil {
		if s, ok := d.str(a); ok {
			if strings.TrimSpace(s) == "" || len(s) > 128 {
				d.errorf(a.Expr.Range(), "Invalid launch_template", "launch_template must name an EC2 launch template (1 to 128 characters) or give its ID (lt-…); got %q.", s)
			} else {
				f.LaunchTemplate = s
			}
		}
	}
	if a := attrs["version"]; a != nil {
		if s, ok := d.str(a); ok {
			if !validTemplateVersion(s) {
				d.errorf(a.Expr.Range(), "Invalid launch template version", "version must be \"$Default\", \"$Latest\" or a version number; got %q.", s)
			} else {
				f.Version = s
			}
		}
	}
	if a := attrs["usage_class"]; a != nil {
		if s, ok := d.str(a); ok {
			switch s {
			case FleetSpot, FleetOnDemand:
				f.UsageClass = s
			default:
				d.errorf(a.Expr.Range(), "Unknown usage_class", "usage_class %q does not exist: use %q or %q.", s, FleetSpot, FleetOnDemand)
			}
		}
	}
	if a := attrs["fallback"]; a != nil {
		if s, ok := d.str(a); ok {
			switch s {
			case FleetOnDemand, FleetNoFallback:
				f.Fallback = s
			default:
				d.errorf(a.Expr.Range(), "Unknown fallback", "fallback %q does not exist: use %q (launch on-demand when spot has no capacity) or %q (stay spot).", s, FleetOnDemand, FleetNoFallback)
			}
		}
	}
	if f.UsageClass == FleetOnDemand {
		f.Fallback = FleetNoFallback // nothing to fall back from
	}
	if s, ok := d.str(attrs["vm_ceiling"]); ok {
		f.VMCeiling = s
	}
	if a := attrs["subnets"]; a != nil {
		if l, ok := d.strList(a); ok {
			switch {
			case len(l) > MaxFleetSubnets:
				d.errorf(a.Expr.Range(), "Too many subnets", "A fleet takes at most %d subnets; got %d.", MaxFleetSubnets, len(l))
			case slices.ContainsFunc(l, func(s string) bool { return !strings.HasPrefix(s, "subnet-") }):
				d.errorf(a.Expr.Range(), "Invalid subnet", "subnets are subnet IDs such as \"subnet-0a1b2c3d\"; got %q.", l)
			default:
				f.Subnets = l
			}
		}
	}
	if n, ok := d.integer(attrs["min_idle"], 0, MaxFleetIdle, ""); ok {
		f.MinIdle = n
	}
	if n, ok := d.integer(attrs["max_launch"], 1, MaxFleetLaunch, ""); ok {
		f.MaxLaunch = n
	}
	if v, ok := d.duration(attrs["max_idle_age"], 0, maxLong, false, " (0 keeps idle runners for good)"); ok {
		if v != 0 && v < time.Second {
			d.errorf(attrs["max_idle_age"].Expr.Range(), `Invalid value for "max_idle_age"`, "max_idle_age must be 0 (never) or at least 1s; got %s.", v)
		} else {
			f.MaxIdleAge = v
		}
	}
	if v, ok := d.duration(attrs["boot_timeout"], time.Second, 24*time.Hour, false, ""); ok {
		f.BootTimeout = v
	}
	if v, ok := d.duration(attrs["orphan_grace"], time.Second, 7*24*time.Hour, false, ""); ok {
		f.OrphanGrace = v
	}
	if v, ok := d.duration(attrs["interval"], time.Second, MaxFleetInterval, false, ""); ok {
		f.Interval = v
	}
	seen := map[string]*hcl.Block{}
	for _, sb := range c.Blocks {
		name := sb.Labels[0]
		if first, ok := seen[name]; ok {
			d.diags = append(d.diags, duplicate("Duplicate schedule "+quote(name), fmt.Sprintf("A schedule named %q", name), sb.DefRange, first.DefRange))
			continue
		}
		seen[name] = sb
		if !validName(name) {
			d.diags = append(d.diags, badName("schedule", name, sb.LabelRanges[0]))
			continue
		}
		if s, ok := d.schedule(sb); ok {
			f.Schedules = append(f.Schedules, s)
		}
	}
	slices.SortFunc(f.Schedules, func(a, b FleetSchedule) int { return strings.Compare(a.Name, b.Name) })
	if len(concreteTypes(rc.InstanceTypes)) == 0 {
		d.errorf(b.DefRange, "Fleet without a concrete instance type", "runner_class %q launches runners, so its instance_types must list at least one concrete EC2 instance type (such as \"c6i.large\"); glob patterns (%q) cannot be launched.", rc.Name, rc.InstanceTypes)
	}
	rc.Fleet = f
}

func (d *decoder) schedule(b *hcl.Block) (FleetSchedule, bool) {
	s := FleetSchedule{Name: b.Labels[0], Timezone: DefaultScheduleTimezone}
	attrs, _ := d.content(b.Body, scheduleSchema)
	good := true
	loc := time.UTC
	if a := attrs["timezone"]; a != nil {
		if tz, ok := d.str(a); ok {
			l, err := time.LoadLocation(tz)
			if err != nil || tz == "" || tz == "Local" {
				d.errorf(a.Expr.Range(), "Unknown time zone", "%q is not an IANA time zone name: use one such as \"Europe/Berlin\", \"America/New_York\" or \"UTC\".", tz)
				good = false
			} else {
				s.Timezone, loc = tz, l
			}
		} else {
			good = false
		}
	}
	if a := attrs["cron"]; a != nil {
		if expr, ok := d.str(a); ok {
			if _, err := ParseCron(expr, loc); err != nil {
				d.errorf(a.Expr.Range(), "Invalid cron expression", "%q is not a cron expression: %v. Use five fields (minute hour day-of-month month day-of-week), such as \"0 8 * * MON-FRI\", or a descriptor such as \"@daily\".", expr, err)
				good = false
			} else {
				s.Cron = expr
			}
		} else {
			good = false
		}
	}
	if v, ok := d.duration(attrs["duration"], time.Minute, MaxScheduleDuration, false, ""); ok {
		s.Duration = v
	} else {
		good = false
	}
	if n, ok := d.integer(attrs["min_idle"], 0, MaxFleetIdle, ""); ok {
		s.MinIdle = n
	} else {
		good = false
	}
	return s, good
}

// ec2Usage decodes a vm_ceiling's usage "ec2" block.
func (d *decoder) ec2Usage(b *hcl.Block) *UsageSource {
	u := &UsageSource{Type: UsageEC2, Unit: UsageUnitVMs, Timeout: DefaultUsageTimeout}
	attrs, _ := d.content(b.Body, ec2UsageSchema)
	if a := attrs["unit"]; a != nil {
		if s, ok := d.str(a); ok {
			switch s {
			case UsageUnitVMs, UsageUnitCPUs:
				u.Unit = s
			default:
				d.errorf(a.Expr.Range(), "Unknown usage unit", "unit %q does not exist: use %q (count instances) or %q (sum their vCPUs, AWS's quota unit).", s, UsageUnitVMs, UsageUnitCPUs)
			}
		}
	}
	if a := attrs["tags"]; a != nil {
		if v, ok := d.value(a); ok {
			if !(v.Type().IsObjectType() || v.Type().IsMapType()) {
				d.diags = append(d.diags, typeError(a, "a map of strings, such as { team = \"ci\" }"))
			} else {
				tags := map[string]string{}
				for it := v.ElementIterator(); it.Next(); {
					k, e := it.Element()
					if e.IsNull() || !e.Type().IsPrimitiveType() || e.Type() == cty.Bool {
						d.diags = append(d.diags, typeError(a, "a map of strings"))
						return u
					}
					if e.Type() == cty.Number {
						e = cty.StringVal(e.AsBigFloat().Text('f', -1))
					}
					tags[k.AsString()] = e.AsString()
				}
				u.Tags = tags
			}
		}
	}
	return u
}

// checkFleets is the rule that spans objects: a fleet's vm_ceiling exists,
// and a warning when the ceiling can never hold the fleet's warm runners.
func (d *decoder) checkFleets(cfg *Config, classBlocks map[string]*hcl.Block) {
	ceilings := map[string]VMCeiling{}
	for _, c := range cfg.VMCeilings {
		ceilings[c.Name] = c
	}
	for _, rc := range cfg.RunnerClasses {
		f := rc.Fleet
		if f == nil || f.VMCeiling == "" {
			continue
		}
		r := f.DeclRange
		if b := classBlocks[rc.Name]; b != nil {
			r = fleetAttrRange(b, "vm_ceiling", r)
		}
		c, ok := ceilings[f.VMCeiling]
		if !ok {
			d.errorf(r, "Reference to undeclared vm_ceiling", "runner_class %q claims its launches on vm_ceiling %q, which is not declared. Declare it (a usage \"ec2\" source counts what EC2 runs), or name a declared one.", rc.Name, f.VMCeiling)
			continue
		}
		peak := f.MinIdle
		for _, s := range f.Schedules {
			peak = max(peak, s.MinIdle)
		}
		if peak > c.Max {
			d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "min_idle above the ceiling",
				Detail:  fmt.Sprintf("runner_class %q keeps up to %d idle runners, but vm_ceiling %q allows %d VMs in all: the fleet stops at the ceiling.", rc.Name, peak, c.Name, c.Max),
				Subject: r.Ptr()})
		}
	}
}

// fleetAttrRange is where a fleet attribute is written, else def.
func fleetAttrRange(class *hcl.Block, attr string, def hcl.Range) hcl.Range {
	c, _, _ := class.Body.PartialContent(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "fleet"}}})
	for _, fb := range c.Blocks {
		fc, _, _ := fb.Body.PartialContent(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: attr}}})
		if a := fc.Attributes[attr]; a != nil {
			return a.Expr.Range()
		}
	}
	return def
}

// concreteTypes are the patterns of a class that name one instance type
// (no glob characters): the types a fleet launches.
func concreteTypes(patterns []string) []string {
	var out []string
	for _, p := range patterns {
		if !strings.ContainsAny(p, `*?[\`) {
			if _, err := path.Match(p, p); err == nil {
				out = append(out, p)
			}
		}
	}
	return out
}

// ConcreteTypes returns the instance types a fleet of class rc launches:
// its instance_types that are not glob patterns.
func ConcreteTypes(patterns []string) []string { return concreteTypes(patterns) }

func validTemplateVersion(s string) bool {
	if s == "$Default" || s == "$Latest" {
		return true
	}
	if s == "" || len(s) > 18 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s[0] != '0' && s != "" && len(s) <= len(fmt.Sprint(math.MaxInt64))
}
