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
(128+N when a signal N ended it); 1 when the slots could not be acquired.

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
	if code, ok := parseFlags(e, fs, args); !ok {
		return code
	}
	argv := fs.Args()
	switch {
	case *pool == "":
		fmt.Fprintln(e.stderr, "rpd run: -pool is required")
		return 1
	case len(argv) == 0:
		fmt.Fprintln(e.stderr, "rpd run: no command given; put it after --, e.g. rpd run -pool db -- ./job.sh")
		return 1
	case *slots < 1:
		fmt.Fprintf(e.stderr, "rpd run: -slots %d must be at least 1\n", *slots)
		return 1
	case *ttl != 0 && *ttl < time.Second:
		fmt.Fprintf(e.stderr, "rpd run: -ttl %v must be at least 1s\n", *ttl)
		return 1
	}
	c, err := daemonClient(e, *addr, caFileOptions(*caFile)...)
	if err != nil {
		fmt.Fprintf(e.stderr, "rpd run: %v\n", err)
		return 1
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

	lease, err := acquireLoop(ctx, c, *pool, req, *wait)
	if err != nil {
		fmt.Fprintf(e.stderr, "rpd run: acquire %d slot(s) of pool %s: %v\n", *slots, *pool, unreachable(daemonAddr(e, *addr), err))
		return 1
	}
	defer func() {
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
	if foregroundTTY(e.stdin) {
		forward = func(s os.Signal) bool { return s == syscall.SIGTERM }
	} else {
		cmd.SysProcAttr.Setpgid = true
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
		return 1
	}
	// The parent-death signal follows the thread that forked: keep this
	// goroutine on it, so that no other goroutine can end that thread
	// while the command runs.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(e.stderr, "rpd run: start %s: %v\n", argv[0], err)
		return 127
	}
	hbCtx, stopHB := context.WithCancel(context.WithoutCancel(ctx))
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		heartbeatLoop(hbCtx, e, c, lease)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var waitErr error
loop:
	for {
		select {
		case s := <-sigs:
			if forward(s) {
				_ = cmd.Process.Signal(s)
			}
		case waitErr = <-exited:
			break loop
		}
	}
	stopHB()
	<-hbDone
	return exitCode(e, argv[0], waitErr)
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
func acquireLoop(ctx context.Context, c *client.Client, pool string, req api.AcquireRequest, wait time.Duration) (api.Lease, error) {
	var deadline time.Time
	if wait > 0 {
		deadline = time.Now().Add(wait)
	}
	for attempt := 0; ; attempt++ {
		poll := 60 * time.Second
		if !deadline.IsZero() {
			poll = min(poll, time.Until(deadline))
			if poll <= 0 {
				return api.Lease{}, fmt.Errorf("no slot within -wait %v", wait)
			}
		}
		req.WaitSeconds = poll.Seconds()
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

// heartbeatLoop extends the lease every third of its TTL until ctx ends.
func heartbeatLoop(ctx context.Context, e *env, c *client.Client, l api.Lease) {
	every := time.Duration(l.TTLSeconds*float64(time.Second)) / 3
	if every <= 0 {
		return // no TTL: nothing to extend
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			hctx, cancel := context.WithTimeout(ctx, every)
			_, err := c.Heartbeat(hctx, l.LeaseID)
			cancel()
			switch {
			case err == nil, ctx.Err() != nil:
			case client.IsCode(err, api.CodeNotFound):
				fmt.Fprintf(e.stderr, "rpd run: lease %s was lost (expired or released by the daemon); the command keeps running without its slots\n", l.LeaseID)
				return
			default:
				fmt.Fprintf(e.stderr, "rpd run: heartbeat of lease %s failed: %v; retrying\n", l.LeaseID, err)
			}
		}
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
	return 1
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
