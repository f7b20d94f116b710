package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/internal/waitfor"
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
		{[]string{"run", "-pool", "db", "-on-lease-loss", "ignore", "--", "true"}, "-on-lease-loss"},
		{[]string{"run", "-pool", "db", "-kill-grace", "-1s", "--", "true"}, "-kill-grace"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != exitRunUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("rpd %v = exit %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), exitRunUsage, tc.want)
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
	// Unknown pool or priority name: nothing runs, exit 122 (refused).
	r = wd.must(exitRefused, "run", "-addr", ld.addr, "-pool", "nope", "--", "sh", "-c", "echo ran")
	if strings.Contains(r.stdout, "ran") {
		t.Fatal("the command ran without its slots")
	}
	wd.must(exitRefused, "run", "-addr", ld.addr, "-pool", "db", "-priority", "urgent", "--", "true")
	// -wait bounds the acquire when the pool is full.
	hold, err := ld.c.Acquire(context.Background(), "db", api.AcquireRequest{})
	if err != nil {
		t.Fatal(err)
	}
	r = wd.must(exitAcquireTimeout, "run", "-addr", ld.addr, "-pool", "db", "-wait", "1500ms", "-progress", "1s", "--", "true")
	contains(t, r, "stderr", "acquire 1 slot(s) of pool db")
	contains(t, r, "stderr", "waiting 1s for 1 slot(s) of pool db (priority 0): 1/1 used, 1 waiting (1 at priority 0); position 1 in line")
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

// waitFile polls for path to exist, at most 5 s.
func waitFile(t *testing.T, path string) {
	t.Helper()
	waitfor.Until(t, path+" to appear", func() bool { _, err := os.Stat(path); return err == nil })
}

// countLines is the number of lines in path (0 when it does not exist).
func countLines(path string) int {
	b, _ := os.ReadFile(path)
	return strings.Count(string(b), "\n")
}

// intCounter is a command that appends a line to its file per SIGINT,
// exits 42 on SIGTERM and 9 after 10 s. It copies its /proc stat line to
// marker when it starts.
func intCounter(marker, ints string) []string {
	return []string{"sh", "-c", `trap 'echo int >> ` + ints + `' INT; trap 'exit 42' TERM; cat /proc/$$/stat > ` + marker + `.tmp; mv ` + marker + `.tmp ` + marker +
		`; i=0; while [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; exit 9`}
}

// procStat is the part of a /proc/PID/stat line the tests look at.
type procStat struct{ pid, pgrp, tpgid int }

// readProcStat parses the /proc/PID/stat copy a command wrote to path.
func readProcStat(t *testing.T, path string) procStat {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	line := string(b)
	var st procStat
	if _, err := fmt.Sscan(line, &st.pid); err != nil {
		t.Fatalf("%s: %q: %v", path, line, err)
	}
	i := strings.LastIndex(line, ")")
	f := strings.Fields(line[i+1:]) // state ppid pgrp session tty_nr tpgid ...
	if i < 0 || len(f) < 6 {
		t.Fatalf("%s: not a /proc stat line: %q", path, line)
	}
	if _, err := fmt.Sscan(f[2]+" "+f[5], &st.pgrp, &st.tpgid); err != nil {
		t.Fatalf("%s: %q: %v", path, line, err)
	}
	return st
}

// A SIGINT sent to rpd run's whole process group (what a terminal's
// Ctrl-C or a CI runner does) reaches the command once: the command has a
// process group of its own and gets the signal only by forwarding.
func TestRunSignalToProcessGroupReachesCommandOnce(t *testing.T) {
	conf, cwd := t.TempDir(), t.TempDir()
	writeConf(t, filepath.Join(conf, "main.hcl"), e2eRPD+"pool \"db\" {\n  slots = 1\n}\n")
	ld := startRPD(t, cwd, nil, "watch", conf)
	marker, ints := filepath.Join(cwd, "started"), filepath.Join(cwd, "ints")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, rpdBinary, append([]string{"run", "-addr", ld.addr, "-pool", "db", "--"}, intCounter(marker, ints)...)...)
	cmd.Env = cleanEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a group to signal, like a job's
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, marker)
	if st := readProcStat(t, marker); st.pgrp != st.pid || st.pgrp == cmd.Process.Pid {
		t.Fatalf("the command (pid %d) is in process group %d, want a group of its own, not rpd run's %d", st.pid, st.pgrp, cmd.Process.Pid)
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100 && countLines(ints) == 0; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	// rpd run forwards the SIGTERM after anything it forwarded before, and
	// a SIGINT the command got directly came before both: so once the
	// command has exited on the SIGTERM, every SIGINT delivery has landed.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 42 {
		t.Fatalf("rpd run after SIGTERM: exit %d (%v), want the command's 42; stderr:\n%s", code, err, stderr.String())
	}
	if n := countLines(ints); n != 1 {
		t.Fatalf("the command saw %d SIGINTs for one sent to rpd run's process group, want 1", n)
	}
	if ps := ld.pool("db"); ps.Used != 0 {
		t.Fatalf("the slot was not released: %+v", ps)
	}
}

// openPTY returns the master and the slave of a new pseudo-terminal.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

// On a terminal, the command stays in rpd run's process group, the
// terminal's foreground job: it reads the terminal and Ctrl-C reaches it
// (directly, not forwarded again); rpd run survives the Ctrl-C, releases,
// and returns the command's code.
func TestRunOnATerminal(t *testing.T) {
	conf, cwd := t.TempDir(), t.TempDir()
	writeConf(t, filepath.Join(conf, "main.hcl"), e2eRPD+"pool \"db\" {\n  slots = 1\n}\n")
	ld := startRPD(t, cwd, nil, "watch", conf)
	master, slave := openPTY(t)
	marker, ints, got := filepath.Join(cwd, "started"), filepath.Join(cwd, "ints"), filepath.Join(cwd, "got")
	script := `trap 'echo int >> ` + ints + `' INT; cat /proc/$$/stat > ` + marker + `.tmp; mv ` + marker + `.tmp ` + marker + `; read line; echo "$line" > ` + got +
		`; i=0; while [ $i -lt 200 ] && [ ! -s ` + ints + ` ]; do sleep 0.05; i=$((i+1)); done; exit 7`
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, rpdBinary, "run", "-addr", ld.addr, "-pool", "db", "--", "sh", "-c", script)
	cmd.Env = cleanEnv()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	// rpd run leads a session whose controlling terminal is the pty: it is
	// the terminal's foreground job, as when typed at a shell.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, master) }() // drain the echo
	waitFile(t, marker)
	if st := readProcStat(t, marker); st.pgrp != cmd.Process.Pid || st.tpgid != st.pgrp {
		t.Fatalf("the command (pid %d) is in group %d with the terminal's foreground group %d; want both rpd run's %d", st.pid, st.pgrp, st.tpgid, cmd.Process.Pid)
	}
	if _, err := master.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	waitFile(t, got)
	if _, err := master.Write([]byte{3}); err != nil { // Ctrl-C
		t.Fatal(err)
	}
	err := cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 7 {
		t.Fatalf("rpd run on a terminal after Ctrl-C: exit %d (%v), want the command's 7", code, err)
	}
	if b, _ := os.ReadFile(got); strings.TrimSpace(string(b)) != "hello" {
		t.Fatalf("the command read %q from the terminal, want hello", b)
	}
	if n := countLines(ints); n != 1 {
		t.Fatalf("the command saw %d SIGINTs for one Ctrl-C, want 1", n)
	}
	if ps := ld.pool("db"); ps.Used != 0 {
		t.Fatalf("the slot was not released: %+v", ps)
	}
}

// When rpd run is killed with SIGKILL, the command (in its own process
// group, out of reach of a signal to rpd run's group) is killed with it.
func TestRunCommandDiesWithRPDRun(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux only")
	}
	conf, cwd := t.TempDir(), t.TempDir()
	writeConf(t, filepath.Join(conf, "main.hcl"), e2eRPD+"pool \"db\" {\n  slots = 1\n}\n")
	ld := startRPD(t, cwd, nil, "watch", conf)
	marker, ints := filepath.Join(cwd, "started"), filepath.Join(cwd, "ints")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, rpdBinary, append([]string{"run", "-addr", ld.addr, "-pool", "db", "--"}, intCounter(marker, ints)...)...)
	cmd.Env = cleanEnv()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, marker)
	child := readProcStat(t, marker).pid
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	for i := 0; i < 200; i++ { // 5 s
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child))
		if err != nil {
			return // gone (and reaped)
		}
		if i := strings.LastIndex(string(b), ")"); i >= 0 && strings.HasPrefix(string(b[i:]), ") Z") {
			return // dead, waiting for its new parent to reap it
		}
		time.Sleep(25 * time.Millisecond)
	}
	_ = syscall.Kill(child, syscall.SIGKILL)
	t.Fatalf("the command (pid %d) still runs 5 s after rpd run was killed", child)
}

// A daemon that dies under rpd run takes the lease with it: once the TTL
// passes unacknowledged, the command's process group gets SIGTERM, then
// SIGKILL after -kill-grace, and rpd run exits 123; with
// -on-lease-loss=warn the command finishes and its status is returned.
func TestRunStopsTheCommandOnALostLease(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		script   string
		want     int
		finished bool
	}{
		// The shell ignores SIGTERM: only SIGKILL ends it.
		{"stop", []string{"-kill-grace", "500ms"}, `trap '' TERM; sleep 0.1; i=0; while [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; touch MARK`, exitLeaseLost, false},
		{"warn", []string{"-on-lease-loss", "warn"}, `i=0; while [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done; touch MARK; exit 3`, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A stack of its own: a new leader on the last subtest's state
			// would restore (and extend) the lease its killed daemon held,
			// as holders that had nobody to heartbeat to keep their slot.
			conf, cwd := t.TempDir(), t.TempDir()
			writeConf(t, filepath.Join(conf, "main.hcl"), e2eRPD+"pool \"db\" {\n  slots = 1\n}\n")
			ld := startRPD(t, cwd, nil, "watch", conf)
			marker := filepath.Join(cwd, "MARK")
			script := strings.ReplaceAll(tc.script, "MARK", marker)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			args := append([]string{"run", "-addr", ld.addr, "-pool", "db", "-ttl", "2s"}, tc.args...)
			cmd := exec.CommandContext(ctx, rpdBinary, append(args, "--", "sh", "-c", script)...)
			cmd.Env = cleanEnv()
			var stderr syncBuffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			for i := 0; ld.pool("db").Used == 0; i++ {
				if i == 600 {
					t.Fatalf("rpd run held no slot after 15 s; stderr:\n%s", stderr.String())
				}
				time.Sleep(25 * time.Millisecond)
			}
			start := time.Now()
			ld.stop(syscall.SIGKILL)
			_ = cmd.Wait()
			code, took := cmd.ProcessState.ExitCode(), time.Since(start)
			if code != tc.want {
				t.Fatalf("rpd run after its daemon died: exit %d after %v, want %d; stderr:\n%s", code, took, tc.want, stderr.String())
			}
			_, err := os.Stat(marker)
			if finished := err == nil; finished != tc.finished {
				t.Fatalf("command finished = %v, want %v; stderr:\n%s", finished, tc.finished, stderr.String())
			}
			if !tc.finished && took > 5*time.Second {
				t.Errorf("stopped %v after the daemon died; want within the 2s TTL + 0.5s grace", took)
			}
			if !strings.Contains(stderr.String(), "expired") {
				t.Errorf("stderr does not say the lease expired:\n%s", stderr.String())
			}
		})
	}
}

func TestPositionText(t *testing.T) {
	q := []api.QueuedPriority{
		{Priority: 100, Requests: 2, TaskIDs: []string{"a", "b"}},
		{Priority: 0, Requests: 12, TaskIDs: []string{"c", "me", "d", "dup", "dup"}},
	}
	for _, tc := range []struct {
		weight int
		task   string
		want   string
	}{
		{0, "me", "position 4 in line"},
		{100, "b", "position 2 in line"},
		{0, "unlisted", "2 ahead of it at higher priorities"},
		{0, "dup", "2 ahead of it at higher priorities"}, // two of that name: unknown which
		{200, "x", "0 ahead of it at higher priorities"},
	} {
		if got := positionText(q, tc.weight, tc.task); got != tc.want {
			t.Errorf("positionText(%d, %q) = %q; want %q", tc.weight, tc.task, got, tc.want)
		}
	}
}
