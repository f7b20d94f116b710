package arbiter

import (
	"strings"
	"testing"
	"time"

	"github.com/rpdhq/rpd/daemon/internal/component"
	"github.com/rpdhq/rpd/reconcile"
)

func TestEntryChange(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, cur reconcile.PoolEntry
		want     string
	}{
		{"slots", reconcile.PoolEntry{Slots: 1}, reconcile.PoolEntry{Slots: 2}, "pool.p: slots 1 -> 2"},
		{"ttl and flag", reconcile.PoolEntry{Slots: 1}, reconcile.PoolEntry{Slots: 1, LeaseTTL: reconcile.Duration(time.Minute), AllowDestroy: true},
			"pool.p: lease_ttl 0s -> 1m, allow_destroy false -> true"},
		{"long text", reconcile.PoolEntry{Description: strings.Repeat("a", 40)}, reconcile.PoolEntry{Description: strings.Repeat("b", 40)}, "pool.p: description changed"},
	} {
		if got := component.EntryChange("pool.p", tc.old, tc.cur); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
	got := component.EntryChange("vm_ceiling.v", reconcile.CeilingEntry{Max: 1}, reconcile.CeilingEntry{Max: 1, Usage: reconcile.UsageEntry{URL: "http://x"}})
	if got != "vm_ceiling.v: usage changed" {
		t.Errorf("nested entry: got %q", got)
	}
	got = component.EntryChange("runner_class.c", reconcile.ClassEntry{Mem: 1 << 30}, reconcile.ClassEntry{Mem: 2 << 30, InstanceTypes: reconcile.NewStringList([]string{"c6i.*"})})
	if got != `runner_class.c: mem 1GiB -> 2GiB, instance_types null -> ["c6i.*"]` {
		t.Errorf("class entry: got %q", got)
	}
}
