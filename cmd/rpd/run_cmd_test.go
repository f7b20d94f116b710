package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rpdhq/rpd/api"
)

func TestRunUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--", "true"}, "-pool is required"},
		{[]string{"run", "-pool", "db"}, "no command given"},
		{[]string{"run", "-pool", "db", "-slots", "0", "--", "true"}, "-slots 0"},
		{[]string{"run", "-pool", "db", "-ttl", "10ms", "--", "true"}, "-ttl"},
		{[]string{"run", "-pool", "db", "-addr", "ftp://x", "--", "true"}, "daemon address"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("rpd %v = exit %d, stderr %q; want 1 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

func TestRunAgainstADaemon(t *testing.T) {
	conf, cwd := t.TempDir(), t.TempDir()
	writeConf(t, filepath.Join(conf, "main.hcl"), e2eRPD+"pool \"db\" {\n  slots = 1\n}\npriority \"critical\" { weight = 50 }\n")
	ld := startRPD(t, cwd, nil, "watch", conf)
	wd := &workdir{t: t, dir: cwd}

	// Exit codes pass through; the slot is released whatever happens.
	wd.must(0, "run", "-addr", ld.addr, "-pool", "db", "-priority", "critical", "--", "true")
	wd.must(5, "run", "-addr", ld.addr, "-pool", "db", "-priority", "7", "--", "sh", "-c", "exit 5")
	r := wd.must(127, "run", "-addr", ld.addr, "-pool", "db", "--", "/no/such/command")
	contains(t, r, "stderr", "start /no/such/command")
	if ps := ld.pool("db"); ps.Used != 0 {
		t.Fatalf("slots left held after rpd run: %+v", ps)
	}
	// Unknown pool or priority name: nothing runs, exit 1.
	r = wd.must(1, "run", "-addr", ld.addr, "-pool", "nope", "--", "sh", "-c", "echo ran")
	if strings.Contains(r.stdout, "ran") {
		t.Fatal("the command ran without its slots")
	}
	wd.must(1, "run", "-addr", ld.addr, "-pool", "db", "-priority", "urgent", "--", "true")
	// -wait bounds the acquire when the pool is full.
	hold, err := ld.c.Acquire(context.Background(), "db", api.AcquireRequest{})
	if err != nil {
		t.Fatal(err)
	}
	r = wd.must(1, "run", "-addr", ld.addr, "-pool", "db", "-wait", "300ms", "--", "true")
	contains(t, r, "stderr", "acquire 1 slot(s) of pool db")
	if err := ld.c.Release(context.Background(), hold.LeaseID); err != nil {
		t.Fatal(err)
	}
}

// SIGTERM to rpd run reaches the command, whose exit code rpd run returns,
// and the slot is released.
func TestRunForwardsSignals(t *testing.T) {
	conf, cwd := t.TempDir(), t.TempDir()
	writeConf(t, filepath.Join(conf, "main.hcl"), e2eRPD+"pool \"db\" {\n  slots = 1\n}\n")
	ld := startRPD(t, cwd, nil, "watch", conf)
	marker := filepath.Join(cwd, "started")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, rpdBinary, "run", "-addr", ld.addr, "-pool", "db", "-ttl", "3s", "--",
		"sh", "-c", `trap 'exit 42' TERM; touch `+marker+`; i=0; while [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; exit 9`)
	cmd.Env = cleanEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	// Held for longer than the TTL: the heartbeat keeps it.
	time.Sleep(3500 * time.Millisecond)
	if ps := ld.pool("db"); ps.Used != 1 {
		t.Fatalf("while the command runs past its TTL, pool db = %+v; want its slot held", ps)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 42 {
		t.Fatalf("rpd run after SIGTERM: exit %d (%v), want the command's 42; stderr:\n%s", code, err, stderr.String())
	}
	if ps := ld.pool("db"); ps.Used != 0 {
		t.Fatalf("the slot was not released after the signal: %+v", ps)
	}
}

func TestStatusCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"status", "-addr", freeAddrNoListen(t)}, &stdout, &stderr); code != 1 {
		t.Fatalf("status of no daemon: exit %d, want 1", code)
	}
	conf, cwd := t.TempDir(), t.TempDir()
	writeConf(t, filepath.Join(conf, "main.hcl"), e2eRPD+"pool \"db\" {\n  slots = 1\n}\nbudget \"scan\" {}\nvm_ceiling \"vms\" { max = 4 }\n")
	ld := startRPD(t, cwd, nil, "watch", conf)
	stdout.Reset()
	if code := run([]string{"status", "-addr", ld.addr}, &stdout, &stderr); code != 0 {
		t.Fatalf("status: exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"rpd watch", "POOL", "db", "BUDGET", "256MiB/256MiB", "VM CEILING", "vms"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("status output lacks %q:\n%s", want, stdout.String())
		}
	}
	writeConf(t, filepath.Join(conf, "bad.hcl"), "pool {")
	ld.waitStatus("the rejection", func(st api.Status) bool { return !st.LastReload.OK })
	stdout.Reset()
	if code := run([]string{"status", "-addr", ld.addr}, &stdout, &stderr); code != 2 || !strings.Contains(stdout.String(), "REJECTED") {
		t.Fatalf("status after a rejected reload: exit %d, output:\n%s", code, stdout.String())
	}
	stdout.Reset()
	if code := run([]string{"status", "-json", "-addr", ld.addr}, &stdout, &stderr); code != 2 || !strings.Contains(stdout.String(), `"config_version"`) {
		t.Fatalf("status -json: exit %d, output:\n%s", code, stdout.String())
	}
}

// freeAddrNoListen is a loopback address nothing listens on.
func freeAddrNoListen(t *testing.T) string { return freeAddr(t) }

func TestBytesText(t *testing.T) {
	for n, want := range map[uint64]string{0: "0B", 1023: "1023B", 1024: "1KiB", 256 << 20: "256MiB", 3 << 30: "3GiB", 1536: "1.5KiB"} {
		if got := bytesText(n); got != want {
			t.Errorf("bytesText(%d) = %q, want %q", n, got, want)
		}
	}
}
