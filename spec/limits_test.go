package spec

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/runtime/fatjob"
	"github.com/rpdhq/rpd/runtime/ledger"
	"github.com/rpdhq/rpd/runtime/pickup"
	"github.com/rpdhq/rpd/runtime/pools"
)

// The language refuses what the runtime components would refuse, so that
// rpd validate catches it instead of a daemon's reload.
func TestLimitsMatchTheRuntime(t *testing.T) {
	for _, c := range []struct {
		what          string
		spec, runtime any
	}{
		{"budget bytes (runtime/fatjob.MaxBudgetBytes)", uint64(maxBudgetBytes), fatjob.MaxBudgetBytes},
		{"spill slots (runtime/fatjob.MaxSpillSlots)", maxSpillSlots, fatjob.MaxSpillSlots},
		{"vm_ceiling max (runtime/ledger.MaxCount)", maxCeiling, ledger.MaxCount},
		{"queue name length (backend.MaxQueueNameLen)", MaxQueueNameLen, backend.MaxQueueNameLen},
		{"visibility timeout (backend.MaxVisibility)", MaxVisibility, backend.MaxVisibility},
		{"delay (backend.MaxDelay)", MaxDelay, backend.MaxDelay},
		{"minimum retention (backend.MinRetention)", MinRetention, backend.MinRetention},
		{"maximum retention (backend.MaxRetention)", MaxRetention, backend.MaxRetention},
	} {
		if c.spec != c.runtime {
			t.Errorf("%s: spec allows %v, the runtime %v", c.what, c.spec, c.runtime)
		}
	}
	if maxSlots > pools.MaxSlots {
		t.Errorf("spec allows pools of %d slots, runtime/pools only %d", maxSlots, pools.MaxSlots)
	}
}

// What the language documents as a default is what the runtime packages do
// with an unset value: checked on what Load decodes, not on the constants
// alone, so a decoder that writes its own literal fails here too.
func TestDefaultsMatchTheRuntime(t *testing.T) {
	dir := t.TempDir()
	src := `
runner_class "c" {
  cpu = 1
  mem = "1GiB"
}
budget "b" {}
vm_ceiling "v" {
  max = 1
  usage "http" {
    url = "http://127.0.0.1:9/usage"
  }
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := Load(dir, Vars{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	rc, b, v := cfg.RunnerClasses[0], cfg.Budgets[0], cfg.VMCeilings[0]
	var defaultPool *Pool
	for i := range cfg.Pools {
		if cfg.Pools[i].Name == DefaultPoolName {
			defaultPool = &cfg.Pools[i]
		}
	}
	if defaultPool == nil {
		t.Fatalf("no %s among the decoded pools %+v", DefaultPoolName, cfg.Pools)
	}
	ceiling := ledger.Config{}.WithDefaults()
	spill := -1
	if b.SpillSlots != nil {
		spill = *b.SpillSlots
	}
	for _, c := range []struct {
		what          string
		spec, runtime any
	}{
		{"backend type (backend.DefaultType)", cfg.Backend.Type, backend.DefaultType},
		{"local backend path (backend.DefaultLocalPath)", cfg.Backend.Path, backend.DefaultLocalPath},
		{"queue visibility_timeout (backend.DefaultVisibility)", rc.Queue.VisibilityTimeout, backend.DefaultVisibility},
		{"queue retention (backend.DefaultRetention)", rc.Queue.Retention, backend.DefaultRetention},
		{"queue delay", rc.Queue.Delay, time.Duration(0)},
		{"pickup requeue_delay (pickup.DefaultRequeueDelay)", rc.Pickup.RequeueDelay, pickup.DefaultRequeueDelay},
		{"pickup local_exhaustion (pickup.DefaultLocalExhaustion)", rc.Pickup.LocalExhaustion, pickup.DefaultLocalExhaustion},
		{"pickup mode (pickup.ModeLease)", rc.Pickup.Mode, string(pickup.ModeLease)},
		{"pickup mode lease", PickupModeLease, string(pickup.ModeLease)},
		{"pickup mode delete", PickupModeDelete, string(pickup.ModeDelete)},
		{"budget scan_ring (fatjob.DefaultScanRingBytes)", b.ScanRing, fatjob.DefaultScanRingBytes},
		{"budget delta_cache (fatjob.DefaultDeltaCacheBytes)", b.DeltaCache, fatjob.DefaultDeltaCacheBytes},
		{"budget spill_slots (fatjob.DefaultSpillSlots)", spill, fatjob.DefaultSpillSlots},
		{"vm_ceiling claim_ttl (ledger.DefaultClaimTTL)", v.ClaimTTL, ceiling.ClaimTTL},
		{"vm_ceiling poll_interval (ledger.DefaultPollInterval)", v.PollInterval, ceiling.PollInterval},
		{"vm_ceiling stale_after (ledger.DefaultStaleAfter)", v.StaleAfter, ceiling.StaleAfter},
		{"vm_ceiling grant (ledger.GrantNextUsage)", v.Grant, string(ceiling.Grant)},
		{"vm_ceiling grant next_usage", GrantNextUsage, string(ledger.GrantNextUsage)},
		{"vm_ceiling grant immediate", GrantImmediate, string(ledger.GrantImmediate)},
		{"usage field (ledger.DefaultHTTPField)", v.Usage.Field, ledger.DefaultHTTPField},
		{"usage timeout (ledger.DefaultHTTPTimeout)", v.Usage.Timeout, ledger.DefaultHTTPTimeout},
		{"default pool name (pools.DefaultPool)", DefaultPoolName, pools.DefaultPool},
		{"default_pool slots (pools.DefaultPoolSlots)", defaultPool.Slots, pools.DefaultPoolSlots},
		{"remote grant TTL (api.DefaultTTLSeconds)", DefaultLeaseTTL, api.DefaultTTLSeconds * time.Second},
	} {
		if c.spec != c.runtime {
			t.Errorf("%s: spec's default is %v, the runtime's %v", c.what, c.spec, c.runtime)
		}
	}

	// A declared default_pool without slots, and an aws backend without a
	// table prefix, take the same defaults.
	src = `
rpd {
  stack = "ci"
  backend "aws" {
    region = "eu-west-1"
  }
}
pool "default_pool" {
  description = "declared, slots unset"
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags = Load(dir, Vars{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if got, want := cfg.Backend.TablePrefix, backend.DefaultTablePrefix("ci"); got != want {
		t.Errorf("aws table_prefix: spec's default is %q, the runtime's %q", got, want)
	}
	if len(cfg.Pools) != 1 || cfg.Pools[0].Slots != pools.DefaultPoolSlots {
		t.Errorf("declared default_pool = %+v; want %d slots", cfg.Pools, pools.DefaultPoolSlots)
	}
}
