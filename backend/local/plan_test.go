package local

import (
	"context"
	"strings"
	"testing"
)

// The lookups a hot path runs once per call use the index meant for them,
// not one that makes them read every row of a class. Each query is
// planned against the migrated schema.
func TestHotQueriesUseTheirIndex(t *testing.T) {
	b := openCommitTest(t, nil)
	for _, tc := range []struct {
		name, query, index string
		args               []any
	}{
		// A pickup's retry lookup, once per Pickup: by owner, not by
		// (class, state), which holds every claimed instance of the class.
		{"claimed by", sqlClaimedBy, "instances_by_owner", []any{"c", "o", "claimed"}},
		// The journal applier's deletes: one search by key per listed ID,
		// not a scan of the stack's records.
		{"delete leases", sqlDeleteLeases, "sqlite_autoindex_pool_leases_1", []any{"s", `["a","b"]`}},
		{"delete grants", sqlDeleteGrants, "sqlite_autoindex_grants_1", []any{"s", `["a","b"]`}},
	} {
		rows, err := b.rdb.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+tc.query, tc.args...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		got := strings.Join(plan, "; ")
		if !strings.Contains(got, "USING INDEX "+tc.index) && !strings.Contains(got, "USING COVERING INDEX "+tc.index) {
			t.Errorf("%s: plan %q; want a search using index %s", tc.name, got, tc.index)
		}
	}
}
