package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/client"
)

// Exit codes of rpd run's own failures, apart from the command's (which
// rpd run passes on: its exit status, 128+N for a signal N). They follow
// timeout(1) where it has one (124 timed out, 125 rpd itself failed, 126
// cannot execute, 127 not found); docs/cli.md lists them.
const (
	exitRunUsage       = 125 // bad flags or arguments, or rpd run itself failed
	exitCannotExecute  = 126 // CMD exists but could not be started
	exitNotFound       = 127 // CMD was not found
	exitAcquireTimeout = 124 // -wait passed before a slot was granted
	exitRefused        = 122 // the daemon refused the request (unknown pool, bad priority, unauthorized, never fits, queue full)
	exitUnreachable    = 121 // no daemon answered (connection refused, not ready, no leader) within the retry budget
	exitLeaseLost      = 123 // the lease was lost while CMD ran; CMD was stopped (see -on-lease-loss)
	exitInterrupted    = 130 // interrupted (SIGINT, SIGTERM) before CMD started; nothing is held
)

// Policies of -on-lease-loss.
const (
	onLossStop = "stop" // SIGTERM the command's process group, SIGKILL after -kill-grace
	onLossWarn = "warn" // say so and let the command finish (its exit status is returned)
)

// errAcquireTimeout: -wait passed before a grant.
var errAcquireTimeout = errors.New("no slot was granted within -wait")

// acquireExit maps an acquire failure to rpd run's exit code.
func acquireExit(ctx context.Context, err error) int {
	var ae *api.Error
	switch {
	case errors.Is(err, errAcquireTimeout):
		return exitAcquireTimeout
	case ctx.Err() != nil:
		return exitInterrupted
	case errors.As(err, &ae):
		switch ae.Code {
		case api.CodeNotLeader, api.CodeNotReady, api.CodeInternal:
			return exitUnreachable
		}
		return exitRefused
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, syscall.ECONNREFUSED) || isDNSError(err) {
		return exitUnreachable
	}
	return exitUnreachable // the client gives up only on transport failures
}

// startExit maps a failure to start the command to 126 or 127, as shells do.
func startExit(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, syscall.ENOENT) {
		return exitNotFound
	}
	return exitCannotExecute
}

// keepLease heartbeats l every third of its TTL until ctx ends, and
// reports on lost (once) when the lease can no longer be held: a heartbeat
// answered 404 (it expired, or was released), or no heartbeat acknowledged
// before the lease's expiry as measured on this host's monotonic clock
// from the sending of the last acknowledged one (or of the acquire), so a
// slot that another job may hold by now is never taken for still ours.
func keepLease(ctx context.Context, c *client.Client, l api.Lease, sentAt time.Time, lost chan<- string, warn func(string, ...any)) {
	ttl := time.Duration(l.TTLSeconds * float64(time.Second))
	if ttl <= 0 {
		return // no TTL: nothing to extend, nothing to lose
	}
	every := ttl / 3
	deadline := sentAt.Add(ttl)
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		left := time.Until(deadline)
		if left <= 0 {
			lost <- fmt.Sprintf("lease %s expired at %s: no heartbeat was acknowledged for %v (the daemon is down or unreachable)", l.LeaseID, deadline.Format(time.RFC3339), ttl)
			return
		}
		sent := time.Now()
		hctx, cancel := context.WithTimeout(ctx, min(every, left))
		got, err := c.Heartbeat(hctx, l.LeaseID)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			if d := time.Duration(got.TTLSeconds * float64(time.Second)); d > 0 {
				ttl, every = d, d/3
			}
			deadline = sent.Add(ttl)
		case client.IsCode(err, api.CodeNotFound):
			lost <- fmt.Sprintf("lease %s is gone (the daemon says it expired or was released)", l.LeaseID)
			return
		default:
			warn("heartbeat of lease %s failed: %v; retrying until it expires in %v", l.LeaseID, err, time.Until(deadline).Round(100*time.Millisecond))
		}
		t.Reset(max(0, min(every, time.Until(deadline))))
	}
}

// stopCommand sends SIGTERM to the command (its process group when it has
// one), then SIGKILL once grace has passed, until exited is closed.
func stopCommand(cmd *exec.Cmd, ownGroup bool, grace time.Duration, exited <-chan struct{}, say func(string, ...any)) {
	signal := func(s syscall.Signal) {
		if ownGroup {
			_ = syscall.Kill(-cmd.Process.Pid, s)
			return
		}
		_ = cmd.Process.Signal(s)
	}
	signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C:
		say("%s did not exit within -kill-grace %v of SIGTERM; sending SIGKILL", cmd.Path, grace)
		signal(syscall.SIGKILL)
	}
}

// waitProgress says, while an acquire waits, where the request stands:
// the pool's use and how many requests of at least its priority wait
// ahead of it. It prints after a second, then every interval.
func waitProgress(ctx context.Context, c *client.Client, pool string, req api.AcquireRequest, interval time.Duration, say func(string, ...any)) {
	start := time.Now()
	priority, weight, known := "0", 0, true
	switch {
	case req.Priority != nil:
		priority, weight = strconv.Itoa(*req.Priority), *req.Priority
	case req.PriorityName != "":
		priority, known = req.PriorityName, false
	}
	t := time.NewTimer(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if !known { // a priority name: its weight, once
			if st, err := c.Status(pctx); err == nil {
				weight, known = st.Priorities[req.PriorityName]
			}
		}
		p, err := c.Pool(pctx, pool)
		cancel()
		waited := time.Since(start).Round(time.Second)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			say("waiting %v for %d slot(s) of pool %s (priority %s); its status is unavailable: %v", waited, req.Slots, pool, priority, err)
		default:
			line := fmt.Sprintf("waiting %v for %d slot(s) of pool %s (priority %s): %d/%d used, %s", waited, req.Slots, pool, priority, p.Used, p.Total, queueText(p.QueuedByPriority))
			if known {
				line += "; " + positionText(p.QueuedByPriority, weight, req.TaskID)
			}
			say("%s", line)
		}
		t.Reset(interval)
	}
}

// positionText says where a request of task taskID at weight stands in
// q (served highest priority first, first come first within one): its
// position when the daemon named it among the first waiters of its
// priority, else how many wait ahead of it at higher priorities.
func positionText(q []api.QueuedPriority, weight int, taskID string) string {
	ahead := 0
	for _, e := range q {
		switch {
		case e.Priority > weight:
			ahead += e.Requests
		case e.Priority == weight:
			if i := slices.Index(e.TaskIDs, taskID); i >= 0 && slices.Index(e.TaskIDs[i+1:], taskID) < 0 {
				return fmt.Sprintf("position %d in line", ahead+i+1)
			}
		}
	}
	return fmt.Sprintf("%d ahead of it at higher priorities", ahead)
}

// queueText renders the waiting requests by priority, highest first:
// "3 waiting (2 at priority 100, 1 at priority 0)".
func queueText(q []api.QueuedPriority) string {
	n := 0
	text := ""
	for i, e := range q {
		n += e.Requests
		if i > 0 {
			text += ", "
		}
		text += fmt.Sprintf("%d at priority %d", e.Requests, e.Priority)
	}
	if n == 0 {
		return "nobody waiting"
	}
	return fmt.Sprintf("%d waiting (%s)", n, text)
}
