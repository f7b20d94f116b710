package inventory

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/ec2"
	"github.com/rpdhq/rpd/daemon/arbiter"
	"github.com/rpdhq/rpd/reconcile"
	"github.com/rpdhq/rpd/runtime/fleet"
	"github.com/rpdhq/rpd/runtime/ledger"
	"github.com/rpdhq/rpd/runtime/pickup"
	"github.com/rpdhq/rpd/spec"
)

// The round trip HCL → runtime document → component configuration covers
// every attribute of every block: the list comes from spec.Schema (the
// decoder's own schemas), so an attribute added to the language fails here
// until it has a sample value below and reaches what the daemon runs.

// roundTripBlocks says how to declare each block of the language: its
// top-level block, and the nested block when the path names one, each
// with the attributes it requires.
var roundTripBlocks = map[string]struct {
	top, nested              string
	required, nestedRequired map[string]string
	// wrap opens a block the nested one sits in (closed after it); extra
	// declares what the block refers to.
	wrap, extra string
}{
	"runner_class":        {top: `runner_class "c"`, required: map[string]string{"cpu": "2", "mem": `"4GiB"`}},
	"runner_class.queue":  {top: `runner_class "c"`, required: map[string]string{"cpu": "2", "mem": `"4GiB"`}, nested: "queue"},
	"runner_class.pickup": {top: `runner_class "c"`, required: map[string]string{"cpu": "2", "mem": `"4GiB"`}, nested: "pickup"},
	"budget":              {top: `budget "b"`},
	"vm_ceiling":          {top: `vm_ceiling "v"`, required: map[string]string{"max": "10"}},
	"vm_ceiling.usage.http": {top: `vm_ceiling "v"`, required: map[string]string{"max": "10"},
		nested: `usage "http"`, nestedRequired: map[string]string{"url": `"http://127.0.0.1:9/usage"`}},
	"vm_ceiling.usage.ec2": {top: `vm_ceiling "v"`, required: map[string]string{"max": "10"}, nested: `usage "ec2"`},
	"runner_class.fleet": {top: `runner_class "c"`, required: map[string]string{"cpu": "2", "mem": `"4GiB"`, "instance_types": `["c6i.large"]`},
		nested: "fleet", nestedRequired: map[string]string{"launch_template": `"runner"`, "vm_ceiling": `"aws"`, "usage_class": `"spot"`},
		extra: "vm_ceiling \"aws\" {\n  max = 10\n}\nvm_ceiling \"other\" {\n  max = 10\n}\n"},
	"runner_class.fleet.schedule": {top: `runner_class "c"`, required: map[string]string{"cpu": "2", "mem": `"4GiB"`, "instance_types": `["c6i.large"]`},
		wrap: "  fleet {\n    launch_template = \"runner\"\n    vm_ceiling = \"aws\"\n", nested: `schedule "day"`,
		nestedRequired: map[string]string{"cron": `"0 8 * * *"`, "duration": `"8h"`, "min_idle": "2"},
		extra:          "vm_ceiling \"aws\" {\n  max = 10\n}\n"},
	"pool":     {top: `pool "p"`, required: map[string]string{"slots": "2"}},
	"priority": {top: `priority "hi"`, required: map[string]string{"weight": "1"}},
}

// notInDocument are the blocks that configure the daemon itself (stack,
// listen address, token, backend): read from the configuration, never
// carried by the runtime document.
var notInDocument = []string{"rpd", "rpd.backend.local", "rpd.backend.aws", "rpd.ha", "rpd.tls", "token"}

// roundTripSamples are valid values that differ from each attribute's
// default (and from the required value the block is declared with).
var roundTripSamples = map[string]string{
	"runner_class.cpu": "4", "runner_class.mem": `"8GiB"`, "runner_class.instance_types": `["c6i.*"]`,
	"runner_class.allow_destroy": "true",
	"runner_class.queue.name":    `"other-queue"`, "runner_class.queue.visibility_timeout": `"45s"`,
	"runner_class.queue.retention": `"2d"`, "runner_class.queue.delay": `"5s"`,
	"runner_class.pickup.requeue_delay": `"7s"`, "runner_class.pickup.local_exhaustion": "9", "runner_class.pickup.claim_ttl": `"2m"`,
	"runner_class.pickup.mode": `"delete"`,
	"budget.scan_ring":         `"1GiB"`, "budget.delta_cache": `"2GiB"`, "budget.spill_slots": "4", "budget.max_queued": "5",
	"vm_ceiling.max": "20", "vm_ceiling.claim_ttl": `"5m"`, "vm_ceiling.poll_interval": `"10s"`,
	"vm_ceiling.stale_after": `"1m"`, "vm_ceiling.grant": `"immediate"`, "vm_ceiling.max_queued": "5",
	"vm_ceiling.usage.http.url": `"http://127.0.0.1:10/other"`, "vm_ceiling.usage.http.field": `"data.active"`,
	"vm_ceiling.usage.http.timeout": `"2s"`,
	"vm_ceiling.usage.ec2.unit":     `"vcpus"`, "vm_ceiling.usage.ec2.tags": `{ team = "ci" }`,
	"runner_class.fleet.launch_template": `"lt-0abc"`, "runner_class.fleet.version": `"3"`, "runner_class.fleet.usage_class": `"on-demand"`,
	"runner_class.fleet.fallback": `"none"`, "runner_class.fleet.vm_ceiling": `"other"`, "runner_class.fleet.subnets": `["subnet-1"]`,
	"runner_class.fleet.min_idle": "3", "runner_class.fleet.max_idle_age": `"30m"`, "runner_class.fleet.boot_timeout": `"2m"`,
	"runner_class.fleet.orphan_grace": `"3m"`, "runner_class.fleet.interval": `"5s"`, "runner_class.fleet.max_launch": "4",
	"runner_class.fleet.schedule.cron": `"0 9 * * MON-FRI"`, "runner_class.fleet.schedule.duration": `"4h"`,
	"runner_class.fleet.schedule.timezone": `"Europe/Berlin"`, "runner_class.fleet.schedule.min_idle": "5",
	"pool.slots": "5", "pool.description": `"heavy queries"`, "pool.lease_ttl": `"10m"`,
	"pool.max_queued": "3", "pool.allow_destroy": "true", "pool.max_wait": `"5s"`,
	"priority.weight": "7",
}

// setEnforced are the attributes a component set acts on itself rather
// than passing to a runtime package's configuration: the test checks they
// reach the document entry the set keeps; the set's own tests check what
// it does with them.
var setEnforced = map[string]string{
	"pool.allow_destroy":         "poolSet.commit marks the removed pool to drop its holders (TestRemovedPoolWithAllowDestroyDropsHolders)",
	"pool.max_wait":              "poolSet.acquire refuses a longer wait_seconds (TestPoolMaxWait)",
	"runner_class.allow_destroy": "reconcile's apply guard, which lets a non-empty queue be deleted",
}

// renderBlock declares the block of path with attribute attr set to value
// (none when attr is "").
func renderBlock(t *testing.T, path, attr, value string) string {
	t.Helper()
	b, ok := roundTripBlocks[path]
	if !ok {
		t.Fatalf("block %q of spec.Schema has no entry in roundTripBlocks: say how to declare it", path)
	}
	body := func(required map[string]string, set bool) string {
		attrs := maps.Clone(required)
		if attrs == nil {
			attrs = map[string]string{}
		}
		if set {
			attrs[attr] = value
		}
		var sb strings.Builder
		for _, k := range slices.Sorted(maps.Keys(attrs)) {
			fmt.Fprintf(&sb, "  %s = %s\n", k, attrs[k])
		}
		return sb.String()
	}
	if b.nested == "" {
		return b.extra + fmt.Sprintf("%s {\n%s}\n", b.top, body(b.required, attr != ""))
	}
	if b.wrap != "" {
		return b.extra + fmt.Sprintf("%s {\n%s%s  %s {\n%s  }\n  }\n}\n", b.top, body(b.required, false), b.wrap, b.nested, body(b.nestedRequired, attr != ""))
	}
	return b.extra + fmt.Sprintf("%s {\n%s  %s {\n%s  }\n}\n", b.top, body(b.required, false), b.nested, body(b.nestedRequired, attr != ""))
}

// componentView is everything the daemon derives from a document, through
// the same conversions a reload uses, keyed by address.
func componentView(doc *reconcile.RuntimeDoc) map[string]any {
	out := map[string]any{}
	for name, e := range doc.RunnerClasses {
		var fc fleet.Class
		if e.Fleet != (reconcile.FleetEntry{}) {
			fc, _ = fleetConfig(name, e.Fleet)
			fc.Ceiling = fleetCeiling{name: e.Fleet.VMCeiling, types: e.Fleet.InstanceTypes.Slice()}
		}
		out["runner_class."+name] = struct {
			Pickup pickup.Config
			Queue  string
			Attrs  backend.QueueAttributes
			Fleet  fleet.Class
		}{pickupConfig(name, e, doc.Queues[name].VisibilityTimeout, false), e.Queue, doc.Queues[name].Attributes(doc.Stack), fc}
	}
	for name, e := range doc.Budgets {
		out["budget."+name] = arbiter.BudgetConfig(e)
	}
	for name, e := range doc.VMCeilings {
		lc, src := arbiter.CeilingConfig(e)
		v := struct {
			Config ledger.Config
			Source ledger.HTTPSource
			EC2    ec2.UsageSource
		}{Config: lc}
		if src != nil {
			v.Source = *src
		}
		if e.Usage.Type == spec.UsageEC2 {
			v.EC2 = ec2.UsageSource{VCPUs: e.Usage.Unit == spec.UsageUnitCPUs, Tags: e.Usage.Tags.Map()}
		}
		out["vm_ceiling."+name] = v
	}
	for name, e := range arbiter.PoolEntries(doc) {
		out["pool."+name] = arbiter.PoolConfig(name, e)
	}
	for name, w := range arbiter.PriorityWeights(doc) {
		out["priority."+name] = w
	}
	return out
}

// serveDoc is the document a daemon reads in serve mode: HCL loaded,
// converted with DesiredDoc, encoded to the state store and decoded.
func serveDoc(t *testing.T, hcl string) *reconcile.RuntimeDoc {
	t.Helper()
	cfg, diags := spec.NewLoader().LoadSources(map[string][]byte{"main.hcl": []byte(hcl)}, spec.Vars{})
	if diags.HasErrors() {
		t.Fatalf("%s\n%s", hcl, diags.Error())
	}
	b, err := reconcile.DesiredDoc(cfg).Encode()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := reconcile.DecodeRuntimeDoc(b)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// entryOf returns the document entry at addr ("pool.p"), nil if none.
func entryOf(doc *reconcile.RuntimeDoc, addr string) any {
	typ, name, _ := strings.Cut(addr, ".")
	switch typ {
	case "runner_class":
		return doc.RunnerClasses[name]
	case "budget":
		return doc.Budgets[name]
	case "vm_ceiling":
		return doc.VMCeilings[name]
	case "pool":
		return doc.Pools[name]
	case "priority":
		return doc.Priorities[name]
	}
	return nil
}

func TestEveryAttributeReachesItsComponent(t *testing.T) {
	schema := spec.Schema()
	for _, path := range notInDocument {
		if _, ok := schema[path]; !ok {
			t.Errorf("notInDocument names %q, which spec.Schema does not have", path)
		}
		delete(schema, path)
	}
	covered := 0
	for _, path := range slices.Sorted(maps.Keys(schema)) {
		top, _, _ := strings.Cut(roundTripBlocks[path].top, " ")
		for _, attr := range schema[path] {
			key := path + "." + attr
			t.Run(key, func(t *testing.T) {
				value, ok := roundTripSamples[key]
				if !ok {
					t.Fatalf("no sample value for %s: add one to roundTripSamples (a valid value other than the default)", key)
				}
				base := serveDoc(t, renderBlock(t, path, "", ""))
				set := serveDoc(t, renderBlock(t, path, attr, value))
				var addr string
				for a := range componentView(set) {
					if strings.HasPrefix(a, top+".") && a != "pool."+spec.DefaultPoolName {
						addr = a
					}
				}
				if addr == "" {
					t.Fatalf("the document holds no %s", top)
				}
				if reflect.DeepEqual(entryOf(base, addr), entryOf(set, addr)) &&
					(path != "runner_class.queue" || base.Queues["c"] == set.Queues["c"]) {
					t.Fatalf("%s = %s does not reach the runtime document entry of %s (spec decode, or reconcile.DesiredDoc)", key, value, addr)
				}
				if _, ok := setEnforced[key]; ok {
					return
				}
				if reflect.DeepEqual(componentView(base)[addr], componentView(set)[addr]) {
					t.Fatalf("%s = %s reaches the document but not %s's component configuration: carry it in the daemon's conversion for %s, or list it in setEnforced with the code that acts on it", key, value, addr, top)
				}
			})
			covered++
		}
	}
	for key := range roundTripSamples {
		path, attr := key[:strings.LastIndex(key, ".")], key[strings.LastIndex(key, ".")+1:]
		if !slices.Contains(schema[path], attr) {
			t.Errorf("roundTripSamples has %s, which is not in spec.Schema", key)
		}
	}
	if covered < len(roundTripSamples) {
		t.Errorf("covered %d attributes, fewer than the %d samples", covered, len(roundTripSamples))
	}
}
