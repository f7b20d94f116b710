package local_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/local"
	"github.com/rpdhq/rpd/runtime/pools"
)

const crashEnv = "RPD_JOURNAL_CRASH_HELPER"

func crashLease(id string) pools.LeaseRecord {
	return pools.LeaseRecord{LeaseID: id, Pool: "p", TaskID: "t-" + id, Slots: 1, Owner: "o",
		GrantedAt: time.Unix(100, 0), ExpiresAt: time.Unix(1<<32, 0), TTL: time.Hour}
}

// TestJournalCrashHelper is the process TestJournalKill9 kills: it leads
// the stack and writes grants, heartbeats and releases through the fenced
// stores from 8 goroutines, printing "begin <op> <id>" before and "ack <op>
// <id>" after each write that succeeded, until it is killed (bounded: 20000
// writes per goroutine or a minute).
func TestJournalCrashHelper(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("helper for TestJournalKill9; runs only when re-executed by it")
	}
	ctx := context.Background()
	b, err := local.Open(ctx, path, local.Options{Stack: "s"})
	if err != nil {
		t.Fatal(err)
	}
	l, held, err := b.AcquireLeader(ctx, backend.LeaderClaim{Holder: "child", Lease: 2 * time.Second})
	if err != nil || !held {
		t.Fatalf("acquire: %v %v", held, err)
	}
	ps, gs := b.PoolStore().Fence(l.Epoch), b.GrantStore().Fence(l.Epoch)
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(os.Stdout, format+"\n", args...)
	}
	deadline := time.Now().Add(time.Minute)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := 0; i < 20000 && time.Now().Before(deadline); i++ {
				id := fmt.Sprintf("l-%d-%d", g, i)
				var err error
				switch i % 3 {
				case 0, 1: // a grant, then (i%3 == 1) its heartbeat and release
					say("begin put %s", id)
					if err = ps.PutLease(ctx, crashLease(id)); err == nil {
						say("ack put %s", id)
					}
					if i%3 == 1 && err == nil {
						say("begin del %s", id)
						if err = ps.DeleteLease(ctx, id); err == nil {
							say("ack del %s", id)
						}
					}
				case 2:
					say("begin grant %s", id)
					if err = gs.PutGrant(ctx, id, []byte(`{"n":`+fmt.Sprint(i)+`}`)); err == nil {
						say("ack grant %s", id)
					}
				}
				if err != nil {
					say("error %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestJournalKill9 kills (SIGKILL) a process in the middle of a stream of
// journaled writes, then reopens the file: every write it acknowledged is
// there, every release it acknowledged is gone, nothing it never began
// appears; a new leader taking over (the segment sealed at the end of its
// whole records) sees the same, and so does a reopen after that leader's
// own writes.
func TestJournalKill9(t *testing.T) {
	for round := range 3 {
		t.Run(fmt.Sprint("round", round), func(t *testing.T) { kill9Round(t, 500+round*1500) })
	}
}

func kill9Round(t *testing.T, killAfter int) {
	path := filepath.Join(t.TempDir(), "state.db")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestJournalCrashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	began := map[string]bool{} // "put l-1-2", ...
	acked := map[string]bool{} // the same, acknowledged
	var lines, acks int
	killed := false
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		lines++
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[0] == "begin" {
			began[f[1]+" "+f[2]] = true
		} else if len(f) == 3 && f[0] == "ack" {
			acked[f[1]+" "+f[2]] = true
			acks++
		} else if len(f) > 0 && f[0] == "error" {
			t.Errorf("child: %s", sc.Text())
		}
		if acks >= killAfter && !killed {
			if err := cmd.Process.Kill(); err != nil { // SIGKILL
				t.Fatal(err)
			}
			killed = true // lines already in the pipe are still read: they were acknowledged before the kill
		}
	}
	_ = cmd.Wait()
	if !killed {
		t.Fatalf("the child ended before %d acknowledged writes (%d lines): %s", killAfter, lines, stderr.String())
	}
	t.Logf("killed after %d acknowledged writes (%d began)", acks, len(began))

	check := func(stage string, leases []pools.LeaseRecord, grants map[string][]byte) {
		t.Helper()
		have := map[string]bool{}
		for _, l := range leases {
			if w := crashLease(l.LeaseID); l.Pool != w.Pool || l.TaskID != w.TaskID || l.Owner != w.Owner || l.Slots != w.Slots ||
				!l.GrantedAt.Equal(w.GrantedAt) || !l.ExpiresAt.Equal(w.ExpiresAt) || l.TTL != w.TTL {
				t.Errorf("%s: lease %+v is not what was written", stage, l)
			}
			have["put "+l.LeaseID] = true
		}
		for id := range grants {
			have["grant "+id] = true
		}
		for k := range acked {
			op, id, _ := strings.Cut(k, " ")
			switch op {
			case "put":
				if !have[k] && !began["del "+id] {
					t.Errorf("%s: acknowledged %s is missing", stage, k)
				}
			case "del":
				if have["put "+id] {
					t.Errorf("%s: %s was acknowledged released but is still held", stage, id)
				}
			case "grant":
				if !have[k] {
					t.Errorf("%s: acknowledged %s is missing", stage, k)
				}
			}
		}
		for k := range have {
			if !began[k] {
				t.Errorf("%s: %s is present but was never written", stage, k)
			}
		}
	}
	load := func(stage string, b *local.Backend) {
		t.Helper()
		leases, err := b.PoolStore().LoadLeases(ctx)
		if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		grants, err := b.GrantStore().LoadGrants(ctx)
		if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		check(stage, leases, grants)
	}

	b := openAt(t, path, "s", nil)
	load("reopened after kill -9", b)
	// A new leader: the dead one's lease (2 s) runs out first.
	var l backend.Leader
	for i := 0; i < 400; i++ { // ≤ 20 s
		var held bool
		if l, held, err = b.AcquireLeader(ctx, backend.LeaderClaim{Holder: "parent", Lease: time.Minute}); err != nil {
			t.Fatal(err)
		} else if held {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if l.Holder != "parent" {
		t.Fatalf("the dead leader's lease never ran out: %+v", l)
	}
	load("after the takeover", b)
	ps := b.PoolStore().Fence(l.Epoch)
	if err := ps.PutLease(ctx, crashLease("new-leader")); err != nil {
		t.Fatal(err)
	}
	began["put new-leader"], acked["put new-leader"] = true, true
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	load("reopened after the new leader's write", openAt(t, path, "s", nil))
}

// A torn or corrupt tail of the journal (a record cut short, a flipped
// byte, garbage after the last record) is cut at the last whole record on
// open: never a panic, never a half record counted, and the leader of the
// same epoch writes on after it (the stale bytes zeroed, so they are never
// read back as records).
func TestJournalTornTail(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tear  func(t *testing.T, f *os.File, last, end int64)
		keeps int // records of the 5 written that survive
	}{
		{"cut inside the last record", func(t *testing.T, f *os.File, last, end int64) {
			zero(t, f, last+(end-last)/2, end)
		}, 4},
		{"flipped byte in the last payload", func(t *testing.T, f *os.File, last, end int64) {
			flip(t, f, end-3)
		}, 4},
		{"flipped byte in the third record's length", func(t *testing.T, f *os.File, last, end int64) {
			flip(t, f, thirdRecord(t, f))
		}, 2},
		{"garbage after the last record", func(t *testing.T, f *os.File, last, end int64) {
			if _, err := f.WriteAt([]byte("\x10\x00\x00\x00garbage-garbage-garbage"), end); err != nil {
				t.Fatal(err)
			}
		}, 5},
		{"only the first header byte survives", func(t *testing.T, f *os.File, last, end int64) {
			zero(t, f, local.JournalHeader+1, end)
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, "src.db")
			ctx := context.Background()
			b := openAt(t, src, "s", nil)
			l, _, err := b.AcquireLeader(ctx, backend.LeaderClaim{Holder: "a", Lease: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			local.PauseApplier(b)
			ps := b.PoolStore().Fence(l.Epoch)
			var ends []int64
			for i := range 5 {
				if err := ps.PutLease(ctx, crashLease(fmt.Sprint("l", i))); err != nil {
					t.Fatal(err)
				}
				ends = append(ends, local.JournalEnd(b))
			}
			// The crash image: the database and its WAL as they are now,
			// with the journal's records not applied yet.
			dst := filepath.Join(dir, "dst.db")
			local.CopyCrashImage(t, b, dst)
			seg := local.JournalSegment(dst, "s", l.Epoch, 0)
			f, err := os.OpenFile(seg, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			tc.tear(t, f, ends[3], ends[4])
			f.Close()

			c := openAt(t, dst, "s", nil)
			leaseNames := func() []string {
				recs, err := c.PoolStore().LoadLeases(ctx)
				if err != nil {
					t.Fatal(err)
				}
				var ids []string
				for _, r := range recs {
					ids = append(ids, r.LeaseID)
				}
				return ids
			}
			want := []string{"l0", "l1", "l2", "l3", "l4"}[:tc.keeps]
			if got := leaseNames(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("after the tear: %v; want %v", got, want)
			}
			// The same leader (epoch) writes on in the recovered segment.
			if err := c.PoolStore().Fence(l.Epoch).PutLease(ctx, crashLease("m-after")); err != nil {
				t.Fatal(err)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			d := openAt(t, dst, "s", nil)
			c = d
			want = append(append([]string{}, want...), "m-after")
			if got := leaseNames(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("after recovery and a write: %v; want %v", got, want)
			}
		})
	}
}

func zero(t *testing.T, f *os.File, from, to int64) {
	t.Helper()
	if _, err := f.WriteAt(make([]byte, to-from), from); err != nil {
		t.Fatal(err)
	}
}

func flip(t *testing.T, f *os.File, at int64) {
	t.Helper()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
}

// thirdRecord returns the offset of the third record (records are read by
// their length prefixes).
func thirdRecord(t *testing.T, f *os.File) int64 {
	t.Helper()
	off := int64(local.JournalHeader)
	for range 2 {
		h := make([]byte, 4)
		if _, err := io.ReadFull(io.NewSectionReader(f, off, 4), h); err != nil {
			t.Fatal(err)
		}
		off += 16 + int64(binary.LittleEndian.Uint32(h))
	}
	return off
}

// The takeover race: a stale leader keeps writing from 8 goroutines while
// a new leader takes over and restores. Every write the stale leader was
// told succeeded is counted, every one it was told was fenced is not, and
// the new leader's restore saw exactly the records that are counted.
func TestJournalTakeoverRace(t *testing.T) {
	for round := range 5 {
		t.Run(fmt.Sprint("round", round), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			now := time.Unix(1_000_000, 0)
			var clockMu sync.Mutex
			clock := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			a := openAt(t, path, "s", clock)
			nb := openAt(t, path, "s", clock)
			la, _, err := a.AcquireLeader(ctx, backend.LeaderClaim{Holder: "a", Lease: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			// The stale leader's records stay in its journal (and a
			// busy applier of its does not hold the takeover up under -race):
			// the new leader's restore reads them from the journal.
			local.PauseApplier(a)
			ps := a.PoolStore().Fence(la.Epoch)
			var mu sync.Mutex
			ok, fenced := map[string]bool{}, map[string]bool{}
			var written atomic.Int64
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					for i := 0; i < 1500 && ctx.Err() == nil; i++ {
						id := fmt.Sprintf("a-%d-%d", g, i)
						err := ps.PutLease(ctx, crashLease(id))
						mu.Lock()
						switch {
						case err == nil:
							ok[id] = true
						case errors.Is(err, backend.ErrFenced):
							fenced[id] = true
						default:
							t.Errorf("%s: %v", id, err)
						}
						mu.Unlock()
						written.Add(1)
						if err != nil {
							return
						}
					}
				})
			}
			for i := 0; i < 2000 && written.Load() < int64(100+round*150); i++ {
				time.Sleep(time.Millisecond)
			}
			clockMu.Lock()
			now = now.Add(2 * time.Minute) // a's lease ran out
			clockMu.Unlock()
			// The stale leader's applier keeps the file busy: the takeover is
			// retried as the daemon's elector would (bounded).
			var lb backend.Leader
			var held bool
			for i := 0; i < 10; i++ {
				if lb, held, err = nb.AcquireLeader(ctx, backend.LeaderClaim{Holder: "b", Lease: time.Minute}); err == nil {
					break
				}
			}
			if err != nil || !held {
				t.Fatalf("takeover: %v %v", held, err)
			}
			restored, err := nb.PoolStore().LoadLeases(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := nb.PoolStore().Fence(lb.Epoch).PutLease(ctx, crashLease("b-1")); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			c := openAt(t, path, "s", clock)
			final, err := c.PoolStore().LoadLeases(ctx)
			if err != nil {
				t.Fatal(err)
			}
			in := func(recs []pools.LeaseRecord) map[string]bool {
				m := map[string]bool{}
				for _, r := range recs {
					m[r.LeaseID] = true
				}
				return m
			}
			r, f := in(restored), in(final)
			for id := range ok {
				if !f[id] || !r[id] {
					t.Errorf("%s succeeded but is not counted (final %v, restored %v)", id, f[id], r[id])
				}
			}
			for id := range fenced {
				if f[id] || r[id] {
					t.Errorf("%s was fenced but is counted (final %v, restored %v)", id, f[id], r[id])
				}
			}
			if len(f) != len(ok)+1 || !f["b-1"] {
				t.Errorf("final has %d records; want the %d that succeeded and b-1", len(f), len(ok))
			}
			t.Logf("stale leader: %d succeeded, %d fenced", len(ok), len(fenced))
		})
	}
}

// Segments fill, are sealed and folded into SQLite, and their files go:
// the records read the same before and after, and after a reopen.
func TestJournalRotationAndFold(t *testing.T) {
	local.SetSegmentSize(t, 16<<10)
	path := filepath.Join(t.TempDir(), "state.db")
	ctx := context.Background()
	b := openAt(t, path, "s", nil)
	l, _, err := b.AcquireLeader(ctx, backend.LeaderClaim{Holder: "a", Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ps, gs := b.PoolStore().Fence(l.Epoch), b.GrantStore().Fence(l.Epoch)
	want := map[string]bool{}
	for i := range 1500 {
		id := fmt.Sprint("l", i)
		if err := ps.PutLease(ctx, crashLease(id)); err != nil {
			t.Fatal(err)
		}
		want[id] = true
		if i%3 == 0 {
			if err := ps.DeleteLease(ctx, id); err != nil {
				t.Fatal(err)
			}
			delete(want, id)
		}
		if i%100 == 0 {
			if err := gs.PutGrant(ctx, id, []byte("{}")); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(stage string, b *local.Backend) {
		t.Helper()
		recs, err := b.PoolStore().LoadLeases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, r := range recs {
			got[r.LeaseID] = true
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: %d leases; want %d", stage, len(got), len(want))
		}
		grants, err := b.GrantStore().LoadGrants(ctx)
		if err != nil || len(grants) != 15 {
			t.Fatalf("%s: %d grants, %v; want 15", stage, len(grants), err)
		}
	}
	check("written", b)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	c := openAt(t, path, "s", nil)
	check("reopened", c)
	// Applied and folded (by the caller, not the applier's timer), the
	// sealed segments' files are gone: the open one stays.
	if err := local.ApplyJournal(c, 50); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(path + ".journal/*")
	if len(files) > 2 {
		t.Errorf("%d journal segments left after the fold: %v", len(files), files)
	}
	check("folded", c)
}
