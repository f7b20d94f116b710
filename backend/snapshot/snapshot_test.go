package snapshot_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/aws"
	"github.com/rpdhq/rpd/backend/local"
	"github.com/rpdhq/rpd/backend/snapshot"
	"github.com/rpdhq/rpd/internal/awstest"
	"github.com/rpdhq/rpd/internal/open"
	"github.com/rpdhq/rpd/runtime/pickup"
	"github.com/rpdhq/rpd/runtime/pools"
)

const stack = "migrate"

func stores(b *open.Backend) snapshot.Stores {
	return snapshot.Stores{State: b.State, Leader: b.Leader, Pools: b.Pools, Grants: b.Grants, Instances: b.Instances}
}

func openLocal(t *testing.T) *open.Backend {
	t.Helper()
	lb, err := local.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"), local.Options{Stack: stack})
	if err != nil {
		t.Fatal(err)
	}
	b := open.Local(lb)
	t.Cleanup(func() { b.Close() })
	return b
}

func openAWS(t *testing.T, ep awstest.Endpoints, prefix string) *open.Backend {
	t.Helper()
	ab, err := aws.Open(context.Background(), ep.Options(stack, prefix))
	if err != nil {
		t.Fatal(err)
	}
	b := open.AWS(ab)
	t.Cleanup(func() { b.Close() })
	if err := b.Tables.EnsureTables(context.Background()); err != nil {
		t.Fatal(err)
	}
	return b
}

// fill writes one of everything a snapshot holds.
func fill(t *testing.T, b *open.Backend) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	if _, err := b.State.WriteState(ctx, []byte("{\n  \"doc\": 1\n}\n"), 0); err != nil {
		t.Fatal(err)
	}
	if err := b.Pools.PutLease(ctx, pools.LeaseRecord{LeaseID: "l-1", Pool: "db", TaskID: "job-7", Priority: 100, Slots: 2,
		GrantedAt: now, ExpiresAt: now.Add(time.Minute), TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := b.Grants.PutGrant(ctx, "p-1", []byte(`{"kind":"permit","budget":"scanner"}`)); err != nil {
		t.Fatal(err)
	}
	if err := b.Instances.Put(ctx, pickup.Instance{ID: "i-1", Class: "medium", State: pickup.StateIdle, UsageClass: "spot",
		InstanceType: "c6i.large", CPU: 2, MemMiB: 4096, Threshold: now.Add(time.Hour), UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
}

func take(t *testing.T, b *open.Backend) *snapshot.Snapshot {
	t.Helper()
	snap, err := snapshot.Take(context.Background(), stores(b), stack, []string{"medium"})
	if err != nil {
		t.Fatal(err)
	}
	// Through the file, as rpd backup and rpd restore do.
	var buf bytes.Buffer
	if err := snapshot.Write(&buf, snap); err != nil {
		t.Fatal(err)
	}
	if snap, err = snapshot.Read(&buf); err != nil {
		t.Fatal(err)
	}
	return snap
}

// same compares what two snapshots hold, not when or where they were taken.
func same(t *testing.T, what string, got, want *snapshot.Snapshot) {
	t.Helper()
	if string(got.State) != string(want.State) {
		t.Errorf("%s: state document %q, want %q", what, got.State, want.State)
	}
	if !reflect.DeepEqual(got.PoolLeases, want.PoolLeases) {
		t.Errorf("%s: pool leases\n got %+v\nwant %+v", what, got.PoolLeases, want.PoolLeases)
	}
	if !reflect.DeepEqual(got.Grants, want.Grants) {
		t.Errorf("%s: grants\n got %+v\nwant %+v", what, got.Grants, want.Grants)
	}
	norm := func(in []pickup.Instance) []pickup.Instance {
		out := append([]pickup.Instance(nil), in...)
		for i := range out {
			out[i].UpdatedAt = time.Time{} // a backend may stamp its own clock
			out[i].Threshold = out[i].Threshold.UTC()
		}
		return out
	}
	if !reflect.DeepEqual(norm(got.Instances), norm(want.Instances)) {
		t.Errorf("%s: instances\n got %+v\nwant %+v", what, got.Instances, want.Instances)
	}
}

// The migration path: local → aws → local keeps every record, under its ID.
func TestMigrateLocalToAWSAndBack(t *testing.T) {
	ep := awstest.Start(t)
	src := openLocal(t)
	fill(t, src)
	orig := take(t, src)
	if len(orig.PoolLeases) != 1 || len(orig.Grants) != 1 || len(orig.Instances) != 1 || orig.StateVersion != 1 {
		t.Fatalf("snapshot of the filled backend: %+v", orig)
	}

	dst := openAWS(t, ep, "mig")
	if err := snapshot.Restore(context.Background(), stores(dst), stack, orig, snapshot.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	inAWS := take(t, dst)
	same(t, "local → aws", inAWS, orig)

	back := openLocal(t)
	if err := snapshot.Restore(context.Background(), stores(back), stack, inAWS, snapshot.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	same(t, "aws → local", take(t, back), orig)
}

func TestRestoreRefusesABackendInUse(t *testing.T) {
	ctx := context.Background()
	src := openLocal(t)
	fill(t, src)
	snap := take(t, src)

	// Not empty: refused, then forced.
	var ne *snapshot.NotEmptyError
	if err := snapshot.Restore(ctx, stores(src), stack, snap, snapshot.RestoreOptions{}); !errors.As(err, &ne) || !strings.Contains(err.Error(), "state document") {
		t.Fatalf("restore into the source itself: %v; want a NotEmptyError naming the state document", err)
	}
	if err := snapshot.Restore(ctx, stores(src), stack, snap, snapshot.RestoreOptions{Force: true}); err != nil {
		t.Fatalf("forced restore: %v", err)
	}

	// Led by a daemon: refused even when empty.
	led := openLocal(t)
	if _, _, err := led.Leader.AcquireLeader(ctx, backend.LeaderClaim{Holder: "d1", Address: "http://127.0.0.1:1", Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := snapshot.Restore(ctx, stores(led), stack, snap, snapshot.RestoreOptions{}); !errors.As(err, &ne) || !strings.Contains(err.Error(), "a daemon leads") {
		t.Fatalf("restore into a led stack: %v; want a NotEmptyError naming the leader", err)
	}

	// Another stack's backup: refused.
	other := *snap
	other.Stack = "elsewhere"
	if err := snapshot.Restore(ctx, stores(openLocal(t)), stack, &other, snapshot.RestoreOptions{}); !errors.As(err, &ne) || !strings.Contains(err.Error(), `stack "elsewhere"`) {
		t.Fatalf("restore of another stack's backup: %v", err)
	}
}

func TestReadRefusesAnotherFormat(t *testing.T) {
	for _, in := range []string{`{"format":"rpd-backup/9"}`, `{"format":"rpd-backup/1","extra":1}`, `not json`} {
		if _, err := snapshot.Read(strings.NewReader(in)); err == nil {
			t.Errorf("Read(%s) succeeded", in)
		}
	}
}
