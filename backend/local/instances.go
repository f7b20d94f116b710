package local

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/runtime/pickup"
)

// InstanceTable is the instance table, keyed by instance ID.
type InstanceTable struct {
	b *Backend
}

const instanceColumns = `id, class, state, owner, usage_class, instance_type, cpu, mem_mib, resource_class, threshold_ns, updated_ns, claim_expires_ns`

func scanInstance(row interface{ Scan(...any) error }) (pickup.Instance, error) {
	var in pickup.Instance
	var state string
	var threshold, updated, claimExpires int64
	err := row.Scan(&in.ID, &in.Class, &state, &in.Owner, &in.UsageClass, &in.InstanceType, &in.CPU, &in.MemMiB, &in.ResourceClass, &threshold, &updated, &claimExpires)
	in.State = pickup.State(state)
	in.Threshold, in.UpdatedAt, in.ClaimExpires = fromNanos(threshold), fromNanos(updated), fromNanos(claimExpires)
	return in, err
}

// Put creates or replaces a record. A zero UpdatedAt is set to now.
func (t *InstanceTable) Put(ctx context.Context, in pickup.Instance) error {
	if in.ID == "" || in.Class == "" || in.State == "" {
		return fmt.Errorf("put instance %q: ID, Class and State are required", in.ID)
	}
	if in.UpdatedAt.IsZero() {
		in.UpdatedAt = t.b.now()
	}
	if err := backend.ValidateStoredTime("put instance "+in.ID+": threshold", in.Threshold); err != nil {
		return err
	}
	_, err := t.b.wdb.ExecContext(ctx, `INSERT OR REPLACE INTO instances (`+instanceColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		in.ID, in.Class, string(in.State), in.Owner, in.UsageClass, in.InstanceType, in.CPU, in.MemMiB, in.ResourceClass, nanos(in.Threshold), nanos(in.UpdatedAt), nanos(in.ClaimExpires))
	if err != nil {
		return fmt.Errorf("put instance %s in %s: %w", in.ID, t.b.path, err)
	}
	return nil
}

// Get returns a record or an error wrapping pickup.ErrNotFound.
func (t *InstanceTable) Get(ctx context.Context, id string) (pickup.Instance, error) {
	in, err := scanInstance(t.b.st.getInstance.queryRow(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return pickup.Instance{}, fmt.Errorf("instance %s: %w", id, pickup.ErrNotFound)
	}
	if err != nil {
		return pickup.Instance{}, fmt.Errorf("get instance %s from %s: %w", id, t.b.path, err)
	}
	return in, nil
}

// Transition applies tr with one conditional UPDATE … RETURNING: SQLite
// runs a statement atomically under the file's write lock, so of many racing
// transitions from the same state exactly one matches. No row matched means
// a condition failed (ErrConditionFailed, also for a missing record); any
// other error, such as a file busy beyond busy_timeout, is transient.
func (t *InstanceTable) Transition(ctx context.Context, tr pickup.Transition) (pickup.Instance, error) {
	if tr.ID == "" || tr.From == "" || tr.To == "" {
		return pickup.Instance{}, fmt.Errorf("transition instance %q: ID, From and To are required", tr.ID)
	}
	updated := tr.Now
	if updated.IsZero() {
		updated = t.b.now()
	}
	in, err := scanInstance(t.b.st.transition.queryRow(ctx,
		string(tr.To), tr.Owner, nanos(updated), nanos(tr.ClaimExpires), tr.ID, string(tr.From), tr.ExpectOwner, nanos(tr.Now), nanos(tr.Now),
		nanos(tr.LapsedBy), nanos(tr.LapsedBy)))
	if errors.Is(err, sql.ErrNoRows) {
		return pickup.Instance{}, fmt.Errorf("transition instance %s %s→%s (expected owner %q): %w", tr.ID, tr.From, tr.To, tr.ExpectOwner, pickup.ErrConditionFailed)
	}
	if err != nil {
		return pickup.Instance{}, fmt.Errorf("transition instance %s in %s (transient, retry): %w", tr.ID, t.b.path, err)
	}
	return in, nil
}

// List returns the records of one class in one state ("" = any), by ID.
func (t *InstanceTable) List(ctx context.Context, class string, state pickup.State) ([]pickup.Instance, error) {
	out, err := scanInstances(t.b.rdb.QueryContext(ctx, `SELECT `+instanceColumns+` FROM instances WHERE class = ? AND (? = '' OR state = ?) ORDER BY id`,
		class, string(state), string(state)))
	if err != nil {
		return nil, fmt.Errorf("list instances of class %s in %s: %w", class, t.b.path, err)
	}
	return out, nil
}

// ClaimedBy returns the records of one class claimed by owner, by ID
// (through the instances_by_owner index).
func (t *InstanceTable) ClaimedBy(ctx context.Context, class, owner string) ([]pickup.Instance, error) {
	if owner == "" {
		return nil, fmt.Errorf("instances of class %s claimed by an empty owner: name the owner", class)
	}
	rows, err := t.b.st.claimedBy.query(ctx, class, owner, string(pickup.StateClaimed))
	out, err := scanInstances(rows, err)
	if err != nil {
		return nil, fmt.Errorf("instances of class %s claimed by %q in %s: %w", class, owner, t.b.path, err)
	}
	return out, nil
}

// scanInstances reads the records of a query's rows.
func scanInstances(rows *sql.Rows, err error) ([]pickup.Instance, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []pickup.Instance
	for rows.Next() {
		in, err := scanInstance(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, rows.Err()
}
