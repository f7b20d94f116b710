package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/runtime/pickup"
	"github.com/rpdhq/rpd/runtime/pools"
)

// Format names the file format; Restore refuses any other.
const Format = "rpd-backup/1"

// Snapshot is a backup of one stack's backend. Its JSON form is the backup
// file.
type Snapshot struct {
	Format string    `json:"format"`
	Stack  string    `json:"stack"`
	Taken  time.Time `json:"taken_at"`
	// From describes the backend it was taken from ("local backend
	// .rpd/state.db"); RPDVersion the rpd that took it.
	From       string `json:"from"`
	RPDVersion string `json:"rpd_version"`
	// Leader is the leader record at the time, for the record only: it is
	// never restored.
	Leader *Leader `json:"leader,omitempty"`
	// State is the state document, byte for byte, and its version.
	State        []byte            `json:"state"`
	StateVersion int64             `json:"state_version"`
	PoolLeases   []PoolLease       `json:"pool_leases"`
	Grants       []Grant           `json:"grants"`
	Instances    []pickup.Instance `json:"instances"`
}

// Leader is the leader record a snapshot saw.
type Leader struct {
	Holder  string `json:"holder"`
	Address string `json:"address"`
	Epoch   int64  `json:"epoch"`
}

// PoolLease is one pool lease record (pools.LeaseRecord with a stable JSON
// form).
type PoolLease struct {
	LeaseID   string        `json:"lease_id"`
	Pool      string        `json:"pool"`
	TaskID    string        `json:"task_id"`
	Priority  int           `json:"priority"`
	Slots     int           `json:"slots"`
	GrantedAt time.Time     `json:"granted_at"`
	ExpiresAt time.Time     `json:"expires_at,omitzero"`
	TTL       time.Duration `json:"ttl_ns,omitempty"`
	// Owner is the principal that took the lease (docs/security.md).
	Owner string `json:"owner,omitempty"`
}

// Grant is one budget permit or VM-ceiling claim record: its ID and the
// daemon's record, byte for byte.
type Grant struct {
	ID   string `json:"id"`
	Body []byte `json:"body"`
}

// Stores is what Take reads and Restore writes: the backend's stores, as
// internal/open assembles them.
type Stores struct {
	State     backend.StateStore
	Leader    backend.LeaderStore
	Pools     pools.Store
	Grants    backend.GrantStore
	Instances pickup.InstanceTable
}

// maxAttempts bounds Take's retries while applies or takeovers keep
// changing what it reads.
const maxAttempts = 5

// ErrBusy: the stack kept changing (applies, takeovers) during every
// attempt of Take.
var ErrBusy = errors.New("the stack's state version or leader changed during every attempt to read it; retry when no apply or failover is under way")

// Take reads the stack's backend: the state document, every grant and the
// instance records of classes. It takes no lock and writes nothing; see the
// package comment for what makes it consistent.
func Take(ctx context.Context, s Stores, stack string, classes []string) (*Snapshot, error) {
	for range maxAttempts {
		snap, stable, err := take(ctx, s, stack, classes)
		if err != nil || stable {
			return snap, err
		}
	}
	return nil, ErrBusy
}

func take(ctx context.Context, s Stores, stack string, classes []string) (*Snapshot, bool, error) {
	before, err := s.Leader.ReadLeader(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("read the leader record: %w", err)
	}
	snap := &Snapshot{Format: Format, Stack: stack, Taken: time.Now().UTC(), PoolLeases: []PoolLease{}, Grants: []Grant{}, Instances: []pickup.Instance{}}
	if snap.State, snap.StateVersion, err = s.State.ReadState(ctx); err != nil {
		return nil, false, fmt.Errorf("read the state document: %w", err)
	}
	leases, err := s.Pools.LoadLeases(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("read the pool leases: %w", err)
	}
	for _, r := range leases {
		snap.PoolLeases = append(snap.PoolLeases, PoolLease(r))
	}
	slices.SortFunc(snap.PoolLeases, func(a, b PoolLease) int { return strings.Compare(a.LeaseID, b.LeaseID) })
	grants, err := s.Grants.LoadGrants(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("read the permits and claims: %w", err)
	}
	for _, id := range slices.Sorted(maps.Keys(grants)) {
		snap.Grants = append(snap.Grants, Grant{ID: id, Body: grants[id]})
	}
	for _, class := range classes {
		insts, err := s.Instances.List(ctx, class, "")
		if err != nil && !errors.Is(err, backend.ErrTableMissing) {
			return nil, false, fmt.Errorf("read the instances of runner class %s: %w", class, err)
		}
		snap.Instances = append(snap.Instances, insts...)
	}
	_, version, err := s.State.ReadState(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("read the state document: %w", err)
	}
	after, err := s.Leader.ReadLeader(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("read the leader record: %w", err)
	}
	if after.Holder != "" {
		snap.Leader = &Leader{Holder: after.Holder, Address: after.Address, Epoch: after.Epoch}
	}
	return snap, version == snap.StateVersion && after.Epoch == before.Epoch, nil
}

// Write encodes snap as the backup file.
func Write(w io.Writer, snap *Snapshot) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(snap); err != nil {
		return fmt.Errorf("write the backup: %w", err)
	}
	return nil
}

// Read decodes a backup file, refusing another format.
func Read(r io.Reader) (*Snapshot, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var snap Snapshot
	if err := dec.Decode(&snap); err != nil {
		return nil, fmt.Errorf("read the backup: %w (is it a file rpd backup wrote?)", err)
	}
	if snap.Format != Format {
		return nil, fmt.Errorf("read the backup: format %q; this rpd restores %q", snap.Format, Format)
	}
	return &snap, nil
}

// RestoreOptions tune Restore.
type RestoreOptions struct {
	// Force restores into a backend that is not empty, or whose stack a
	// daemon leads, or of another stack name: records of the same ID are
	// replaced, others kept, and the state document overwritten.
	Force bool
	// Now is the clock that tells a live leader (nil: time.Now).
	Now func() time.Time
}

// NotEmptyError: Restore refused a backend that holds something, or whose
// stack a daemon leads.
type NotEmptyError struct{ Reasons []string }

func (e *NotEmptyError) Error() string {
	return fmt.Sprintf("refusing to restore into a backend that is in use (%s): restore into an empty one, stop the daemons, or force it", strings.Join(e.Reasons, "; "))
}

// Restore writes snap into the stack's backend (stack is the target's
// stack name): the state document, every grant under its ID, every
// instance record. It refuses a backend in use unless opts.Force; on a
// failure part way, what was written stays, and a forced restore of the
// same backup completes it.
func Restore(ctx context.Context, s Stores, stack string, snap *Snapshot, opts RestoreOptions) error {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	_, version, err := s.State.ReadState(ctx)
	if err != nil {
		return fmt.Errorf("read the target's state document: %w", err)
	}
	if !opts.Force {
		var reasons []string
		if snap.Stack != stack {
			reasons = append(reasons, fmt.Sprintf("the backup is of stack %q, the configuration names stack %q", snap.Stack, stack))
		}
		if l, err := s.Leader.ReadLeader(ctx); err != nil {
			return fmt.Errorf("read the target's leader record: %w", err)
		} else if l.Live(now()) {
			reasons = append(reasons, fmt.Sprintf("a daemon leads stack %s (%s at %s)", stack, l.Holder, l.Address))
		}
		if version != 0 {
			reasons = append(reasons, fmt.Sprintf("it holds a state document (version %d)", version))
		}
		if leases, err := s.Pools.LoadLeases(ctx); err != nil {
			return fmt.Errorf("read the target's pool leases: %w", err)
		} else if len(leases) > 0 {
			reasons = append(reasons, fmt.Sprintf("it holds %d pool lease(s)", len(leases)))
		}
		if grants, err := s.Grants.LoadGrants(ctx); err != nil {
			return fmt.Errorf("read the target's permits and claims: %w", err)
		} else if len(grants) > 0 {
			reasons = append(reasons, fmt.Sprintf("it holds %d permit(s) and claim(s)", len(grants)))
		}
		if len(reasons) > 0 {
			return &NotEmptyError{Reasons: reasons}
		}
	}
	if len(snap.State) > 0 {
		if _, err := s.State.WriteState(ctx, snap.State, version); err != nil {
			return fmt.Errorf("write the state document: %w", err)
		}
	}
	for _, l := range snap.PoolLeases {
		if err := s.Pools.PutLease(ctx, pools.LeaseRecord(l)); err != nil {
			return fmt.Errorf("write pool lease %s: %w", l.LeaseID, err)
		}
	}
	for _, g := range snap.Grants {
		if err := s.Grants.PutGrant(ctx, g.ID, g.Body); err != nil {
			return fmt.Errorf("write grant %s: %w", g.ID, err)
		}
	}
	for _, inst := range snap.Instances {
		if err := s.Instances.Put(ctx, inst); err != nil {
			return fmt.Errorf("write instance %s of runner class %s: %w", inst.ID, inst.Class, err)
		}
	}
	return nil
}
