package reconcile

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/rpdhq/rpd/spec"
)

// FleetEntry is a runner class's fleet block in the runtime document: how
// many warm runners the class keeps and how rpd launches and reaps them
// (docs/fleet.md). The zero value means the class has no fleet.
type FleetEntry struct {
	LaunchTemplate string       `json:"launch_template"`
	Version        string       `json:"version"`
	UsageClass     string       `json:"usage_class"`
	Fallback       string       `json:"fallback"`
	VMCeiling      string       `json:"vm_ceiling"`
	InstanceTypes  StringList   `json:"instance_types"` // the class's concrete types: the launch overrides
	Subnets        StringList   `json:"subnets"`
	MinIdle        int          `json:"min_idle"`
	MaxIdleAge     Duration     `json:"max_idle_age"`
	BootTimeout    Duration     `json:"boot_timeout"`
	OrphanGrace    Duration     `json:"orphan_grace"`
	Interval       Duration     `json:"interval"`
	MaxLaunch      int          `json:"max_launch"`
	Schedules      ScheduleList `json:"schedules,omitzero"`
}

// ScheduleEntry is one schedule of a fleet.
type ScheduleEntry struct {
	Name     string   `json:"name"`
	Cron     string   `json:"cron"`
	Duration Duration `json:"duration"`
	Timezone string   `json:"timezone"`
	MinIdle  int      `json:"min_idle"`
}

// ScheduleList is a fleet's schedules held as one comparable value (its
// JSON text), so FleetEntry stays comparable. The zero value is none.
type ScheduleList struct{ text string }

// NewScheduleList returns the list holding ss, sorted by name.
func NewScheduleList(ss []ScheduleEntry) ScheduleList {
	if len(ss) == 0 {
		return ScheduleList{}
	}
	ss = slices.Clone(ss)
	slices.SortFunc(ss, func(a, b ScheduleEntry) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	b, _ := json.Marshal(ss) // plain values always marshal
	return ScheduleList{text: string(b)}
}

// Slice returns the schedules (a new slice).
func (l ScheduleList) Slice() []ScheduleEntry {
	var out []ScheduleEntry
	if l.text != "" {
		_ = json.Unmarshal([]byte(l.text), &out) // written by NewScheduleList
	}
	return out
}

// MarshalJSON writes a JSON array, or null for none.
func (l ScheduleList) MarshalJSON() ([]byte, error) {
	if l.text == "" {
		return []byte("null"), nil
	}
	return []byte(l.text), nil
}

// UnmarshalJSON reads a JSON array of schedules or null.
func (l *ScheduleList) UnmarshalJSON(b []byte) error {
	var ss []ScheduleEntry
	if err := json.Unmarshal(b, &ss); err != nil {
		return fmt.Errorf("must be a list of schedules: %w", err)
	}
	*l = NewScheduleList(ss)
	return nil
}

// String renders the list as JSON, for logs.
func (l ScheduleList) String() string {
	b, _ := l.MarshalJSON()
	return string(b)
}

// planValues flattens the schedules for the plan, one attribute each:
// "fleet.schedule.weekdays.cron".
func (l ScheduleList) planValues(out Values, key string) {
	base := key[:len(key)-len("schedules")] + "schedule."
	for _, s := range l.Slice() {
		p := base + s.Name + "."
		out[p+"cron"] = s.Cron
		out[p+"duration"] = s.Duration.String()
		out[p+"timezone"] = s.Timezone
		out[p+"min_idle"] = s.MinIdle
	}
}

// StringMap is a map of strings held as one comparable value (its JSON
// text, keys sorted). The zero value is the empty map.
type StringMap struct{ text string }

// NewStringMap returns the map holding m (copied).
func NewStringMap(m map[string]string) StringMap {
	if len(m) == 0 {
		return StringMap{}
	}
	b, _ := json.Marshal(m) // sorted keys
	return StringMap{text: string(b)}
}

// Map returns a new map of the entries.
func (m StringMap) Map() map[string]string {
	out := map[string]string{}
	if m.text != "" {
		_ = json.Unmarshal([]byte(m.text), &out) // written by NewStringMap
	}
	return out
}

// MarshalJSON writes a JSON object, or null for the empty map.
func (m StringMap) MarshalJSON() ([]byte, error) {
	if m.text == "" {
		return []byte("null"), nil
	}
	return []byte(m.text), nil
}

// UnmarshalJSON reads a JSON object of strings or null.
func (m *StringMap) UnmarshalJSON(b []byte) error {
	var mm map[string]string
	if err := json.Unmarshal(b, &mm); err != nil {
		return fmt.Errorf("must be a map of strings: %w", err)
	}
	*m = NewStringMap(mm)
	return nil
}

// String renders the map as JSON, for logs.
func (m StringMap) String() string {
	b, _ := m.MarshalJSON()
	return string(b)
}

func (m StringMap) planValues(out Values, key string) {
	if m.text != "" {
		out[key] = m.Map()
	}
}

// fleetEntry converts a class's fleet block; nil is the zero entry.
func fleetEntry(c spec.RunnerClass) FleetEntry {
	f := c.Fleet
	if f == nil {
		return FleetEntry{}
	}
	var ss []ScheduleEntry
	for _, s := range f.Schedules {
		ss = append(ss, ScheduleEntry{Name: s.Name, Cron: s.Cron, Duration: Duration(s.Duration), Timezone: s.Timezone, MinIdle: s.MinIdle})
	}
	return FleetEntry{
		LaunchTemplate: f.LaunchTemplate, Version: f.Version, UsageClass: f.UsageClass, Fallback: f.Fallback,
		VMCeiling: f.VMCeiling, InstanceTypes: NewStringList(spec.ConcreteTypes(c.InstanceTypes)), Subnets: NewStringList(f.Subnets),
		MinIdle: f.MinIdle, MaxIdleAge: Duration(f.MaxIdleAge), BootTimeout: Duration(f.BootTimeout),
		OrphanGrace: Duration(f.OrphanGrace), Interval: Duration(f.Interval), MaxLaunch: f.MaxLaunch,
		Schedules: NewScheduleList(ss),
	}
}

// usageEntry converts a ceiling's usage block; nil is the zero entry.
func usageEntry(u *spec.UsageSource) UsageEntry {
	if u == nil {
		return UsageEntry{}
	}
	return UsageEntry{Type: u.Type, URL: u.URL, Field: u.Field, Timeout: Duration(u.Timeout), Unit: u.Unit, Tags: NewStringMap(maps.Clone(u.Tags))}
}
