package reconcile

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/spec"
)

// PlanFormat is the format version of a saved plan (Plan's JSON encoding).
const PlanFormat = 1

// DefaultParallelism bounds concurrent backend calls during refresh and apply.
const DefaultParallelism = 10

// Plan is the difference between a configuration and live state, as inert
// data: MakePlan computes it, views render it, Apply executes it. A Plan
// encoded to JSON is a saved plan (rpd plan -out) and carries everything
// Apply needs, including the desired runtime document, so applying it does
// not read the configuration again.
type Plan struct {
	FormatVersion int            `json:"format_version"`
	Stack         string         `json:"stack"`
	Backend       backend.Config `json:"backend"`
	// Lineage and StateVersion identify the state the plan was made
	// against; Apply refuses the plan when either changed.
	Lineage      string `json:"lineage"`
	StateVersion int64  `json:"state_version"`
	RefreshOnly  bool   `json:"refresh_only,omitempty"`
	// Destroy plans the removal of everything the stack manages: every
	// queue and runtime resource (default_pool included), leaving an empty
	// runtime document, and the LeaseRecords the daemon recorded.
	Destroy bool `json:"destroy,omitempty"`
	// LeaseRecords counts, in a destroy plan, the grants (pool leases,
	// permits, claims) recorded in the backend that apply removes.
	LeaseRecords int `json:"lease_records,omitempty"`
	// AllowDestroyNonEmpty was given when planning: the guards let
	// destructive changes through, and apply honours it too.
	AllowDestroyNonEmpty bool `json:"allow_destroy_nonempty,omitempty"`
	// Targets, when set, limited the plan to these addresses and what they
	// depend on.
	Targets []Address `json:"targets,omitempty"`

	// Changes holds one entry per resource (no-ops included) in dependency
	// order: tables, queues, then runtime resources by type and name.
	Changes  []ResourceChange `json:"changes"`
	Drift    []Drift          `json:"drift"`
	Warnings []Warning        `json:"warnings"`

	// Fingerprints maps every object refreshed from the backend ("queue
	// NAME", "table NAME") to a hash of its managed attributes ("absent"
	// when it did not exist). Apply refreshes them again and refuses a
	// stale plan.
	Fingerprints map[string]string `json:"fingerprints"`
	// Desired is the runtime document the configuration asks for.
	Desired *RuntimeDoc `json:"desired"`
	// LiveQueues holds, per runner class, the managed queue as found live
	// (absent when it did not exist); apply records it as applied.
	LiveQueues map[string]QueueEntry `json:"live_queues"`
	// Forget lists classes whose recorded queue is already gone; apply
	// drops them from the runtime document.
	Forget []string `json:"forget,omitempty"`

	// Checksum guards a saved plan against corruption and hand edits; see
	// EncodePlan.
	Checksum string `json:"checksum,omitempty"`
}

// BackendConfigOf copies the parts of a spec.Backend a saved plan keeps, so
// that applying it opens the backend it was made against.
func BackendConfigOf(b spec.Backend) backend.Config {
	return backend.Config{Type: b.Type, Path: b.Path, NormalPrioritySync: b.NormalPrioritySync, Region: b.Region, Profile: b.Profile, TablePrefix: b.TablePrefix}
}

// ResourceChange is the planned change of one resource.
//
// Before is the live object (nil for Create); After is the desired one
// (nil for Delete). For NoOp both are set and equal. ReplacePaths lists
// the attributes that cannot change in place and force DeleteThenCreate.
type ResourceChange struct {
	Address      Address    `json:"address"`
	Action       Action     `json:"actions"`
	Before       Values     `json:"before"`
	After        Values     `json:"after"`
	ReplacePaths [][]string `json:"replace_paths,omitempty"`
}

// Drift is an object that changed since rpd last applied it. Before is
// what rpd applied; After is what is live (nil: deleted out of band).
type Drift struct {
	Address Address `json:"address"`
	Before  Values  `json:"before"`
	After   Values  `json:"after"`
}

// Warning is a live impact of a planned change.
type Warning struct {
	Address Address `json:"address"`
	Summary string  `json:"summary"`
}

// Summary counts a plan the way Terraform does: a replacement is one add
// and one destroy.
type Summary struct {
	Add     int `json:"add"`
	Change  int `json:"change"`
	Destroy int `json:"destroy"`
}

// Summary counts the plan's changes.
func (p *Plan) Summary() Summary {
	var s Summary
	for _, c := range p.Changes {
		switch c.Action {
		case Create:
			s.Add++
		case Update:
			s.Change++
		case Delete:
			s.Destroy++
		case DeleteThenCreate:
			s.Add++
			s.Destroy++
		}
	}
	return s
}

// HasChanges reports whether applying the plan would change anything: a
// resource change, or for a refresh-only plan, drift to record.
func (p *Plan) HasChanges() bool {
	if p.RefreshOnly {
		return len(p.Drift) > 0 || len(p.Forget) > 0
	}
	if p.LeaseRecords > 0 {
		return true
	}
	for _, c := range p.Changes {
		if c.Action != NoOp {
			return true
		}
	}
	return false
}

// MarshalJSON writes the action as Terraform's list of action names.
func (a Action) MarshalJSON() ([]byte, error) { return json.Marshal(a.Actions()) }

// UnmarshalJSON reads a list of action names.
func (a *Action) UnmarshalJSON(b []byte) error {
	var s []string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("actions must be a list of strings: %w", err)
	}
	v, ok := actionFromStrings(s)
	if !ok {
		return fmt.Errorf("unknown actions %q", s)
	}
	*a = v
	return nil
}

// Errors of MakePlan.
var (
	// ErrNotManaged: a live object has the name of a declared one but is
	// not tagged with this stack. rpd never adopts or deletes it.
	ErrNotManaged = errors.New("not managed by this rpd stack")
	// ErrUnknownTarget: a -target address matches no resource.
	ErrUnknownTarget = errors.New("target matches no resource")
	// ErrWrongStack: the state store holds another stack's document.
	ErrWrongStack = errors.New("state belongs to another stack")
)

// Refusals is the error of a plan (or apply) that guards refused: one
// refusal per change, each matching ErrGuard.
type Refusals []error

func (r Refusals) Error() string {
	msgs := make([]string, len(r))
	for i, e := range r {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap returns the refusals, for errors.Is and errors.As.
func (r Refusals) Unwrap() []error { return r }
