package local

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// threadPolicy is threadScheduler, failing t where it fails.
func threadPolicy(t *testing.T) int {
	t.Helper()
	p := threadScheduler()
	if p < 0 {
		t.Fatal("sched_getscheduler failed")
	}
	return p
}

// Raised, the thread is SCHED_FIFO (with SCHED_RESET_ON_FORK); lowered, it
// is back in the normal class, and the goroutines that run meanwhile run
// on normal threads.
func TestSyncPriorityRaisesAndLowersTheThread(t *testing.T) {
	runtime.LockOSThread() // so that the policy read after lower is this thread's
	defer runtime.UnlockOSThread()
	p := newSyncPriority(slog.New(slog.DiscardHandler), true)
	if !p.raise() {
		t.Skip("this process may not use SCHED_FIFO (no CAP_SYS_NICE or RLIMIT_RTPRIO)")
	}
	if got, want := threadPolicy(t), unix.SCHED_FIFO|unix.SCHED_RESET_ON_FORK; got != want {
		p.lower(true)
		t.Fatalf("raised: policy %#x; want SCHED_FIFO|SCHED_RESET_ON_FORK (%#x)", got, want)
	}
	// A goroutine started now runs on another thread (this one is
	// locked), which must be in the normal class.
	var wg sync.WaitGroup
	var other int
	wg.Go(func() {
		other = threadScheduler()
	})
	wg.Wait()
	p.lower(true)
	if got := threadPolicy(t); got&^unix.SCHED_RESET_ON_FORK != schedOther {
		t.Fatalf("lowered: policy %#x; want SCHED_OTHER", got)
	}
	if other&^unix.SCHED_RESET_ON_FORK != schedOther {
		t.Fatalf("another goroutine's thread ran with policy %#x while the writer was raised; want SCHED_OTHER", other)
	}
}

// A refusal turns the raising off for good, logged once at Info; the
// write goes on at the normal priority. Turned off by the option, raise
// does not try.
func TestSyncPriorityRefusedOrOff(t *testing.T) {
	var logs bytes.Buffer
	p := newSyncPriority(slog.New(slog.NewTextHandler(&logs, nil)), true)
	calls := 0
	p.set = func(int, int32) error { calls++; return syscall.EPERM }
	for range 3 {
		if p.raise() {
			t.Fatal("raise reported a raised thread after EPERM")
		}
	}
	if calls != 1 {
		t.Fatalf("%d attempts; want 1 (a refusal turns it off)", calls)
	}
	if n := strings.Count(logs.String(), "CAP_SYS_NICE"); n != 1 || !strings.Contains(logs.String(), "level=INFO") {
		t.Fatalf("the refusal is logged %d times (want once, at Info): %q", n, logs.String())
	}
	if got := threadPolicy(t); got&^unix.SCHED_RESET_ON_FORK != schedOther {
		t.Fatalf("policy %#x after a refusal; want SCHED_OTHER", got)
	}

	off := newSyncPriority(slog.New(slog.DiscardHandler), false)
	off.set = func(int, int32) error { t.Fatal("raise tried with the option off"); return nil }
	if off.raise() {
		t.Fatal("raise reported a raised thread with the option off")
	}
}

// Every synced append of the journal, direct or buffered, runs raised and
// is lowered after it: the policy changes pair up, FIFO then normal.
func TestJournalAppendsRunRaised(t *testing.T) {
	for _, mode := range []string{"direct", "buffered"} {
		t.Run(mode, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.db")
			b, ps, _, _ := lazyLeader(t, path, nil)
			defer b.Close()
			b.j.noDirect = mode == "buffered"
			var mu sync.Mutex
			var seq []int
			b.j.prio = newSyncPriority(slog.New(slog.DiscardHandler), true)
			b.j.prio.set = func(policy int, _ int32) error {
				mu.Lock()
				seq = append(seq, policy)
				mu.Unlock()
				return nil
			}
			ctx := context.Background()
			for i := range 20 {
				if err := ps.PutLease(ctx, rec(fmt.Sprint("l", i))); err != nil {
					t.Fatal(err)
				}
			}
			if w := b.j.w; mode == "direct" && w.buffered {
				t.Skip("the file system refuses O_DIRECT")
			} else if mode == "buffered" && !w.buffered {
				t.Fatal("the segment is appended direct; want buffered")
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seq) < 2*20 {
				t.Fatalf("%d policy changes for 20 synced grants; want at least 40 (raise and lower each)", len(seq))
			}
			for i, p := range seq {
				want := schedOther | unix.SCHED_RESET_ON_FORK
				if i%2 == 0 {
					want = unix.SCHED_FIFO | unix.SCHED_RESET_ON_FORK
				}
				if p != want {
					t.Fatalf("policy change %d is %#x; want %#x (raise, lower, raise, ...): %v", i, p, want, seq)
				}
			}
		})
	}
}

// Options.NormalPrioritySync (realtime_sync = false) turns the raising off;
// by default it is on.
func TestOpenNormalPrioritySync(t *testing.T) {
	ctx := context.Background()
	for _, normal := range []bool{false, true} {
		b, err := Open(ctx, filepath.Join(t.TempDir(), "c.db"), Options{Stack: "s", NormalPrioritySync: normal})
		if err != nil {
			t.Fatal(err)
		}
		if off := b.j.prio.off.Load(); off != normal {
			t.Errorf("NormalPrioritySync %v: raising off %v; want %v", normal, off, normal)
		}
		b.Close()
	}
}

// A daemon started with another scheduling policy (SCHED_BATCH here) keeps
// it: raise does not try, and says so once.
func TestSyncPriorityKeepsAnotherPolicy(t *testing.T) {
	var logs bytes.Buffer
	p := newSyncPriority(slog.New(slog.NewTextHandler(&logs, nil)), true)
	p.get = func() int { return unix.SCHED_BATCH }
	p.set = func(int, int32) error { t.Fatal("raise tried on a SCHED_BATCH thread"); return nil }
	for range 3 {
		if p.raise() {
			t.Fatal("raise reported a raised thread on a SCHED_BATCH thread")
		}
	}
	if n := strings.Count(logs.String(), "keep the scheduling policy"); n != 1 {
		t.Fatalf("logged %d times; want once: %q", n, logs.String())
	}
}

// A thread raised and then lowered without CAP_SYS_NICE (a process that
// raises through RLIMIT_RTPRIO alone: systemd's LimitRTPRIO=1 under a
// dynamic user, docker --ulimit rtprio=1) is back in the normal class:
// lowering keeps SCHED_RESET_ON_FORK, which only CAP_SYS_NICE may clear.
// Run as root, the test raises, then drops the capability from that one
// thread, which is thrown away after.
func TestSyncPriorityLowersWithoutCapSysNice(t *testing.T) {
	type result struct {
		skip          string
		during, after int
		off           bool
	}
	ch := make(chan result, 1)
	go func() {
		// Locked and never unlocked: the thread ends with the goroutine,
		// and its lost capability with it.
		runtime.LockOSThread()
		p := newSyncPriority(slog.New(slog.DiscardHandler), true)
		if !p.raise() {
			ch <- result{skip: "this process may not use SCHED_FIFO"}
			return
		}
		r := result{during: threadScheduler()}
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		err := unix.Capget(&hdr, &data[0])
		if err == nil {
			data[unix.CAP_SYS_NICE/32].Effective &^= 1 << (unix.CAP_SYS_NICE % 32)
			err = unix.Capset(&hdr, &data[0])
		}
		p.lower(true)
		r.after, r.off = threadScheduler(), p.off.Load()
		if err != nil {
			r.skip = fmt.Sprint("cannot drop CAP_SYS_NICE: ", err)
		}
		ch <- r
	}()
	r := <-ch
	if r.skip != "" {
		t.Skip(r.skip)
	}
	if r.during != unix.SCHED_FIFO|unix.SCHED_RESET_ON_FORK {
		t.Fatalf("raised: policy %#x; want SCHED_FIFO|SCHED_RESET_ON_FORK", r.during)
	}
	if r.after&^unix.SCHED_RESET_ON_FORK != schedOther || r.off {
		t.Fatalf("lowered without CAP_SYS_NICE: policy %#x, turned off %v; want SCHED_OTHER, still on", r.after, r.off)
	}
}
