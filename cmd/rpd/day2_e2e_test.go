package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/backend/local"
	"github.com/rpdhq/rpd/internal/awstest"
	"github.com/rpdhq/rpd/runtime/pools"
)

// A standby shows the leader's figures, says so, and says when it cannot
// reach the leader instead of showing zeros; only the leader exports the
// pool series, so that a sum over the replicas is right.
func TestStandbyShowsTheLeadersFigures(t *testing.T) {
	h := newHAStack(t, false, "pool \"p\" {\n  slots = 3\n}\n")
	a := h.start()
	b := h.start()
	leader := leaderOf(t, a, b)
	standby := a
	if leader == a {
		standby = b
	}
	if _, err := leader.c.Acquire(context.Background(), "p", api.AcquireRequest{TaskID: "held", TTLSeconds: 600}); err != nil {
		t.Fatal(err)
	}

	st := standby.status()
	if st.Source != api.SourceLeader || usedOf(st, "p") != 1 || st.LeaderVersion == nil || st.Version.Version == "" {
		t.Fatalf("standby status: source %q, pools %+v, version %+v, leader version %+v; want the leader's used 1 and both versions", st.Source, st.Pools, st.Version, st.LeaderVersion)
	}
	wd := &workdir{t: t, dir: h.cwd}
	r := wd.must(0, "status", "-addr", standby.addr)
	contains(t, r, "stdout", "Figures: the leader's, fetched from http://"+leader.addr)
	if m := metrics(t, standby); strings.Contains(m, "rpd_pool_slots_used") || !strings.Contains(m, "rpd_build_info{") {
		t.Errorf("the standby's /metrics exports pool series (or lacks rpd_build_info):\n%s", grepLines(m, "rpd_pool_slots_used", "rpd_build_info"))
	}
	if m := metrics(t, leader); !strings.Contains(m, `rpd_pool_slots_used{pool="p"} 1`) {
		t.Errorf("the leader's /metrics lacks rpd_pool_slots_used{pool=\"p\"} 1:\n%s", grepLines(m, "rpd_pool_slots_used"))
	}

	// The leader dies: until the standby takes over (the lease runs 2 s)
	// its figures are unknown, and it says so.
	leader.stop(syscall.SIGKILL)
	st = standby.status()
	if st.Role == "standby" {
		if st.Source != api.SourceUnavailable || st.Pools != nil || !strings.Contains(st.SourceError, "does not answer") {
			t.Fatalf("standby status with its leader dead: source %q (%s), pools %+v; want unavailable and no figures", st.Source, st.SourceError, st.Pools)
		}
		r = wd.rpd("status", "-json", "-addr", standby.addr)
		var js map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &js); err != nil || js["source"] != api.SourceUnavailable || js["pools"] != nil {
			t.Fatalf("rpd status -json with the leader dead: %v %s", err, r.stdout)
		}
	}
	// It takes over and counts the held slot itself.
	st = standby.waitStatus("leader", func(s api.Status) bool { return s.Role == "leader" })
	if st.Source != api.SourceLeader || usedOf(st, "p") != 1 {
		t.Fatalf("after the takeover: source %q, pools %+v; want the restored slot counted", st.Source, st.Pools)
	}
}

// rpd backup while two daemons serve the stack, rpd restore into an empty
// directory, and the restored stack's leader counts the held lease under
// its ID; a second restore is refused.
func TestBackupRestoreE2E(t *testing.T) {
	h := newHAStack(t, false, "pool \"p\" {\n  slots = 2\n}\n")
	a := h.start()
	b := h.start()
	leader := leaderOf(t, a, b)
	l, err := leader.c.Acquire(context.Background(), "p", api.AcquireRequest{TaskID: "keep", TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	bak := filepath.Join(t.TempDir(), "stack.rpdbak")
	wd := &workdir{t: t, dir: h.cwd}
	r := wd.must(0, "backup", "-out", bak, h.conf)
	contains(t, r, "stdout", "1 pool lease(s)")

	dst := &workdir{t: t, dir: t.TempDir()}
	dst.must(0, "restore", "-in", bak, h.conf)
	r = dst.must(1, "restore", "-in", bak, h.conf)
	contains(t, r, "stderr", "refusing to restore into a backend that is in use")
	d := startRPD(t, dst.dir, nil, "watch", h.conf)
	st := d.waitStatus("leader", func(s api.Status) bool { return s.Role == "leader" })
	if usedOf(st, "p") != 1 {
		t.Fatalf("restored stack: pools %+v; want the held slot", st.Pools)
	}
	if _, err := d.c.Heartbeat(context.Background(), l.LeaseID); err != nil {
		t.Fatalf("heartbeat of the restored lease %s: %v", l.LeaseID, err)
	}
	// rpd destroy on a stack a watch daemon leads says what to do about it.
	r = dst.must(1, "destroy", "-auto-approve", h.conf)
	contains(t, r, "stderr", "stop every rpd watch of the stack first")
	// SIGTERM on the leader says it handed the lease over.
	d.stop(syscall.SIGTERM)
	if !strings.Contains(d.stderr.String(), "released the leader lease") {
		t.Errorf("the leader's log after SIGTERM does not say it released the lease:\n%s", d.stderr)
	}
}

func grepLines(s string, subs ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, sub := range subs {
			if strings.Contains(l, sub) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// usedOf is the used slots of pool name in st, -1 when it is not listed.
func usedOf(st api.Status, name string) int {
	for _, p := range st.Pools {
		if p.Name == name {
			return p.Used
		}
	}
	return -1
}

// The migration path through the CLI: a stack applied on the local
// backend, with a lease held, is backed up, restored into the aws backend
// (on the emulators; restore creates the tables), served there with the
// lease counted, and moved back to a fresh local directory.
func TestMigrateToAWSAndBackE2E(t *testing.T) {
	ep := awstest.Start(t)
	const body = "pool \"p\" {\n  slots = 2\n}\n"
	src := newWorkdir(t)
	src.write("main.hcl", "rpd {\n  stack = \"mig\"\n}\n"+body)
	src.must(0, "apply", "-auto-approve", "-no-color", ".")
	ctx := context.Background()
	lb, err := local.Open(ctx, filepath.Join(src.dir, ".rpd", "state.db"), local.Options{Stack: "mig"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	err = lb.PoolStore().PutLease(ctx, pools.LeaseRecord{LeaseID: "p/r-moved", Pool: "p", TaskID: "mover", Slots: 1, GrantedAt: now, ExpiresAt: now.Add(10 * time.Minute), TTL: 10 * time.Minute})
	lb.Close()
	if err != nil {
		t.Fatal(err)
	}
	bak := filepath.Join(t.TempDir(), "mig.rpdbak")
	src.must(0, "backup", "-out", bak, ".")

	awsConf := newWorkdir(t, ep.Env()...)
	awsConf.write("main.hcl", fmt.Sprintf("rpd {\n  stack = \"mig\"\n  ha {\n    lease = \"2s\"\n  }\n  backend \"aws\" {\n    region       = %q\n    table_prefix = \"rpd-mig\"\n  }\n}\n", awstest.Region)+body)
	r := awsConf.must(0, "restore", "-in", bak, ".")
	contains(t, r, "stdout", "1 pool lease(s)")
	d := startRPD(t, awsConf.dir, ep.Env(), "watch", awsConf.dir)
	st := d.waitStatus("leader", func(s api.Status) bool { return s.Role == "leader" })
	if usedOf(st, "p") != 1 {
		t.Fatalf("on aws after the restore: pools %+v; want the moved lease counted", st.Pools)
	}
	if _, err := d.c.Heartbeat(ctx, "p.r-moved"); err != nil {
		t.Fatalf("heartbeat of the moved lease on aws: %v", err)
	}
	back := filepath.Join(t.TempDir(), "back.rpdbak")
	awsConf.must(0, "backup", "-out", back, ".")

	dst := newWorkdir(t)
	dst.write("main.hcl", "rpd {\n  stack = \"mig\"\n}\n"+body)
	dst.must(0, "restore", "-in", back, ".")
	r = dst.must(0, "state", "list", ".")
	contains(t, r, "stdout", "pool.p")
	r = dst.must(0, "plan", "-no-color", ".")
	contains(t, r, "stdout", "No changes")
}
