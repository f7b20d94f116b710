package local

import (
	"log/slog"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// syncPriority runs the grant journal's synced appends with the writing
// thread in the real-time class (SCHED_FIFO, priority 1) for the length
// of the write, where the process may (CAP_SYS_NICE, or RLIMIT_RTPRIO of
// at least 1, as systemd's LimitRTPRIO=1 gives).
//
// Why: on a disk without FUA an RWF_DSYNC write (and an fdatasync) wakes
// its thread twice in the kernel, once when the data is written, so that
// it issues the cache flush, and once when the flush completes. Under
// load both cores run the process's other threads, and the scheduler
// (EEVDF) often leaves the woken writer runnable but unrun until the next
// tick, 4 ms at HZ=250: every grant in the batch, and every one queued
// behind it, waits that long. A real-time thread preempts the running
// fair-class thread at once. Only the write's syscall (pwritev2, or
// fdatasync) runs raised, and the thread sleeps in the disk for nearly
// all of it, so it takes no CPU from anything else. Measured in
// docs/grant-path-measurements.md ("fourteenth session").
//
// The thread is locked to the goroutine while raised, so that no other
// goroutine runs on it, and SCHED_RESET_ON_FORK keeps a thread the
// runtime creates meanwhile out of the class. Lowering keeps that flag:
// only CAP_SYS_NICE may clear it, and a process that raises through
// RLIMIT_RTPRIO alone has not got it. A refusal to raise (EPERM: no
// capability, a container, a cgroup without real-time runtime) turns the
// raising off for good, logged once; the appends then run as they would
// without it. So does a thread that does not start in SCHED_OTHER (a
// daemon started with another policy keeps it).
type syncPriority struct {
	off atomic.Bool
	// tried is set by the first raise, which checks the thread's policy
	// and logs the outcome once.
	tried atomic.Bool
	log   *slog.Logger
	// set changes the calling thread's scheduling policy, and get reads
	// it (tests replace them).
	set func(policy int, prio int32) error
	get func() int
}

func newSyncPriority(log *slog.Logger, enabled bool) *syncPriority {
	p := &syncPriority{log: log, set: setThreadScheduler, get: threadScheduler}
	p.off.Store(!enabled)
	return p
}

// raise puts the calling goroutine's thread in the real-time class and
// locks it there; the caller calls lower(raised) after its write.
func (p *syncPriority) raise() (raised bool) {
	if p == nil || p.off.Load() {
		return false
	}
	runtime.LockOSThread()
	if !p.tried.Load() {
		// The first append: the threads run as the daemon was started.
		if policy := p.get(); policy&^unix.SCHED_RESET_ON_FORK != schedOther {
			runtime.UnlockOSThread()
			p.off.Store(true)
			p.tried.Store(true)
			p.log.Info("local backend: the grant journal's synced appends keep the scheduling policy the daemon was started with", "policy", policy)
			return false
		}
	}
	if err := p.set(unix.SCHED_FIFO|unix.SCHED_RESET_ON_FORK, 1); err != nil {
		runtime.UnlockOSThread()
		p.off.Store(true)
		if !p.tried.Swap(true) {
			p.log.Info("local backend: the grant journal's synced appends run at normal priority: raising the writing thread to SCHED_FIFO was refused (it needs CAP_SYS_NICE or RLIMIT_RTPRIO >= 1; see docs/operations.md); grants under load may wait up to a scheduler tick longer", "err", err)
		}
		return false
	}
	if !p.tried.Swap(true) {
		p.log.Debug("local backend: the grant journal's synced appends run with the writing thread at SCHED_FIFO")
	}
	return true
}

// lower ends what raise began.
func (p *syncPriority) lower(raised bool) {
	if !raised {
		return
	}
	if err := p.set(schedOther|unix.SCHED_RESET_ON_FORK, 0); err != nil {
		// Not expected: a thread may leave the real-time class, and the
		// flag it may not clear without CAP_SYS_NICE is kept. The thread
		// stays locked to the journal's writer, so that no other
		// goroutine runs on it.
		p.off.Store(true)
		p.log.Error("local backend: could not return the grant journal's writing thread to the normal scheduling class; it stays locked to the writer", "err", err)
		return
	}
	runtime.UnlockOSThread()
}

// setThreadScheduler is sched_setscheduler(2) for the calling thread.
func setThreadScheduler(policy int, prio int32) error {
	param := struct{ priority int32 }{prio}
	_, _, e := unix.RawSyscall(unix.SYS_SCHED_SETSCHEDULER, 0, uintptr(policy), uintptr(unsafe.Pointer(&param)))
	if e != 0 {
		return e
	}
	return nil
}

// threadScheduler is sched_getscheduler(2) for the calling thread (-1 if
// it fails, which no policy equals).
func threadScheduler() int {
	r, _, e := unix.RawSyscall(unix.SYS_SCHED_GETSCHEDULER, 0, 0, 0)
	if e != 0 {
		return -1
	}
	return int(r)
}

// schedOther is SCHED_OTHER, the normal class (x/sys/unix names only the
// others).
const schedOther = 0
