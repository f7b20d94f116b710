package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/client"
	"github.com/rpdhq/rpd/daemon"
)

const runCmdHelp = `
Acquires slots of a pool from the rpd daemon, runs CMD with ARGS while
heartbeating the lease, and releases the slots whatever happens: when CMD
exits, fails to start, or rpd run is interrupted. The exit status is CMD's
(128+N when a signal N ended it), unless rpd run itself failed:

  121  no daemon answered (unreachable, not ready, no leader) for 30 s
  122  the daemon refused the request (unknown pool, bad priority,
       unauthorized, can never fit, queue full)
  123  the lease was lost while CMD ran, and CMD was stopped
  124  -wait passed before a slot was granted
  125  bad flags or arguments
  126  CMD could not be executed; 127 CMD was not found
  130  interrupted before CMD started

While it waits for slots it prints, every -progress, the pool's use, the
requests waiting by priority and its position in line.

Lost lease: the lease is lost when a heartbeat is answered 404 (it
expired, or was released) or no heartbeat is acknowledged before it
expires (every daemon down or unreachable for the TTL). Another job may
hold the slot by then, so by default (-on-lease-loss=stop) rpd run sends
SIGTERM to CMD (its process group, when it has one), SIGKILL after
-kill-grace, and exits 123 whatever CMD's status. -on-lease-loss=warn only
prints a warning and lets CMD finish without its slots.

Signals: SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to rpd run are passed on
to CMD exactly once. Run from a script or a CI runner, CMD has a process
group of its own and rpd run forwards each signal it gets, including one
sent to its whole process group. When rpd run is the foreground job of a
terminal, CMD stays in rpd run's process group so that job control works
as usual (CMD reads the terminal, Ctrl-Z stops both): the terminal's
Ctrl-C, Ctrl-\ and hangup reach CMD directly and are not forwarded again;
SIGTERM is forwarded. On Linux, CMD is killed if rpd run itself is killed
(kill -9), as its slots are then gone.

The daemon's address is -addr, else RPD_ADDR, else 127.0.0.1:7070: one
address or several separated by commas (the replicas of a stack). A call
that cannot connect or is answered 503 (a leader failover) is retried with
backoff at the next address for up to 30 s; the acquire carries a request
ID, so a retry never takes a second lease. The bearer token is RPD_TOKEN.

Example:

  rpd run -pool database_pool -priority critical -- ./migrate.sh --all
`

// runRun is "rpd run".
func runRun(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet("run", "-pool NAME [options] -- CMD [ARGS...]", runCmdHelp)
	addr := fs.String("addr", "", "daemon address HOST:PORT, or several separated by commas (default $RPD_ADDR, else 127.0.0.1:7070)")
	pool := fs.String("pool", "", "the pool to take slots from (required)")
	priority := fs.String("priority", "", "priority: a number (higher first) or the name of a priority block")
	slots := fs.Int("slots", 1, "slots to hold while CMD runs")
	ttl := fs.Duration("ttl", 0, "lease TTL; the lease is heartbeated every third of it (default: the pool's lease_ttl, else 60s)")
	wait := fs.Duration("wait", 0, "give up acquiring after this long (default: wait until interrupted)")
	task := fs.String("task-id", "", "task ID recorded with the lease (default: the command and the host)")
	caFile := caFileFlag(fs)
	onLoss := fs.String("on-lease-loss", onLossStop, "what to do when the lease is lost while CMD runs: stop (SIGTERM, then SIGKILL after -kill-grace; exit 123) or warn (let CMD finish)")
	killGrace := fs.Duration("kill-grace", 10*time.Second, "time CMD gets to exit after SIGTERM on a lost lease before SIGKILL")
	progress := fs.Duration("progress", 15*time.Second, "how often to print where the request stands while it waits for slots (0: never)")
	if code, ok := parseFlags(e, fs, args); !ok {
		if code != 0 {
			code = exitRunUsage
		}
		return code
	}
	argv := fs.Args()
	switch {
	case *pool == "":
		fmt.Fprintln(e.stderr, "rpd run: -pool is required")
		return exitRunUsage
	case len(argv) == 0:
		fmt.Fprintln(e.stderr, "rpd run: no command given; put it after --, e.g. rpd run -pool db -- ./job.sh")
		return exitRunUsage
	case *slots < 1:
		fmt.Fprintf(e.stderr, "rpd run: -slots %d must be at least 1\n", *slots)
		return exitRunUsage
	case *ttl != 0 && *ttl < time.Second:
		fmt.Fprintf(e.stderr, "rpd run: -ttl %v must be at least 1s\n", *ttl)
		return exitRunUsage
	case *onLoss != onLossStop && *onLoss != onLossWarn:
		fmt.Fprintf(e.stderr, "rpd run: -on-lease-loss %q: use %s or %s\n", *onLoss, onLossStop, onLossWarn)
		return exitRunUsage
	case *killGrace < 0:
		fmt.Fprintf(e.stderr, "rpd run: -kill-grace %v must not be negative\n", *killGrace)
		return exitRunUsage
	}
	// say is called from the progress, heartbeat and stopping goroutines
	// too: one line at a time.
	var sayMu sync.Mutex
	say := func(format string, args ...any) {
		sayMu.Lock()
		defer sayMu.Unlock()
		fmt.Fprintf(e.stderr, "rpd run: "+format+"\n", args...)
	}
	c, err := daemonClient(e, *addr, caFileOptions(*caFile)...)
	if err != nil {
		say("%v", err)
		return exitRunUsage
	}
	req := api.AcquireRequest{TaskID: *task, Slots: *slots, TTLSeconds: ttl.Seconds()}
	if req.TaskID == "" {
		host, _ := os.Hostname()
		req.TaskID = fmt.Sprintf("%s@%s", argv[0], host)
	}
	if *priority != "" {
		if n, err := strconv.Atoi(*priority); err == nil {
			req.Priority = &n
		} else {
			req.PriorityName = *priority
		}
	}

	acqCtx, stopProgress := context.WithCancel(ctx)
	var progressDone sync.WaitGroup
	if *progress > 0 {
		progressDone.Go(func() { waitProgress(acqCtx, c, *pool, req, *progress, say) })
	}
	sentAt := time.Now()
	lease, err := acquireLoop(acqCtx, c, *pool, req, *wait, &sentAt)
	stopProgress()
	progressDone.Wait()
	if err != nil {
		say("acquire %d slot(s) of pool %s: %v", *slots, *pool, unreachable(daemonAddr(e, *addr), err))
		return acquireExit(ctx, err)
	}
	leaseGone := false // lost: nothing to release (and maybe no daemon to ask)
	defer func() {
		if leaseGone {
			return
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := c.Release(rctx, lease.LeaseID); err != nil && !client.IsCode(err, api.CodeNotFound) {
			fmt.Fprintf(e.stderr, "rpd run: release lease %s: %v (its TTL returns the slots)\n", lease.LeaseID, err)
		}
	}()

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = e.stdin, e.stdout, e.stderr
	// Every signal must reach the command once. On a terminal the command
	// shares rpd run's process group (job control works) and the
	// terminal's own signals reach it directly: only SIGTERM is forwarded.
	// Elsewhere it gets a group of its own and everything is forwarded, so
	// a signal to rpd run's group is not delivered twice.
	forward := func(os.Signal) bool { return true }
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	ownGroup := !foregroundTTY(e.stdin)
	if ownGroup {
		cmd.SysProcAttr.Setpgid = true
	} else {
		forward = func(s os.Signal) bool { return s == syscall.SIGTERM }
	}
	dieWithRPDRun(cmd.SysProcAttr)
	// Catch them from now on (so that none kills rpd run before it has
	// released); the context main cancels on SIGINT and SIGTERM is not used
	// while the command runs, the command decides.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	if ctx.Err() != nil {
		// Interrupted between the grant and here: do not start CMD.
		fmt.Fprintf(e.stderr, "rpd run: interrupted before %s started; its slots are released\n", argv[0])
		return exitInterrupted
	}
	// The parent-death signal follows the thread that forked: keep this
	// goroutine on it, so that no other goroutine can end that thread
	// while the command runs.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(e.stderr, "rpd run: start %s: %v\n", argv[0], err)
		return startExit(err)
	}
	hbCtx, stopHB := context.WithCancel(context.WithoutCancel(ctx))
	hbDone := make(chan struct{})
	lost := make(chan string, 1)
	go func() {
		defer close(hbDone)
		keepLease(hbCtx, c, lease, sentAt, lost, say)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var waitErr error
	leaseLost := false
	stopped := make(chan struct{}) // closed once the command exited
	defer close(stopped)
loop:
	for {
		select {
		case s := <-sigs:
			if forward(s) {
				_ = cmd.Process.Signal(s)
			}
		case why := <-lost:
			leaseGone = true
			if *onLoss == onLossWarn {
				say("%s; -on-lease-loss=warn: %s keeps running without its slots", why, argv[0])
				continue
			}
			leaseLost = true
			say("%s; stopping %s (SIGTERM, SIGKILL after %v): another job may hold its slots now", why, argv[0], *killGrace)
			go stopCommand(cmd, ownGroup, *killGrace, stopped, say)
		case waitErr = <-exited:
			break loop
		}
	}
	stopHB()
	<-hbDone
	code := exitCode(e, argv[0], waitErr)
	if leaseLost {
		say("%s was stopped after its lease was lost (its own status: %d); exiting %d", argv[0], code, exitLeaseLost)
		return exitLeaseLost
	}
	return code
}

// foregroundTTY reports whether stdin is a terminal whose foreground
// process group is rpd run's own: rpd run is a terminal's foreground job.
func foregroundTTY(stdin io.Reader) bool {
	f, ok := stdin.(*os.File)
	if !ok {
		return false
	}
	pgrp, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	return err == nil && pgrp == syscall.Getpgrp() // else not a terminal, or a background job
}

// acquireLoop long-polls until granted, ctx ends, or wait (if > 0) passes.
// sentAt is set to when the successful request was sent: the lease's TTL
// runs from no later than that.
func acquireLoop(ctx context.Context, c *client.Client, pool string, req api.AcquireRequest, wait time.Duration, sentAt *time.Time) (api.Lease, error) {
	var deadline time.Time
	if wait > 0 {
		deadline = time.Now().Add(wait)
	}
	for attempt := 0; ; attempt++ {
		poll := 60 * time.Second
		if !deadline.IsZero() {
			poll = min(poll, time.Until(deadline))
			if poll <= 0 {
				return api.Lease{}, fmt.Errorf("%w %v", errAcquireTimeout, wait)
			}
		}
		req.WaitSeconds = poll.Seconds()
		*sentAt = time.Now()
		l, err := c.Acquire(ctx, pool, req)
		switch {
		case err == nil:
			return l, nil
		case client.IsCode(err, api.CodeTimeout):
			continue // the long-poll ended; ask again
		case ctx.Err() != nil:
			return api.Lease{}, ctx.Err()
		}
		return api.Lease{}, err
	}
}

// exitCode is the command's exit status, 128+N for a signal N.
func exitCode(e *env, name string, err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	fmt.Fprintf(e.stderr, "rpd run: %s: %v\n", name, err)
	return exitRunUsage
}

// daemonAddr is the daemon's address: addr (-addr), else RPD_ADDR, else
// 127.0.0.1:7070; several replicas' addresses are separated by commas.
func daemonAddr(e *env, addr string) string {
	if addr == "" {
		addr, _ = e.getenv("RPD_ADDR")
	}
	if addr == "" {
		addr = daemon.DefaultListen
	}
	return addr
}

// daemonClient builds a client from -addr, RPD_ADDR, RPD_TOKEN and
// RPD_CA_FILE (the CA an https:// daemon's certificate is verified with);
// extra options (a shorter retry budget, -ca-file) come last.
func daemonClient(e *env, addr string, extra ...client.Option) (*client.Client, error) {
	addr = daemonAddr(e, addr)
	var opts []client.Option
	if tok, ok := e.getenv("RPD_TOKEN"); ok && tok != "" {
		opts = append(opts, client.WithToken(tok))
	}
	if ca, ok := e.getenv("RPD_CA_FILE"); ok && ca != "" {
		opts = append(opts, client.WithCAFile(ca))
	}
	return client.New(addr, append(opts, extra...)...)
}

// caFileFlag registers -ca-file; caFileOptions turns it into client
// options (none when not given: RPD_CA_FILE, else the system's roots).
func caFileFlag(fs *flag.FlagSet) *string {
	return fs.String("ca-file", "", "PEM CA bundle an https:// daemon's certificate is verified with (default $RPD_CA_FILE, else the system's roots)")
}

func caFileOptions(path string) []client.Option {
	if path == "" {
		return nil
	}
	return []client.Option{client.WithCAFile(path)}
}
