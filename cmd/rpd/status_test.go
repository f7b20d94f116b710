package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rpdhq/rpd/api"
)

func TestStatusUnreachable(t *testing.T) {
	addr := freeAddrNoListen(t)
	code, _, errs := runT(t, "status", "-addr", addr)
	want := "rpd status: no rpd daemon at " + addr + " (connection refused): start it with `rpd watch DIR`, or pass -addr\n"
	if code != 1 || errs != want {
		t.Fatalf("status of no daemon = %d %q, want 1 %q", code, errs, want)
	}
	code, _, errs = runEnvT(t, &env{environ: []string{"RPD_ADDR=" + addr}}, "run", "-pool", "db", "--", "true")
	if code != exitUnreachable || !strings.Contains(errs, "no rpd daemon at "+addr+" (connection refused)") {
		t.Fatalf("run against no daemon = %d %q", code, errs)
	}
}

func TestStatusVerboseListsHolders(t *testing.T) {
	conf, cwd := t.TempDir(), t.TempDir()
	writeConf(t, filepath.Join(conf, "main.hcl"), e2eRPD+"pool \"db\" {\n  slots = 2\n}\nbudget \"scan\" {}\n")
	ld := startRPD(t, cwd, nil, "watch", conf)
	ctx := context.Background()
	p := 4
	if _, err := ld.c.Acquire(ctx, "db", api.AcquireRequest{TaskID: "etl-42", Slots: 2, Priority: &p}); err != nil {
		t.Fatal(err)
	}
	if _, err := ld.c.AcquirePermit(ctx, "scan", api.PermitRequest{ScanRingBytes: 1 << 20, Spill: true}); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runT(t, "status", "-v", "-addr", ld.addr)
	if code != 0 {
		t.Fatalf("status -v = %d: %s", code, errs)
	}
	for _, want := range []string{"HELD", "pool.db", "etl-42", "2 slots", "budget.scan", "1MiB+0B+spill", "ago", "in "} {
		if !strings.Contains(out, want) {
			t.Errorf("status -v lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runT(t, "status", "-v", "-json", "-addr", ld.addr)
	var v struct {
		Status api.Status  `json:"status"`
		Leases []api.Grant `json:"leases"`
	}
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || len(v.Leases) != 2 || v.Status.Stack != "e2e" {
		t.Fatalf("status -v -json = %d %v: %s", code, err, out)
	}
}

func TestWriteHolders(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	var b bytes.Buffer
	writeHolders(&b, nil, nil, now)
	if !strings.Contains(b.String(), "No pool slots") {
		t.Errorf("no holders: %q", b.String())
	}
	b.Reset()
	writeHolders(&b, []api.Grant{
		{Kind: api.KindPool, ID: "db.x-1", Component: "db", TaskID: "t1", Slots: 1, GrantedAt: at(-90 * time.Second), HeartbeatAt: at(-5 * time.Second), ExpiresAt: at(55 * time.Second)},
		{Kind: api.KindClaim, ID: "00ff", Component: "vms", WorkerID: "w9", VMs: 3, Confirmed: true, GrantedAt: at(-time.Second)},
	}, map[string]int{"low": 0}, now)
	for _, want := range []string{"pool.db", "t1", "low (0)", "1m30s ago", "5s ago", "in 55s", "db.x-1", "vm_ceiling.vms", "w9", "3 VMs, confirmed"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("holders lack %q:\n%s", want, b.String())
		}
	}
}

func TestWriteWaiters(t *testing.T) {
	var b bytes.Buffer
	writeWaiters(&b, api.Components{})
	if !strings.Contains(b.String(), "Nothing is waiting") {
		t.Errorf("no waiters: %q", b.String())
	}
	b.Reset()
	writeWaiters(&b, api.Components{
		Pools:      []api.PoolStatus{{Name: "db", QueuedByPriority: []api.QueuedPriority{{Priority: 100, Requests: 2, Slots: 3, OldestWaitSeconds: 12.4, TaskIDs: []string{"etl-1", "etl-2"}}, {Priority: 0, Requests: 12, Slots: 12, TaskIDs: []string{"a"}}}}},
		Ceilings:   []api.CeilingStatus{{Name: "vms", QueuedByPriority: []api.QueuedPriority{{Requests: 4}}}},
		Priorities: map[string]int{"critical": 100},
	})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "WAITING FOR") {
		t.Fatalf("waiters:\n%s", b.String())
	}
	for i, want := range [][]string{{"pool.db", "critical", "(100)", "2", "3", "12s", "etl-1,", "etl-2"}, {"pool.db", "0", "12", "12", "-", "a", "and", "11", "more"}, {"vm_ceiling.vms", "0", "4", "-", "-", "-"}} {
		if got := strings.Fields(lines[i+1]); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("row %d = %q, want %q", i, got, want)
		}
	}
}

func TestWriteFleets(t *testing.T) {
	snooze := time.Date(2026, 11, 24, 12, 5, 0, 0, time.Local)
	var b bytes.Buffer
	writeFleets(&b, []api.ClassStatus{
		{Name: "small"},
		{Name: "medium", Fleet: &api.FleetStatus{Leading: true, Desired: 12, Schedule: "weekdays", Idle: 9, Booting: 3, Claimed: 40, CeilingRefused: 1,
			SpotSnoozedUntil: &snooze, LastHour: map[string]int{"launch": 31, "scale_down": 4}, LastLaunchError: "InsufficientInstanceCapacity: no spot"}},
	})
	out := b.String()
	for _, want := range []string{"FLEET", "medium", "12 (weekdays)", "until 12:05:00", "launch 31, scale_down 4", "last error: InsufficientInstanceCapacity"} {
		if !strings.Contains(out, want) {
			t.Errorf("fleet lines lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "small") {
		t.Errorf("a class without a fleet is listed:\n%s", out)
	}
}
