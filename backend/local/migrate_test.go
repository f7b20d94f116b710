package local_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend/local"
	"github.com/rpdhq/rpd/runtime/pools"
)

// A file written at schema version 1 (pool_leases without ttl_ns) opens,
// migrates, and keeps its lease records, which read back with TTL 0 (so
// pools.Restore derives it); records written afterwards keep their TTL.
func TestMigrateV1PoolLeasesKeepsRecords(t *testing.T) {
	granted := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	path := writeSQLite(t, "v1.db", v1Instances,
		`CREATE TABLE pool_leases (
			stack TEXT NOT NULL, lease_id TEXT NOT NULL, pool TEXT NOT NULL, task_id TEXT NOT NULL,
			priority INTEGER NOT NULL, slots INTEGER NOT NULL, granted_ns INTEGER NOT NULL, expires_ns INTEGER NOT NULL,
			PRIMARY KEY (stack, lease_id))`,
		`INSERT INTO pool_leases VALUES ('s', 'p/old', 'p', 'job', 3, 2, `+itoa(granted.UnixNano())+`, `+itoa(granted.Add(time.Minute).UnixNano())+`)`,
		`PRAGMA user_version = 1`)
	ctx := context.Background()
	b := openMigrated(t, path, 1)
	recs, err := b.PoolStore().LoadLeases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].LeaseID != "p/old" || recs[0].Slots != 2 || recs[0].Priority != 3 ||
		!recs[0].ExpiresAt.Equal(granted.Add(time.Minute)) || recs[0].TTL != 0 {
		t.Fatalf("records after migration: %+v", recs)
	}
	rec := pools.LeaseRecord{LeaseID: "p/new", Pool: "p", Slots: 1, GrantedAt: granted, ExpiresAt: granted.Add(3 * time.Minute), TTL: time.Minute}
	if err := b.PoolStore().PutLease(ctx, rec); err != nil {
		t.Fatal(err)
	}
	recs, err = b.PoolStore().LoadLeases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].LeaseID != "p/new" || recs[0].TTL != time.Minute {
		t.Fatalf("records after a new put: %+v", recs)
	}
	wantSchemaVersion(t, path)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A file written at schema version 2 (before the grants table) opens,
// migrates to the current version, keeps its pool lease records and stores
// the daemon's grants (budget permits, VM-ceiling claims) afterwards.
func TestMigrateV2AddsGrantsTable(t *testing.T) {
	path := writeSQLite(t, "v2.db", v1Instances,
		`CREATE TABLE pool_leases (
			stack TEXT NOT NULL, lease_id TEXT NOT NULL, pool TEXT NOT NULL, task_id TEXT NOT NULL,
			priority INTEGER NOT NULL, slots INTEGER NOT NULL, granted_ns INTEGER NOT NULL, expires_ns INTEGER NOT NULL,
			ttl_ns INTEGER NOT NULL DEFAULT 0,
			PRIMARY KEY (stack, lease_id))`,
		`INSERT INTO pool_leases VALUES ('s', 'p/old', 'p', 'job', 0, 1, 1, 2, 60000000000)`,
		`PRAGMA user_version = 2`)
	ctx := context.Background()
	b := openMigrated(t, path, 2)
	if recs, err := b.PoolStore().LoadLeases(ctx); err != nil || len(recs) != 1 || recs[0].LeaseID != "p/old" || recs[0].TTL != time.Minute {
		t.Fatalf("pool leases after migration: %+v, %v", recs, err)
	}
	gs := b.GrantStore()
	if recs, err := gs.LoadGrants(ctx); err != nil || len(recs) != 0 {
		t.Fatalf("grants of a migrated file: %q, %v; want none", recs, err)
	}
	if err := gs.PutGrant(ctx, "permit/b~1", []byte(`{"kind":"permit"}`)); err != nil {
		t.Fatalf("PutGrant after migration: %v", err)
	}
	if recs, err := gs.LoadGrants(ctx); err != nil || string(recs["permit/b~1"]) != `{"kind":"permit"}` || len(recs) != 1 {
		t.Fatalf("grants after a put: %q, %v", recs, err)
	}
	if err := gs.DeleteGrant(ctx, "permit/b~1"); err != nil {
		t.Fatal(err)
	}
	if recs, err := gs.LoadGrants(ctx); err != nil || len(recs) != 0 {
		t.Fatalf("grants after the delete: %q, %v", recs, err)
	}
	if local.SchemaVersion() < 3 {
		t.Fatalf("SchemaVersion() = %d, want at least 3 (the grants table)", local.SchemaVersion())
	}
	wantSchemaVersion(t, path)
}

// v1Instances is the instances table as schema version 1 created it
// (later migrations alter it, so a hand-made older file needs it).
const v1Instances = `CREATE TABLE instances (
	id TEXT PRIMARY KEY, class TEXT NOT NULL, state TEXT NOT NULL, owner TEXT NOT NULL,
	usage_class TEXT NOT NULL, instance_type TEXT NOT NULL, cpu INTEGER NOT NULL, mem_mib INTEGER NOT NULL,
	resource_class TEXT NOT NULL, threshold_ns INTEGER NOT NULL, updated_ns INTEGER NOT NULL)`

// writeSQLite creates name in a temporary directory by running stmts (a
// hand-made file of an older schema version) and returns its path.
func writeSQLite(t *testing.T, name string, stmts ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, stmt := range stmts {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	return path
}

// openMigrated opens the version-from file at path as stack "s", which
// migrates it; the backend is closed at cleanup.
func openMigrated(t *testing.T, path string, from int) *local.Backend {
	t.Helper()
	b, err := local.Open(context.Background(), path, local.Options{Stack: "s"})
	if err != nil {
		t.Fatalf("opening a version-%d file: %v", from, err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// wantSchemaVersion checks that the file at path is at this binary's
// schema version.
func wantSchemaVersion(t *testing.T, path string) {
	t.Helper()
	check, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	var v int
	if err := check.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != local.SchemaVersion() {
		t.Fatalf("schema version %d (%v), want %d", v, err, local.SchemaVersion())
	}
}

// A file written before claim deadlines (schema version 4) migrates: its
// instance records read back without a deadline, and a claim made before
// the upgrade is found by its owner (the retry key of a pickup).
func TestMigrateV4InstancesGainClaimDeadline(t *testing.T) {
	path := writeSQLite(t, "v4.db", v1Instances,
		// Every file past version 1 has pool_leases: version 6 adds its owner.
		`CREATE TABLE pool_leases (stack TEXT NOT NULL, lease_id TEXT NOT NULL, pool TEXT NOT NULL, task_id TEXT NOT NULL,
			priority INTEGER NOT NULL, slots INTEGER NOT NULL, granted_ns INTEGER NOT NULL, expires_ns INTEGER NOT NULL,
			ttl_ns INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (stack, lease_id))`,
		`INSERT INTO instances VALUES ('i-1', 'medium', 'claimed', 'job-1', 'spot', 'c6i.large', 2, 4096, 'medium', 4000000000000000000, 1)`,
		`PRAGMA user_version = 4`)
	ctx := context.Background()
	b := openMigrated(t, path, 4)
	got, err := b.Instances().ClaimedBy(ctx, "medium", "job-1")
	if err != nil || len(got) != 1 || got[0].ID != "i-1" || !got[0].ClaimExpires.IsZero() {
		t.Fatalf("ClaimedBy after migration: %+v, %v; want i-1 without a deadline", got, err)
	}
	wantSchemaVersion(t, path)
}
