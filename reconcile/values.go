package reconcile

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/spec"
)

// Values are a resource's attributes as the plan shows them: attribute name
// to a JSON value (string, number, bool, list of strings, map of strings, or
// nil). Sizes and durations are rendered as strings ("4GiB", "30s") so that
// a reader sees what they wrote.
type Values map[string]any

// ChangedAttributes lists, sorted, the attributes whose values differ
// between before and after (present in either).
func ChangedAttributes(before, after Values) []string {
	var out []string
	for k, a := range after {
		if b, ok := before[k]; !ok || !valueEqual(a, b) {
			out = append(out, k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// valueEqual compares through JSON so that values read back from a saved
// plan (json.Number, []any) compare equal to freshly built ones.
func valueEqual(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

func sizeValue(n uint64) string { return spec.FormatSize(n) }

func (q QueueEntry) values(stack string) Values {
	return Values{
		"name":               q.Name,
		"visibility_timeout": q.VisibilityTimeout.String(),
		"retention":          q.Retention.String(),
		"delay":              q.Delay.String(),
		"tags":               map[string]string{backend.StackTag: stack},
	}
}

func (c ClassEntry) values() Values {
	types := c.InstanceTypes
	if types == nil {
		types = []string{}
	}
	return Values{
		"queue":            c.Queue,
		"cpu":              c.CPU,
		"mem":              sizeValue(c.Mem),
		"instance_types":   types,
		"requeue_delay":    c.RequeueDelay.String(),
		"local_exhaustion": c.LocalExhaustion,
		"mode":             c.Mode,
		"allow_destroy":    c.AllowDestroy,
	}
}

func (b BudgetEntry) values() Values {
	v := Values{"scan_ring": sizeValue(b.ScanRing), "delta_cache": sizeValue(b.DeltaCache), "spill_slots": nil}
	if b.SpillSlots != nil {
		v["spill_slots"] = *b.SpillSlots
	}
	return v
}

func (c CeilingEntry) values() Values {
	v := Values{
		"max":           c.Max,
		"claim_ttl":     c.ClaimTTL.String(),
		"poll_interval": c.PollInterval.String(),
		"stale_after":   c.StaleAfter.String(),
		"grant":         c.Grant,
	}
	if c.Usage != nil {
		v["usage.type"] = c.Usage.Type
		v["usage.url"] = c.Usage.URL
		v["usage.field"] = c.Usage.Field
		v["usage.timeout"] = c.Usage.Timeout.String()
	}
	return v
}

func (p PoolEntry) values() Values {
	return Values{
		"slots":         p.Slots,
		"description":   p.Description,
		"lease_ttl":     p.LeaseTTL.String(),
		"max_queued":    p.MaxQueued,
		"allow_destroy": p.AllowDestroy,
	}
}

func (p PriorityEntry) values() Values { return Values{"weight": p.Weight} }
