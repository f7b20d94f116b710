package spec

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to the loader as one file. No input may
// panic or hang, and the result must keep the loader's promises: a Config
// exactly when there is no error, and then one that holds every invariant
// the rest of rpd relies on.
func FuzzLoad(f *testing.F) {
	var seeds []string
	for _, pattern := range []string{"../examples/*.hcl", "testdata/valid/*.hcl", "testdata/invalid/*.hcl", "testdata/invalid/*/*.hcl"} {
		m, _ := filepath.Glob(pattern)
		seeds = append(seeds, m...)
	}
	if len(seeds) == 0 {
		f.Fatal("no seed corpus")
	}
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		cfg, diags := NewLoader().LoadSources(map[string][]byte{"fuzz.hcl": src}, Vars{})
		if (cfg == nil) != diags.HasErrors() {
			t.Fatalf("cfg=%v but HasErrors=%v", cfg != nil, diags.HasErrors())
		}
		for _, d := range diags {
			if d.Summary == "" {
				t.Errorf("diagnostic without summary: %+v", d)
			}
		}
		if cfg == nil {
			return
		}
		checkInvariants(t, cfg)
	})
}

// checkInvariants asserts what every valid Config guarantees.
func checkInvariants(t *testing.T, cfg *Config) {
	t.Helper()
	if !validStack(cfg.Stack) || checkListen(cfg.Listen) != nil {
		t.Errorf("bad stack %q or listen %q", cfg.Stack, cfg.Listen)
	}
	switch cfg.Backend.Type {
	case "local":
		if cfg.Backend.Path == "" {
			t.Error("local backend without path")
		}
	case "aws":
		if !validTablePrefix(cfg.Backend.TablePrefix) {
			t.Errorf("bad table prefix %q", cfg.Backend.TablePrefix)
		}
	default:
		t.Errorf("backend type %q", cfg.Backend.Type)
	}
	queues := map[string]bool{}
	if !sort.SliceIsSorted(cfg.RunnerClasses, func(i, j int) bool { return cfg.RunnerClasses[i].Name < cfg.RunnerClasses[j].Name }) {
		t.Error("classes not sorted")
	}
	for _, rc := range cfg.RunnerClasses {
		q := rc.Queue
		if rc.CPU < 1 || rc.Mem < 1 || len(rc.InstanceTypes) == 0 || !validQueueName(q.Name) || queues[q.Name] ||
			q.VisibilityTimeout < 0 || q.VisibilityTimeout > MaxVisibility || q.Delay < 0 || q.Delay > MaxDelay ||
			q.Retention < MinRetention || q.Retention > MaxRetention || rc.Pickup.LocalExhaustion < 1 ||
			rc.Pickup.RequeueDelay < 0 || rc.Pickup.RequeueDelay > MaxDelay ||
			(rc.Pickup.Mode != PickupModeLease && rc.Pickup.Mode != PickupModeDelete) {
			t.Errorf("invalid class %+v", rc)
		}
		for _, p := range rc.InstanceTypes {
			if !validGlob(p) {
				t.Errorf("class %s: bad glob %q", rc.Name, p)
			}
		}
		queues[q.Name] = true
	}
	for _, b := range cfg.Budgets {
		if b.ScanRing == 0 || b.DeltaCache == 0 || (b.SpillSlots != nil && *b.SpillSlots < 1) {
			t.Errorf("invalid budget %+v", b)
		}
	}
	for _, c := range cfg.VMCeilings {
		if c.Max < 1 || c.ClaimTTL <= 0 || c.PollInterval <= 0 || c.StaleAfter < c.PollInterval ||
			(c.Grant != GrantNextUsage && c.Grant != GrantImmediate) || (c.Usage != nil && ((c.Usage.Type == UsageHTTP && checkHTTPURL(c.Usage.URL) != nil) || c.Usage.Timeout <= 0 || (c.Usage.Type == UsageEC2 && c.Usage.Unit != UsageUnitVMs && c.Usage.Unit != UsageUnitCPUs))) {
			t.Errorf("invalid ceiling %+v", c)
		}
	}
	hasDefault := false
	for i, p := range cfg.Pools {
		hasDefault = hasDefault || p.Name == DefaultPoolName
		if p.Slots < 1 || p.LeaseTTL < 0 || p.MaxQueued < 0 || (i > 0 && cfg.Pools[i-1].Name >= p.Name) {
			t.Errorf("invalid or unsorted pool %+v", p)
		}
	}
	if !hasDefault {
		t.Error("no default_pool")
	}
}
