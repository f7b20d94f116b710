package reconcile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/spec"
)

// RuntimeDocFormat is the format version of the runtime document. Decode
// refuses documents written by a newer rpd.
const RuntimeDocFormat = 1

// RuntimeDoc is the runtime configuration of one stack as rpd apply last
// wrote it to the backend's state store. Daemons follow it (rpd serve reads
// it and hot-applies each new version); rpd plan diffs against it.
//
// Besides the runtime resources it records, for every queue rpd manages,
// the attributes rpd last applied: that is how plan tells drift (the queue
// changed out of band) from a configuration change, and how it finds a
// managed queue whose class was removed.
type RuntimeDoc struct {
	FormatVersion int    `json:"format_version"`
	Stack         string `json:"stack"`
	// Lineage identifies this state since its first apply; a saved plan
	// made against another state (same stack name, other backend) is
	// refused.
	Lineage string `json:"lineage,omitempty"`

	RunnerClasses map[string]ClassEntry    `json:"runner_classes"`
	Budgets       map[string]BudgetEntry   `json:"budgets"`
	VMCeilings    map[string]CeilingEntry  `json:"vm_ceilings"`
	Pools         map[string]PoolEntry     `json:"pools"`
	Priorities    map[string]PriorityEntry `json:"priorities"`
	// Queues is keyed by runner class name.
	Queues map[string]QueueEntry `json:"queues"`
	// Creating maps the names of queues apply is creating, or created
	// without recording them yet, to their class. Apply writes it before
	// creating queues, so that a queue created by an apply that was then
	// interrupted is still found (and deleted, if its class is gone),
	// whatever its name.
	Creating map[string]string `json:"creating,omitempty"`
}

// The entries below are the runtime document's resources, one type per kind.
// They are comparable values (no pointers, maps or slices), so two entries
// configure a component alike exactly when they are ==; the plan renders
// their attributes by reflection (entryValues), named by their JSON tags.

// ClassEntry is a runner class's runtime settings.
type ClassEntry struct {
	Queue           string     `json:"queue"` // the queue's name
	CPU             int        `json:"cpu"`
	Mem             uint64     `json:"mem"` // bytes
	InstanceTypes   StringList `json:"instance_types"`
	RequeueDelay    Duration   `json:"requeue_delay"`
	LocalExhaustion int        `json:"local_exhaustion"`
	Mode            string     `json:"mode"`
	ClaimTTL        Duration   `json:"claim_ttl,omitempty"` // 0 = claims need no confirmation
	AllowDestroy    bool       `json:"allow_destroy,omitempty"`
	// Fleet is zero unless the class declares a fleet (fleet_doc.go).
	Fleet FleetEntry `json:"fleet,omitzero"`
}

// BudgetEntry is a fat-job budget (a budget block).
type BudgetEntry struct {
	ScanRing   uint64      `json:"scan_ring"`   // bytes
	DeltaCache uint64      `json:"delta_cache"` // bytes
	SpillSlots OptionalInt `json:"spill_slots"` // unset = unlimited
	MaxQueued  int         `json:"max_queued"`  // waiting permits; 0 = unbounded
}

// CeilingEntry is a VM ceiling (a vm_ceiling block).
type CeilingEntry struct {
	Max          int        `json:"max"`
	ClaimTTL     Duration   `json:"claim_ttl"`
	PollInterval Duration   `json:"poll_interval"`
	StaleAfter   Duration   `json:"stale_after"`
	Grant        string     `json:"grant"`
	MaxQueued    int        `json:"max_queued"`     // waiting claims and tickets; 0 = unbounded
	Usage        UsageEntry `json:"usage,omitzero"` // zero: figures are pushed (PUT .../usage)
}

// UsageEntry is a VM ceiling's usage source.
type UsageEntry struct {
	Type    string   `json:"type"`
	URL     string   `json:"url"`
	Field   string   `json:"field"`
	Timeout Duration `json:"timeout"`
	// Unit and Tags are an ec2 source's (zero for http).
	Unit string    `json:"unit,omitempty" plan:"omitzero"`
	Tags StringMap `json:"tags,omitzero" plan:"omitzero"`
}

// PoolEntry is a named pool (a pool block).
type PoolEntry struct {
	Slots        int      `json:"slots"`
	Description  string   `json:"description,omitempty"`
	LeaseTTL     Duration `json:"lease_ttl"`
	MaxQueued    int      `json:"max_queued"`
	MaxWait      Duration `json:"max_wait,omitzero"` // 0: no bound on wait_seconds
	AllowDestroy bool     `json:"allow_destroy,omitempty"`
}

// PriorityEntry is a named priority weight.
type PriorityEntry struct {
	Weight int `json:"weight"`
}

// QueueEntry records a queue as rpd applied it.
type QueueEntry struct {
	Name              string   `json:"name"`
	VisibilityTimeout Duration `json:"visibility_timeout"`
	Retention         Duration `json:"retention"`
	Delay             Duration `json:"delay"`
	// Retired marks a queue whose class is gone and which apply is about
	// to delete; it stays recorded until the delete succeeds so that an
	// interrupted apply still finds it.
	Retired bool `json:"retired,omitempty"`
}

// Attributes converts the entry to what a QueueAdmin takes, tagged with stack.
func (q QueueEntry) Attributes(stack string) backend.QueueAttributes {
	return backend.QueueAttributes{
		VisibilityTimeout: time.Duration(q.VisibilityTimeout),
		Retention:         time.Duration(q.Retention),
		Delay:             time.Duration(q.Delay),
		Tags:              map[string]string{backend.StackTag: stack},
	}
}

// ErrDocFormat: the runtime document was written by a newer rpd, or is not
// a runtime document.
var ErrDocFormat = errors.New("unsupported runtime document")

// NewRuntimeDoc returns an empty document for stack.
func NewRuntimeDoc(stack string) *RuntimeDoc {
	return &RuntimeDoc{
		FormatVersion: RuntimeDocFormat,
		Stack:         stack,
		RunnerClasses: map[string]ClassEntry{},
		Budgets:       map[string]BudgetEntry{},
		VMCeilings:    map[string]CeilingEntry{},
		Pools:         map[string]PoolEntry{},
		Priorities:    map[string]PriorityEntry{},
		Queues:        map[string]QueueEntry{},
		Creating:      map[string]string{},
	}
}

// Encode renders the document as indented JSON with sorted keys, so equal
// documents encode to equal bytes.
func (d *RuntimeDoc) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode runtime document: %w", err)
	}
	return append(b, '\n'), nil
}

// DecodeRuntimeDoc parses a document written by Encode. Unknown fields and
// newer format versions are errors wrapping ErrDocFormat: a daemon must not
// run a configuration it only half understands.
func DecodeRuntimeDoc(b []byte) (*RuntimeDoc, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	d := NewRuntimeDoc("")
	d.FormatVersion = 0
	if err := dec.Decode(d); err != nil {
		return nil, fmt.Errorf("%w: %v; the state store holds something rpd cannot read — inspect it, or restore it from a backup", ErrDocFormat, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the document; the state store holds something rpd cannot read — inspect it, or restore it from a backup", ErrDocFormat)
	}
	switch {
	case d.FormatVersion == 0:
		return nil, fmt.Errorf("%w: no format_version, so it was not written by rpd; inspect the state store, or restore it from a backup", ErrDocFormat)
	case d.FormatVersion > RuntimeDocFormat:
		return nil, fmt.Errorf("%w: format_version %d was written by a newer rpd (this one reads up to %d); upgrade rpd", ErrDocFormat, d.FormatVersion, RuntimeDocFormat)
	}
	d.fillMaps()
	return d, nil
}

func (d *RuntimeDoc) fillMaps() {
	if d.RunnerClasses == nil {
		d.RunnerClasses = map[string]ClassEntry{}
	}
	if d.Budgets == nil {
		d.Budgets = map[string]BudgetEntry{}
	}
	if d.VMCeilings == nil {
		d.VMCeilings = map[string]CeilingEntry{}
	}
	if d.Pools == nil {
		d.Pools = map[string]PoolEntry{}
	}
	if d.Priorities == nil {
		d.Priorities = map[string]PriorityEntry{}
	}
	if d.Queues == nil {
		d.Queues = map[string]QueueEntry{}
	}
	if d.Creating == nil {
		d.Creating = map[string]string{}
	}
}

// Clone returns a deep copy (entries are values, so copying the maps is
// enough).
func (d *RuntimeDoc) Clone() *RuntimeDoc {
	c := *d
	c.RunnerClasses = maps.Clone(d.RunnerClasses)
	c.Budgets = maps.Clone(d.Budgets)
	c.VMCeilings = maps.Clone(d.VMCeilings)
	c.Pools = maps.Clone(d.Pools)
	c.Priorities = maps.Clone(d.Priorities)
	c.Queues = maps.Clone(d.Queues)
	c.Creating = maps.Clone(d.Creating)
	c.fillMaps()
	return &c
}

// DefaultQueueName is the queue name of a class that does not set one.
func DefaultQueueName(stack, class string) string { return stack + "-rp-" + class }

// DesiredDoc converts a loaded configuration into the runtime document that
// applying it would produce (without lineage).
func DesiredDoc(cfg *spec.Config) *RuntimeDoc {
	d := NewRuntimeDoc(cfg.Stack)
	for _, c := range cfg.RunnerClasses {
		qn := c.Queue.Name
		if qn == "" {
			qn = DefaultQueueName(cfg.Stack, c.Name)
		}
		d.RunnerClasses[c.Name] = ClassEntry{
			Queue:           qn,
			CPU:             c.CPU,
			Mem:             c.Mem,
			InstanceTypes:   NewStringList(c.InstanceTypes),
			RequeueDelay:    Duration(c.Pickup.RequeueDelay),
			LocalExhaustion: c.Pickup.LocalExhaustion,
			Mode:            c.Pickup.Mode,
			ClaimTTL:        Duration(c.Pickup.ClaimTTL),
			AllowDestroy:    c.AllowDestroy,
			Fleet:           fleetEntry(c),
		}
		d.Queues[c.Name] = QueueEntry{
			Name:              qn,
			VisibilityTimeout: Duration(c.Queue.VisibilityTimeout),
			Retention:         Duration(c.Queue.Retention),
			Delay:             Duration(c.Queue.Delay),
		}
	}
	for _, b := range cfg.Budgets {
		e := BudgetEntry{ScanRing: b.ScanRing, DeltaCache: b.DeltaCache, MaxQueued: b.MaxQueued}
		if b.SpillSlots != nil {
			e.SpillSlots = OptionalInt{Value: *b.SpillSlots, Set: true}
		}
		d.Budgets[b.Name] = e
	}
	for _, v := range cfg.VMCeilings {
		e := CeilingEntry{
			Max:          v.Max,
			ClaimTTL:     Duration(v.ClaimTTL),
			PollInterval: Duration(v.PollInterval),
			StaleAfter:   Duration(v.StaleAfter),
			Grant:        v.Grant,
			MaxQueued:    v.MaxQueued,
		}
		e.Usage = usageEntry(v.Usage)
		d.VMCeilings[v.Name] = e
	}
	for _, p := range cfg.Pools {
		d.Pools[p.Name] = PoolEntry{Slots: p.Slots, Description: p.Description, LeaseTTL: Duration(p.LeaseTTL), MaxQueued: p.MaxQueued, MaxWait: Duration(p.MaxWait), AllowDestroy: p.AllowDestroy}
	}
	for _, p := range cfg.Priorities {
		d.Priorities[p.Name] = PriorityEntry{Weight: p.Weight}
	}
	return d
}

// Duration is a time.Duration that reads and writes JSON as a string in
// rpd's duration syntax ("30s", "4d"), so the runtime document reads like
// the configuration.
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a string in rpd's duration syntax.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"30s\": %w", err)
	}
	v, err := spec.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("bad duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// String renders the duration as the configuration would: "30s", "4d".
func (d Duration) String() string { return spec.FormatDuration(time.Duration(d)) }

// OptionalInt is an int that may be unset (JSON null). Unlike *int it is
// comparable, so the entries holding it are.
type OptionalInt struct {
	Value int
	Set   bool
}

// MarshalJSON writes the value, or null when unset.
func (o OptionalInt) MarshalJSON() ([]byte, error) {
	if !o.Set {
		return []byte("null"), nil
	}
	return json.Marshal(o.Value)
}

// String renders the value, or "unset", for logs.
func (o OptionalInt) String() string {
	if !o.Set {
		return "unset"
	}
	return strconv.Itoa(o.Value)
}

// UnmarshalJSON reads a number or null.
func (o *OptionalInt) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*o = OptionalInt{}
		return nil
	}
	var n int
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("must be an integer or null: %w", err)
	}
	*o = OptionalInt{Value: n, Set: true}
	return nil
}

// StringList is a list of strings held as one comparable value (its
// compact JSON text). The zero value is the empty list, written as null.
type StringList struct{ text string }

// NewStringList returns the list holding ss (copied).
func NewStringList(ss []string) StringList {
	if len(ss) == 0 {
		return StringList{}
	}
	b, _ := json.Marshal(ss) // a []string always marshals
	return StringList{text: string(b)}
}

// Slice returns a new slice of the list's strings (empty, not nil, when
// the list is).
func (l StringList) Slice() []string {
	out := []string{}
	if l.text != "" {
		_ = json.Unmarshal([]byte(l.text), &out) // written by NewStringList
	}
	return out
}

// MarshalJSON writes a JSON array, or null for the empty list.
func (l StringList) MarshalJSON() ([]byte, error) {
	if l.text == "" {
		return []byte("null"), nil
	}
	return []byte(l.text), nil
}

// UnmarshalJSON reads a JSON array of strings or null.
func (l *StringList) UnmarshalJSON(b []byte) error {
	var ss []string
	if err := json.Unmarshal(b, &ss); err != nil {
		return fmt.Errorf("must be a list of strings: %w", err)
	}
	*l = NewStringList(ss)
	return nil
}

// String renders the list as JSON, for logs.
func (l StringList) String() string {
	b, _ := l.MarshalJSON()
	return string(b)
}
