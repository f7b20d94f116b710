package reconcile

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"

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

// entryValues renders a runtime entry's attributes for the plan, one per
// JSON field and named by its tag: byte sizes (uint64) and durations as
// written ("4GiB", "30s"), an unset OptionalInt as nil, a nested entry
// (a ceiling's usage) flattened as "usage.url" when set. A new field of an
// entry is shown by plan without further code.
func entryValues(e any) Values {
	out := Values{}
	addValues(out, "", reflect.ValueOf(e))
	return out
}

func addValues(out Values, prefix string, v reflect.Value) {
	t := v.Type()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		key, f := prefix+name, v.Field(i)
		if t.Field(i).Tag.Get("plan") == "omitzero" && f.IsZero() {
			continue
		}
		switch x := f.Interface().(type) {
		case interface{ planValues(Values, string) }:
			x.planValues(out, key)
		case Duration:
			out[key] = x.String()
		case uint64:
			out[key] = sizeValue(x)
		case OptionalInt:
			out[key] = nil
			if x.Set {
				out[key] = x.Value
			}
		case StringList:
			out[key] = x.Slice()
		default:
			if f.Kind() == reflect.Struct {
				if !f.IsZero() {
					addValues(out, key+".", f)
				}
				continue
			}
			out[key] = x
		}
	}
}
