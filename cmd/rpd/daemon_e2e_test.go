package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/backend/local"
	"github.com/rpdhq/rpd/client"
	"github.com/rpdhq/rpd/internal/awstest"
)

// liveDaemon is an "rpd watch" or "rpd serve" process on a 127.0.0.1 port.
type liveDaemon struct {
	t      testing.TB
	cmd    *exec.Cmd
	addr   string
	c      *client.Client
	stderr *syncBuffer
	done   chan struct{}
	err    error
}

// syncBuffer is a bytes.Buffer safe for the process's writes and the
// test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// freeAddr returns a free loopback address for a daemon, its port below
// the kernel's ephemeral range: a daemon that restarts as a standby binds
// its port again, and an outgoing connection (to the emulators, between
// replicas) given that port as its source meanwhile would make the bind
// fail. Ports from ":0" are ephemeral ones.
func freeAddr(t testing.TB) string {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 2048 {
				low = n
			}
		}
	}
	for range 200 {
		port := 1024 + rand.IntN(low-1024)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // taken
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}
	t.Fatalf("no free port below %d on 127.0.0.1 in 200 tries", low)
	return ""
}

// startRPD runs rpd MODE -listen ADDR ARGS... in cwd and waits for
// /readyz. The process gets SIGTERM at cleanup and must exit 0.
func startRPD(t testing.TB, cwd string, env []string, mode string, args ...string) *liveDaemon {
	t.Helper()
	addr := freeAddr(t)
	return launchRPD(t, cwd, env, addr, append([]string{mode, "-listen", addr}, args...)...)
}

// launchRPD runs rpd ARGV, which must make it listen on addr.
func launchRPD(t testing.TB, cwd string, env []string, addr string, argv ...string) *liveDaemon {
	t.Helper()
	mode := argv[0]
	cmd := exec.Command(rpdBinary, argv...)
	cmd.Dir = cwd
	cmd.Env = append(cleanEnv(), env...)
	ld := &liveDaemon{t: t, cmd: cmd, addr: addr, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = ld.stderr, ld.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { ld.err = cmd.Wait(); close(ld.done) }()
	var copts []client.Option
	base := addr
	for _, kv := range env {
		if tok, ok := strings.CutPrefix(kv, "RPD_TOKEN="); ok {
			copts = append(copts, client.WithToken(tok))
		}
		if ca, ok := strings.CutPrefix(kv, "RPD_CA_FILE="); ok { // a daemon serving TLS
			copts = append(copts, client.WithCAFile(ca))
			base = "https://" + addr
		}
	}
	ld.c, _ = client.New(base, copts...)
	t.Cleanup(func() {
		if code := ld.stop(syscall.SIGTERM); code != 0 && code != -9 {
			t.Errorf("rpd %s exited %d after SIGTERM; log:\n%s", mode, code, ld.stderr)
		}
	})
	// Ready, not only healthy: a daemon restarted after a kill -9 is a
	// standby until the dead leader's lease runs out, and ready once it
	// leads (or once the leader it forwards to answers).
	for i := 0; i < 300; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := ld.c.Ready(ctx)
		cancel()
		if err == nil {
			return ld
		}
		select {
		case <-ld.done:
			t.Fatalf("rpd %s exited at start-up (%v); log:\n%s", mode, ld.err, ld.stderr)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("rpd %s: not ready (/readyz) within 15 s; log:\n%s", mode, ld.stderr)
	return nil
}

// stop sends sig and returns the exit code (-9 when already killed).
func (ld *liveDaemon) stop(sig syscall.Signal) int {
	select {
	case <-ld.done:
	default:
		_ = ld.cmd.Process.Signal(sig)
		select {
		case <-ld.done:
		case <-time.After(20 * time.Second):
			_ = ld.cmd.Process.Kill()
			<-ld.done
			ld.t.Errorf("rpd did not exit within 20 s of %v", sig)
		}
	}
	if ws, ok := ld.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -int(ws.Signal())
	}
	return ld.cmd.ProcessState.ExitCode()
}

func (ld *liveDaemon) status() api.Status {
	ld.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := ld.c.Status(ctx)
	if err != nil {
		ld.t.Fatalf("status: %v; log:\n%s", err, ld.stderr)
	}
	return st
}

// waitStatus polls /v1/status every 10 ms for up to 5 s until cond holds.
func (ld *liveDaemon) waitStatus(what string, cond func(api.Status) bool) api.Status {
	ld.t.Helper()
	var st api.Status
	for i := 0; i < 500; i++ {
		if st = ld.status(); cond(st) {
			return st
		}
		time.Sleep(10 * time.Millisecond)
	}
	ld.t.Fatalf("timed out waiting for %s; last status %+v; log:\n%s", what, st, ld.stderr)
	return st
}

func (ld *liveDaemon) pool(name string) api.PoolDetail {
	ld.t.Helper()
	ps, err := ld.c.Pool(context.Background(), name)
	if err != nil {
		ld.t.Fatalf("pool %s: %v", name, err)
	}
	return ps
}

func writeConf(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// e2eRPD is the rpd block of the end-to-end configurations: a short
// leader lease, so that a daemon restarted after a kill -9 takes over
// within 2 s instead of the default 5.
const e2eRPD = "rpd {\n  stack = \"e2e\"\n  ha {\n    lease = \"2s\"\n  }\n}\n"

func TestDaemonE2EWatchReloads(t *testing.T) {
	conf, cwd := t.TempDir(), t.TempDir()
	writeConf(t, filepath.Join(conf, "rpd.hcl"), e2eRPD)
	main := filepath.Join(conf, "main.hcl")
	writeConf(t, main, "pool \"db\" {\n  slots = 1\n}\n")
	ld := startRPD(t, cwd, nil, "watch", conf)
	ctx := context.Background()
	if _, err := os.Stat(filepath.Join(cwd, ".rpd", "state.db")); err != nil {
		t.Fatalf("the local backend is not under the working directory: %v", err)
	}

	held, err := ld.c.Acquire(ctx, "db", api.AcquireRequest{TaskID: "holder"})
	if err != nil {
		t.Fatal(err)
	}
	granted := make(chan error, 1)
	go func() {
		_, err := ld.c.Acquire(ctx, "db", api.AcquireRequest{TaskID: "waiter", WaitSeconds: 20})
		granted <- err
	}()
	ld.waitStatus("the waiter to queue", func(st api.Status) bool { return ld.pool("db").Queued == 1 })

	// Resize by editing the file: the version increments, the waiter is granted.
	v0 := ld.status().ConfigVersion
	writeConf(t, main, "pool \"db\" {\n  slots = 2\n}\n")
	ld.waitStatus("the resize", func(st api.Status) bool { return st.ConfigVersion == v0+1 })
	select {
	case err := <-granted:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not granted after the resize")
	}

	// A broken edit changes nothing and is reported with file:line.
	broken := filepath.Join(conf, "zz-broken.hcl")
	writeConf(t, broken, "pool \"b\" {\n  slots = \n")
	st := ld.waitStatus("the rejection", func(st api.Status) bool { return !st.LastReload.OK })
	if st.ConfigVersion != v0+1 || !strings.Contains(st.LastReload.Error, broken+":2,") {
		t.Fatalf("after a broken edit: version %d (want %d), error %q (want %s:2)", st.ConfigVersion, v0+1, st.LastReload.Error, broken)
	}
	if ps := ld.pool("db"); ps.Total != 2 || ps.Used != 2 {
		t.Fatalf("a broken edit touched pool db: %+v", ps)
	}
	// Then a fix applies.
	writeConf(t, broken, "pool \"b\" {\n  slots = 1\n}\n")
	ld.waitStatus("the fix", func(st api.Status) bool { return st.LastReload.OK && st.ConfigVersion == v0+2 })

	// An editor's atomic replace: write a temp file, rename it over.
	tmp := filepath.Join(conf, ".main.hcl.swp")
	writeConf(t, tmp, "pool \"db\" {\n  slots = 3\n}\n")
	if err := os.Rename(tmp, main); err != nil {
		t.Fatal(err)
	}
	ld.waitStatus("the atomic replace", func(st api.Status) bool { return st.ConfigVersion == v0+3 })
	if ps := ld.pool("db"); ps.Total != 3 {
		t.Fatalf("pool db after the replace: %+v", ps)
	}

	// SIGHUP reloads at once (same content: a new reload, no new version).
	at := ld.status().LastReload.At
	if err := ld.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	st = ld.waitStatus("the SIGHUP reload", func(st api.Status) bool { return st.LastReload.At.After(at) })
	if !st.LastReload.OK || st.ConfigVersion != v0+3 {
		t.Fatalf("after SIGHUP: %+v", st.LastReload)
	}

	// rpd status and rpd run against the live daemon.
	wd := &workdir{t: t, dir: cwd}
	r := wd.must(0, "status", "-addr", ld.addr)
	contains(t, r, "stdout", "db")
	contains(t, r, "stdout", fmt.Sprintf("Config version %d", v0+3))
	r = wd.must(3, "run", "-addr", ld.addr, "-pool", "db", "-slots", "1", "--", "sh", "-c", "curl -s http://"+ld.addr+"/v1/pools/db; exit 3")
	contains(t, r, "stdout", `"used":3`)
	if ps := ld.pool("db"); ps.Used != 2 {
		t.Fatalf("rpd run did not release its slot: %+v", ps)
	}
	_ = held
}

func TestDaemonE2ESymlinkSwap(t *testing.T) {
	conf, cwd := t.TempDir(), t.TempDir()
	gen := func(name string, slots int) {
		if err := os.Mkdir(filepath.Join(conf, name), 0o755); err != nil {
			t.Fatal(err)
		}
		writeConf(t, filepath.Join(conf, name, "rpd.hcl"), e2eRPD)
		writeConf(t, filepath.Join(conf, name, "main.hcl"), fmt.Sprintf("pool \"db\" {\n  slots = %d\n}\n", slots))
	}
	gen("..gen1", 1)
	for _, l := range [][2]string{{"..gen1", "..data"}, {"..data/rpd.hcl", "rpd.hcl"}, {"..data/main.hcl", "main.hcl"}} {
		if err := os.Symlink(l[0], filepath.Join(conf, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	ld := startRPD(t, cwd, nil, "watch", conf)
	v0 := ld.status().ConfigVersion
	gen("..gen2", 4)
	if err := os.Symlink("..gen2", filepath.Join(conf, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(conf, "..data_tmp"), filepath.Join(conf, "..data")); err != nil {
		t.Fatal(err)
	}
	ld.waitStatus("the ..data swap", func(st api.Status) bool { return st.ConfigVersion == v0+1 })
	if ps := ld.pool("db"); ps.Total != 4 {
		t.Fatalf("pool after the swap: %+v", ps)
	}
}

// kill -9 and restart: held pool leases, budget permits and VM-ceiling
// claims are all still counted, under the same IDs.
func TestDaemonE2EKill9KeepsLeases(t *testing.T) {
	conf, cwd := t.TempDir(), t.TempDir()
	writeConf(t, filepath.Join(conf, "main.hcl"), e2eRPD+"pool \"db\" {\n  slots = 3\n}\n"+e2eGrantsHCL)
	ld := startRPD(t, cwd, nil, "watch", conf)
	ctx := context.Background()
	l, err := ld.c.Acquire(ctx, "db", api.AcquireRequest{TaskID: "survivor", Slots: 2, TTLSeconds: 120})
	if err != nil {
		t.Fatal(err)
	}
	grants := holdGrants(t, ld, 120)
	// A released lease must not come back after the restart.
	gone, err := ld.c.Acquire(ctx, "db", api.AcquireRequest{TaskID: "gone"})
	if err != nil {
		t.Fatal(err)
	}
	if err := ld.c.Release(ctx, gone.LeaseID); err != nil {
		t.Fatal(err)
	}
	// The release's record delete is deferred (docs/api.md): wait, bounded,
	// until the backend no longer holds it, as the next daemon will read it.
	recordGone := func() bool {
		b, err := local.Open(ctx, filepath.Join(cwd, ".rpd", "state.db"), local.Options{Stack: "e2e"})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		recs, err := b.PoolStore().LoadLeases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if strings.Replace(r.LeaseID, "/", ".", 1) == gone.LeaseID {
				return false
			}
		}
		return true
	}
	for i := 0; !recordGone(); i++ {
		if i == 200 {
			t.Fatal("the released lease's record was not deleted within 2 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code := ld.stop(syscall.SIGKILL); code != -9 {
		t.Fatalf("kill -9: exit %d", code)
	}
	ld2 := startRPD(t, cwd, nil, "watch", conf)
	ps := ld2.pool("db")
	if ps.Used != 2 {
		t.Fatalf("after kill -9 and restart, pool db = %+v; want the 2 held slots still counted", ps)
	}
	// The holder keeps its lease: same ID, heartbeat and release work.
	if _, err := ld2.c.Heartbeat(ctx, l.LeaseID); err != nil {
		t.Fatalf("heartbeat of the restored lease: %v", err)
	}
	if _, err := ld2.c.Acquire(ctx, "db", api.AcquireRequest{Slots: 2}); !client.IsCode(err, api.CodeUnavailable) {
		t.Fatalf("acquiring the held slots after the restart = %v, want 409", err)
	}
	if err := ld2.c.Release(ctx, l.LeaseID); err != nil {
		t.Fatal(err)
	}
	if ps := ld2.pool("db"); ps.Used != 0 {
		t.Fatalf("pool after releasing the restored lease: %+v", ps)
	}
	grants.checkRestored(t, ld2)
}

// e2eGrantsHCL declares the budget and ceiling holdGrants uses.
const e2eGrantsHCL = "budget \"scan\" {\n  scan_ring = \"64MiB\"\n}\nvm_ceiling \"vms\" {\n  max   = 4\n  grant = \"immediate\"\n}\n"

// heldGrants are a budget permit and a VM-ceiling claim held across a
// daemon restart.
type heldGrants struct {
	permit api.Lease
	claim  api.Claim
}

func holdGrants(t *testing.T, ld *liveDaemon, ttlSeconds float64) heldGrants {
	t.Helper()
	ctx := context.Background()
	permit, err := ld.c.AcquirePermit(ctx, "scan", api.PermitRequest{ScanRingBytes: 48 << 20, TTLSeconds: ttlSeconds})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ld.c.PushUsage(ctx, "vms", 1); err != nil {
		t.Fatal(err)
	}
	claim, err := ld.c.RequestClaim(ctx, "vms", api.ClaimRequest{WorkerID: "w-1", Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	return heldGrants{permit: permit, claim: claim}
}

// checkRestored asserts that a restarted daemon counts the grants and
// serves their holders under the old IDs.
func (h heldGrants) checkRestored(t *testing.T, ld *liveDaemon) {
	t.Helper()
	ctx := context.Background()
	if b, err := ld.c.Budget(ctx, "scan"); err != nil || b.Permits != 1 || b.ScanRing.Available != 16<<20 {
		t.Fatalf("budget after the restart: %+v, %v; want the 48 of 64 MiB still held", b, err)
	}
	if _, err := ld.c.AcquirePermit(ctx, "scan", api.PermitRequest{ScanRingBytes: 32 << 20}); !client.IsCode(err, api.CodeUnavailable) {
		t.Fatalf("a permit the restored one leaves no room for: %v, want 409", err)
	}
	if _, err := ld.c.PushUsage(ctx, "vms", 1); err != nil {
		t.Fatal(err)
	}
	// The provider still shows 1 VM, not the 3 being started: without the
	// restored claim the ceiling of 4 would grant 3 more.
	if c, err := ld.c.Ceiling(ctx, "vms"); err != nil || c.LocalClaims != 3 || c.Available != 0 {
		t.Fatalf("ceiling after the restart: %+v, %v; want the 3-VM claim still counted", c, err)
	}
	if _, err := ld.c.RequestClaim(ctx, "vms", api.ClaimRequest{WorkerID: "w-2", Count: 1}); !client.IsCode(err, api.CodeUnavailable) {
		t.Fatalf("a claim beyond the ceiling after the restart: %v, want 409", err)
	}
	if _, err := ld.c.Heartbeat(ctx, h.permit.LeaseID); err != nil {
		t.Fatalf("heartbeat of the restored permit: %v", err)
	}
	if _, err := ld.c.ConfirmClaim(ctx, "vms", h.claim.ClaimID); err != nil {
		t.Fatalf("confirm of the restored claim: %v", err)
	}
	if err := ld.c.Release(ctx, h.permit.LeaseID); err != nil {
		t.Fatalf("release of the restored permit: %v", err)
	}
}

// kill -9 and restart: a budget permit and a VM-ceiling claim that nobody
// heartbeats or confirms are counted by the restarted daemon until the TTL
// they were granted with runs out, then give their bytes and VMs back; their
// old IDs then answer 404.
func TestDaemonE2EKill9GrantsLapse(t *testing.T) {
	testGrantsLapse(t, e2eRPD, nil)
}

// As TestDaemonE2EKill9GrantsLapse, with the grant records in DynamoDB.
func TestDaemonE2EKill9GrantsLapseOnEmulators(t *testing.T) {
	rpd, env := emulatorRPD(t)
	testGrantsLapse(t, rpd, env)
}

// emulatorRPD starts the AWS emulators and returns an rpd block for a new
// stack on them, and the environment that points rpd at them.
func emulatorRPD(t *testing.T) (hcl string, env []string) {
	t.Helper()
	ep := awstest.Start(t)
	stack := fmt.Sprintf("d%d", time.Now().UnixNano()%1_000_000)
	return fmt.Sprintf("rpd {\n  stack = %q\n  ha {\n    lease = \"2s\"\n  }\n  backend \"aws\" {\n    region       = %q\n    table_prefix = %q\n  }\n}\n", stack, awstest.Region, "rpd-"+stack), ep.Env()
}

func testGrantsLapse(t *testing.T, rpdHCL string, env []string) {
	const ttl = 6 // seconds: the restart must fit well inside it
	conf, cwd := t.TempDir(), t.TempDir()
	writeConf(t, filepath.Join(conf, "main.hcl"), rpdHCL+fmt.Sprintf(
		"budget \"scan\" {\n  scan_ring = \"64MiB\"\n}\nvm_ceiling \"vms\" {\n  max       = 4\n  grant     = \"immediate\"\n  claim_ttl = \"%ds\"\n  stale_after = \"3s\"\n  poll_interval = \"1s\"\n}\n", ttl))
	ld := startRPD(t, cwd, env, "watch", conf)
	ctx := context.Background()
	held := holdGrants(t, ld, ttl) // the claim lapses after claim_ttl, the same
	permit, claim := held.permit, held.claim
	if code := ld.stop(syscall.SIGKILL); code != -9 {
		t.Fatalf("kill -9: exit %d", code)
	}
	ld2 := startRPD(t, cwd, env, "watch", conf)
	b, err := ld2.c.Budget(ctx, "scan")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ld2.c.Ceiling(ctx, "vms")
	if err != nil {
		t.Fatal(err)
	}
	if left := time.Until(permit.ExpiresAt.Add(-time.Second)); left > 0 {
		if b.Permits != 1 || b.ScanRing.Available != 16<<20 {
			t.Fatalf("budget right after the restart: %+v; want the 48 of 64 MiB still held", b)
		}
		if c.LocalClaims != 3 {
			t.Fatalf("ceiling right after the restart: %+v; want the 3-VM claim still counted", c)
		}
	} else {
		t.Logf("the restart took longer than the %d s TTL allows to see the grants held; checking only that they lapse", ttl)
	}
	// Bounded in time and count: the grants lapse at their ExpiresAt, a few
	// seconds away.
	deadline := permit.ExpiresAt.Add(10 * time.Second)
	for i := 0; ; i++ {
		b, err = ld2.c.Budget(ctx, "scan")
		if err != nil {
			t.Fatal(err)
		}
		c, err = ld2.c.Ceiling(ctx, "vms")
		if err != nil {
			t.Fatal(err)
		}
		if b.Permits == 0 && b.ScanRing.Available == b.ScanRing.Total && c.LocalClaims == 0 {
			break
		}
		if time.Now().After(deadline) || i == 1000 {
			t.Fatalf("10 s past their TTL the restored grants still count: budget %+v, ceiling %+v; log:\n%s", b, c, ld2.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if now := time.Now(); now.Before(permit.ExpiresAt) || now.Before(claim.ExpiresAt) {
		t.Fatalf("the grants stopped counting at %s, before their TTL (permit %s, claim %s)", now, permit.ExpiresAt, claim.ExpiresAt)
	}
	if _, err := ld2.c.Heartbeat(ctx, permit.LeaseID); !client.IsCode(err, api.CodeNotFound) {
		t.Fatalf("heartbeat of the lapsed permit: %v, want 404", err)
	}
	if _, err := ld2.c.ConfirmClaim(ctx, "vms", claim.ClaimID); !client.IsCode(err, api.CodeNotFound) {
		t.Fatalf("confirm of the lapsed claim: %v, want 404", err)
	}
	// What they held is grantable again.
	if _, err := ld2.c.AcquirePermit(ctx, "scan", api.PermitRequest{ScanRingBytes: 64 << 20}); err != nil {
		t.Fatalf("the whole budget after the lapse: %v", err)
	}
	if _, err := ld2.c.PushUsage(ctx, "vms", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := ld2.c.RequestClaim(ctx, "vms", api.ClaimRequest{WorkerID: "w-2", Count: 3}); err != nil {
		t.Fatalf("3 VMs after the lapse: %v", err)
	}
}

func TestDaemonE2EHeartbeatOrLose(t *testing.T) {
	conf, cwd := t.TempDir(), t.TempDir()
	writeConf(t, filepath.Join(conf, "main.hcl"), e2eRPD+"pool \"db\" {\n  slots = 2\n}\nbudget \"scan\" {}\n")
	ld := startRPD(t, cwd, nil, "watch", conf)
	ctx := context.Background()
	silent, err := ld.c.Acquire(ctx, "db", api.AcquireRequest{TaskID: "vanishes", TTLSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	alive, err := ld.c.Acquire(ctx, "db", api.AcquireRequest{TaskID: "beats", TTLSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	permit, err := ld.c.AcquirePermit(ctx, "scan", api.PermitRequest{ScanRingBytes: 1 << 20, TTLSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 8; i++ { // 2 s, heartbeating one lease every 250 ms
		time.Sleep(250 * time.Millisecond)
		if _, err := ld.c.Heartbeat(ctx, alive.LeaseID); err != nil {
			t.Fatalf("heartbeat %d of the live lease: %v", i, err)
		}
	}
	if ps := ld.pool("db"); ps.Used != 1 {
		t.Fatalf("pool after 2 s = %+v; want only the heartbeated lease held", ps)
	}
	if _, err := ld.c.Heartbeat(ctx, silent.LeaseID); !client.IsCode(err, api.CodeNotFound) {
		t.Fatalf("heartbeat of the lapsed lease = %v, want 404", err)
	}
	if b, _ := ld.c.Budget(ctx, "scan"); b.Permits != 0 || b.ScanRing.Available != b.ScanRing.Total {
		t.Fatalf("budget after its permit lapsed = %+v, want full", b)
	}
	if _, err := ld.c.Heartbeat(ctx, permit.LeaseID); !client.IsCode(err, api.CodeNotFound) {
		t.Fatalf("heartbeat of the lapsed permit = %v, want 404", err)
	}
}

func TestDaemonE2EStartupRefusals(t *testing.T) {
	conf := t.TempDir()
	writeConf(t, filepath.Join(conf, "main.hcl"), e2eRPD+"pool \"db\" {\n  slots = -1\n}\n")
	wd := &workdir{t: t, dir: t.TempDir()}
	r := wd.must(1, "watch", "-listen", freeAddr(t), conf)
	contains(t, r, "stderr", fmt.Sprintf("main.hcl line %d", strings.Count(e2eRPD, "\n")+2))

	writeConf(t, filepath.Join(conf, "main.hcl"), e2eRPD)
	// Refused before binding: the address is never listened on.
	r = wd.must(1, "watch", "-listen", "0.0.0.0:0", conf)
	contains(t, r, "stderr", "without a bearer token")
}

func TestDaemonE2EToken(t *testing.T) {
	conf, cwd := t.TempDir(), t.TempDir()
	writeConf(t, filepath.Join(conf, "main.hcl"), e2eRPD)
	ld := startRPD(t, cwd, []string{"RPD_TOKEN=tok-123"}, "watch", conf)
	anon, _ := client.New(ld.addr)
	if _, err := anon.Status(context.Background()); !client.IsCode(err, api.CodeUnauthorized) {
		t.Fatalf("status without the token = %v, want 401", err)
	}
	if _, err := ld.c.Status(context.Background()); err != nil {
		t.Fatalf("status with the token: %v", err)
	}
	if strings.Contains(ld.stderr.String(), "tok-123") {
		t.Fatal("the token appears in the daemon's log")
	}
}

func TestDaemonE2EServeFollowsApply(t *testing.T) {
	cwd := t.TempDir()
	wd := &workdir{t: t, dir: cwd}
	writeConf(t, filepath.Join(cwd, "main.hcl"), e2eRPD+"pool \"db\" {\n  slots = 2\n}\n")
	wd.must(0, "apply", "-auto-approve", "-no-color")
	ld := startRPD(t, cwd, nil, "serve", ".")
	if ps := ld.pool("db"); ps.Total != 2 {
		t.Fatalf("serve: pool db = %+v", ps)
	}
	v0 := ld.status().ConfigVersion
	writeConf(t, filepath.Join(cwd, "main.hcl"), e2eRPD+"pool \"db\" {\n  slots = 7\n}\n")
	wd.must(0, "apply", "-auto-approve", "-no-color")
	ld.waitStatus("serve to follow the apply", func(st api.Status) bool { return st.ConfigVersion > v0 })
	if ps := ld.pool("db"); ps.Total != 7 {
		t.Fatalf("serve after the second apply: pool db = %+v", ps)
	}
}

// The same watch cycle on the aws backend, against the emulators.
func TestDaemonE2EWatchOnEmulators(t *testing.T) {
	rpd, env := emulatorRPD(t)
	conf, cwd := t.TempDir(), t.TempDir()
	writeConf(t, filepath.Join(conf, "rpd.hcl"), rpd)
	main := filepath.Join(conf, "main.hcl")
	writeConf(t, main, "pool \"db\" {\n  slots = 1\n}\nrunner_class \"small\" {\n  cpu = 1\n  mem = \"1GiB\"\n}\n"+e2eGrantsHCL)
	ld := startRPD(t, cwd, env, "watch", conf)
	ctx := context.Background()
	l, err := ld.c.Acquire(ctx, "db", api.AcquireRequest{TaskID: "aws", TTLSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	grants := holdGrants(t, ld, 120)
	v0 := ld.status().ConfigVersion
	writeConf(t, main, "pool \"db\" {\n  slots = 2\n}\nrunner_class \"small\" {\n  cpu = 1\n  mem = \"1GiB\"\n}\n"+e2eGrantsHCL)
	ld.waitStatus("the resize on aws", func(st api.Status) bool { return st.ConfigVersion == v0+1 })
	if ps := ld.pool("db"); ps.Total != 2 || ps.Used != 1 {
		t.Fatalf("pool db on aws = %+v", ps)
	}
	// Restart: the lease is in DynamoDB and still counted.
	ld.stop(syscall.SIGKILL)
	ld2 := startRPD(t, cwd, env, "watch", conf)
	if ps := ld2.pool("db"); ps.Used != 1 {
		t.Fatalf("after kill -9 on aws, pool db = %+v; want the held slot counted", ps)
	}
	if err := ld2.c.Release(ctx, l.LeaseID); err != nil {
		t.Fatal(err)
	}
	grants.checkRestored(t, ld2)
	// Pickup over the emulated SQS queue.
	inst := api.Instance{InstanceID: "i-aws", UsageClass: "spot", InstanceType: "t3.small", CPU: 1, Mem: 1024, ResourceClass: "small", Threshold: time.Now().Add(time.Hour).UTC()}
	if _, err := ld2.c.Offer(ctx, "small", inst); err != nil {
		t.Fatal(err)
	}
	got, err := ld2.c.Pickup(ctx, "small", api.PickupRequest{WorkerID: "w"})
	if err != nil || got.InstanceID != "i-aws" {
		t.Fatalf("pickup on aws = %+v, %v", got, err)
	}
}

// TestReloadLatency measures, over 100 edits, the time from a file write
// to the new config_version in /v1/status. It logs p50/p99 (targets: 150
// ms, 500 ms) and asserts only that every edit was seen.
func TestReloadLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("100 timed edits; skipped with -short")
	}
	conf, cwd := t.TempDir(), t.TempDir()
	main := filepath.Join(conf, "main.hcl")
	writeConf(t, filepath.Join(conf, "rpd.hcl"), e2eRPD)
	writeConf(t, main, "pool \"db\" {\n  slots = 1\n}\n")
	ld := startRPD(t, cwd, nil, "watch", conf)
	const edits = 100
	lat := make([]time.Duration, 0, edits)
	for i := 0; i < edits; i++ {
		v := ld.status().ConfigVersion
		start := time.Now()
		writeConf(t, main, fmt.Sprintf("pool \"db\" {\n  slots = %d\n}\n", i+2))
		seen := false
		for j := 0; j < 1000 && !seen; j++ { // at most ~5 s
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := ld.c.Status(ctx)
			cancel()
			if err == nil && st.ConfigVersion > v {
				seen = true
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		if !seen {
			t.Fatalf("edit %d not applied within 5 s; log:\n%s", i, ld.stderr)
		}
		lat = append(lat, time.Since(start))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("reload latency over %d edits (write -> new config_version in /v1/status): p50 %v, p90 %v, p99 %v, max %v",
		edits, lat[edits/2], lat[edits*9/10], lat[edits*99/100], lat[edits-1])
}

// "rpd watch DIR -listen ADDR": flags after the directory work too.
func TestDaemonE2EFlagsAfterDir(t *testing.T) {
	conf, cwd := t.TempDir(), t.TempDir()
	writeConf(t, filepath.Join(conf, "main.hcl"), e2eRPD)
	addr := freeAddr(t)
	ld := launchRPD(t, cwd, nil, addr, "watch", conf, "-listen", addr, "-log-level", "warn")
	if st := ld.status(); st.ConfigVersion != 1 {
		t.Fatalf("status = %+v", st)
	}

	wd := &workdir{t: t, dir: cwd}
	r := wd.must(1, "watch", conf, "extra")
	contains(t, r, "stderr", "expected one configuration directory")
	wd.must(1, "watch", "-log-level", "loud", conf)
}
