package local

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// threadPolicy is sched_getscheduler(2) of the calling thread.
func threadPolicy(t *testing.T) int {
	t.Helper()
	r, _, e := unix.RawSyscall(unix.SYS_SCHED_GETSCHEDULER, 0, 0, 0)
	if e != 0 {
		t.Fatalf("sched_getscheduler: %v", e)
	}
	return int(r)
}

// Raised, the thread is SCHED_FIFO (with SCHED_RESET_ON_FORK); lowered, it
// is back in the normal class, and a thread the runtime starts while it is
// raised is not real-time.
func TestSyncPriorityRaisesAndLowersTheThread(t *testing.T) {
	p := newSyncPriority(slog.New(slog.DiscardHandler), true)
	if !p.raise() {
		t.Skip("this process may not use SCHED_FIFO (no CAP_SYS_NICE or RLIMIT_RTPRIO)")
	}
	if got, want := threadPolicy(t), unix.SCHED_FIFO|unix.SCHED_RESET_ON_FORK; got != want {
		p.lower(true)
		t.Fatalf("raised: policy %#x; want SCHED_FIFO|SCHED_RESET_ON_FORK (%#x)", got, want)
	}
	// A goroutine started now may need a new thread; whichever thread
	// runs it must be in the normal class.
	var wg sync.WaitGroup
	var other int
	wg.Go(func() {
		r, _, _ := unix.RawSyscall(unix.SYS_SCHED_GETSCHEDULER, 0, 0, 0)
		other = int(r)
	})
	wg.Wait()
	p.lower(true)
	if got := threadPolicy(t); got != schedOther {
		t.Fatalf("lowered: policy %#x; want SCHED_OTHER", got)
	}
	if other != schedOther {
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
	if got := threadPolicy(t); got != schedOther {
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
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seq) < 2*20 {
				t.Fatalf("%d policy changes for 20 synced grants; want at least 40 (raise and lower each)", len(seq))
			}
			for i, p := range seq {
				want := schedOther
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
