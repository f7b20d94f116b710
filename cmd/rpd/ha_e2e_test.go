package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/backend/aws"
	"github.com/rpdhq/rpd/backend/local"
	"github.com/rpdhq/rpd/client"
	"github.com/rpdhq/rpd/internal/awstest"
	"github.com/rpdhq/rpd/runtime/pools"
)

// haStack is one stack served by several rpd processes sharing a backend:
// the local one (a SQLite file under cwd) or the emulators.
type haStack struct {
	t        *testing.T
	conf     string // the configuration directory
	cwd      string
	env      []string
	rpdBlock string
	// records reads the stack's pool lease records straight from the
	// backend, as the next leader would restore them.
	records func(ctx context.Context) ([]pools.LeaseRecord, error)
}

func newHAStack(t *testing.T, onEmulators bool, body string) *haStack {
	t.Helper()
	h := &haStack{t: t, conf: t.TempDir(), cwd: t.TempDir(), rpdBlock: e2eRPD}
	if onEmulators {
		h.rpdBlock, h.env = emulatorRPD(t)
		stack := stackRE.FindStringSubmatch(h.rpdBlock)[1]
		var opts aws.Options
		for _, kv := range h.env {
			if v, ok := strings.CutPrefix(kv, "AWS_ENDPOINT_URL_DYNAMODB="); ok {
				opts.DynamoDBEndpoint = v
			}
			if v, ok := strings.CutPrefix(kv, "AWS_ENDPOINT_URL_SQS="); ok {
				opts.SQSEndpoint = v
			}
		}
		opts.Stack, opts.Region, opts.TablePrefix, opts.Credentials = stack, awstest.Region, "rpd-"+stack, awstest.Credentials()
		b, err := aws.Open(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		h.records = b.PoolStore().LoadLeases
	} else {
		h.records = func(ctx context.Context) ([]pools.LeaseRecord, error) {
			b, err := local.Open(ctx, filepath.Join(h.cwd, ".rpd", "state.db"), local.Options{Stack: "e2e"})
			if err != nil {
				return nil, err
			}
			defer b.Close()
			return b.PoolStore().LoadLeases(ctx)
		}
	}
	writeConf(t, filepath.Join(h.conf, "main.hcl"), h.rpdBlock+body)
	return h
}

var stackRE = regexp.MustCompile(`stack = "([^"]+)"`)

// start runs one more "rpd watch" of the stack.
func (h *haStack) start() *liveDaemon {
	h.t.Helper()
	return startRPD(h.t, h.cwd, h.env, "watch", h.conf)
}

// held sums the unexpired slots of pool in the backend's records.
func (h *haStack) held(pool string) int {
	h.t.Helper()
	n, err := h.heldErr(pool, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

// heldErr is held, leaving out the records of leases whose holder sent
// its release (released reports them by API lease ID, and is first called
// after the records were read): a
// released lease's record is deleted in the background (docs/api.md), so
// it may outlive the release by a few milliseconds. Such a record makes a
// new leader count the slot until its TTL (under-commit), never grant it
// twice; what must never exceed the pool is the records of leases still
// held.
func (h *haStack) heldErr(pool string, released func(id string) bool) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	recs, err := h.records(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the lease records: %w", err)
	}
	n, now := 0, time.Now()
	for _, r := range recs {
		if r.Pool == pool && (r.ExpiresAt.IsZero() || r.ExpiresAt.After(now)) && (released == nil || !released(strings.Replace(r.LeaseID, "/", ".", 1))) {
			n += r.Slots
		}
	}
	return n, nil
}

// leaderOf returns the one daemon of ds whose status says leader, waiting
// up to 15 s for one.
func leaderOf(t *testing.T, ds ...*liveDaemon) *liveDaemon {
	t.Helper()
	for i := 0; i < 300; i++ {
		for _, d := range ds {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := d.c.Status(ctx)
			cancel()
			if err == nil && st.Role == "leader" {
				return d
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no daemon became leader within 15 s")
	return nil
}

func bothBackends(t *testing.T, fn func(t *testing.T, onEmulators bool)) {
	t.Run("local", func(t *testing.T) { fn(t, false) })
	t.Run("emulators", func(t *testing.T) { fn(t, true) })
}

// Two daemons on one stack with a 1-slot pool: exactly one grant, asked
// at either address; the standby forwards and reports the leader; rpd
// apply is refused while the watch leader runs; a standby whose files
// differ is reported in /v1/status and /metrics.
func TestHAE2ETwoDaemonsOneGrant(t *testing.T) {
	bothBackends(t, func(t *testing.T, onEmulators bool) {
		h := newHAStack(t, onEmulators, "pool \"p\" {\n  slots = 1\n}\n")
		a := h.start()
		b := h.start()
		leader := leaderOf(t, a, b)
		standby := a
		if leader == a {
			standby = b
		}
		st := standby.status()
		if st.Role != "standby" || st.Leader == nil || st.Leader.Address != "http://"+leader.addr || !st.ConfigMatchesLeader {
			t.Fatalf("standby status: role %q, leader %+v, config matches %v; want standby naming http://%s with the same configuration", st.Role, st.Leader, st.ConfigMatchesLeader, leader.addr)
		}
		ctx := context.Background()
		var wg sync.WaitGroup
		var granted atomic.Int32
		for i := range 8 {
			d := []*liveDaemon{a, b}[i%2]
			wg.Go(func() {
				_, err := d.c.Acquire(ctx, "p", api.AcquireRequest{TaskID: fmt.Sprintf("t%d", i)})
				switch {
				case err == nil:
					granted.Add(1)
				case !client.IsCode(err, api.CodeUnavailable):
					t.Errorf("acquire at %s: %v; want a grant or 409", d.addr, err)
				}
			})
		}
		wg.Wait()
		if n := granted.Load(); n != 1 {
			t.Fatalf("%d grants of the 1-slot pool across the two daemons; want exactly 1", n)
		}
		if n := h.held("p"); n != 1 {
			t.Fatalf("the backend records %d held slots; want 1", n)
		}
		if ps := standby.pool("p"); ps.Used != 1 {
			t.Fatalf("pool p through the standby = %+v; want the leader's used 1", ps)
		}

		other := t.TempDir()
		writeConf(t, filepath.Join(other, "main.hcl"), h.rpdBlock+"pool \"p\" {\n  slots = 7\n}\n")
		wd := &workdir{t: t, dir: h.cwd, env: h.env}
		r := wd.must(1, "apply", "-auto-approve", other)
		contains(t, r, "stderr", "is served by rpd watch at http://"+leader.addr)
		if ps := leader.pool("p"); ps.Total != 1 {
			t.Fatalf("after the refused apply pool p = %+v; want 1 slot", ps)
		}

		odd := startRPD(t, h.cwd, h.env, "watch", other)
		if st := odd.status(); st.Role != "standby" || st.ConfigMatchesLeader {
			t.Fatalf("a standby with other files: role %q, config matches %v; want standby, false", st.Role, st.ConfigMatchesLeader)
		}
		if m := metrics(t, odd); !strings.Contains(m, "rpd_config_matches_leader 0") || !strings.Contains(m, "rpd_leader 0") {
			t.Fatalf("the odd standby's /metrics lacks rpd_config_matches_leader 0 or rpd_leader 0")
		}
		if m := metrics(t, leader); !strings.Contains(m, "rpd_leader 1") || !strings.Contains(m, "rpd_leader_epoch ") {
			t.Fatalf("the leader's /metrics lacks rpd_leader 1 or rpd_leader_epoch")
		}
	})
}

func metrics(t *testing.T, d *liveDaemon) string {
	t.Helper()
	resp, err := http.Get("http://" + d.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// Three daemons, 32 clients acquiring and releasing through all three
// addresses while the leader is killed (-9) twice and restarted: the held
// slots in the backend's records never exceed the pool, no lease is
// granted twice, every grant survives to its release (a heartbeat finds
// it), and every call ends in success or an API error.
func TestHAE2EChaos(t *testing.T) {
	bothBackends(t, func(t *testing.T, onEmulators bool) {
		const slots, clients = 4, 32
		run := 20 * time.Second
		if testing.Short() {
			run = 8 * time.Second
		}
		h := newHAStack(t, onEmulators, fmt.Sprintf("pool \"p\" {\n  slots = %d\n}\n", slots))
		ds := []*liveDaemon{h.start(), h.start(), h.start()}
		var addrs []string
		for _, d := range ds {
			addrs = append(addrs, d.addr)
		}
		ctx, cancel := context.WithTimeout(context.Background(), run)
		defer cancel()

		var (
			mu      sync.Mutex
			granted = map[string]string{} // lease ID -> request_id
			done    = map[string]bool{}   // lease IDs whose release was sent
			grants  atomic.Int64
			bad     []string
		)
		fail := func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			if len(bad) < 10 {
				bad = append(bad, fmt.Sprintf(format, args...))
			}
		}
		var wg sync.WaitGroup
		for i := range clients {
			// Each client lists the addresses from a different one.
			order := append(append([]string{}, addrs[i%3:]...), addrs[:i%3]...)
			c, err := client.New(strings.Join(order, ","), client.WithRetry(15*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				for ctx.Err() == nil {
					rid := client.NewRequestID()
					l, err := c.Acquire(context.Background(), "p", api.AcquireRequest{TaskID: fmt.Sprintf("c%d", i), WaitSeconds: 2, TTLSeconds: 30, RequestID: rid})
					var ae *api.Error
					switch {
					case errors.As(err, &ae):
						continue // a clean refusal: timeout, or not_leader past the retry budget
					case err != nil:
						fail("acquire: not an API error: %v", err)
						continue
					}
					grants.Add(1)
					mu.Lock()
					if prev, dup := granted[l.LeaseID]; dup && prev != rid {
						bad = append(bad, fmt.Sprintf("lease %s granted twice (requests %s and %s)", l.LeaseID, prev, rid))
					}
					granted[l.LeaseID] = rid
					mu.Unlock()
					time.Sleep(time.Duration(5+i%10) * time.Millisecond)
					if _, err := c.Heartbeat(context.Background(), l.LeaseID); err != nil {
						fail("heartbeat of granted lease %s: %v (the grant was lost)", l.LeaseID, err)
					}
					mu.Lock()
					done[l.LeaseID] = true
					mu.Unlock()
					if err := c.Release(context.Background(), l.LeaseID); err != nil {
						fail("release of %s: %v", l.LeaseID, err)
					}
				}
			})
		}
		// Sample the backend's records all along, while the leader is
		// killed twice (and restarted, as a supervisor would).
		var samples, maxHeld int
		wg.Go(func() {
			for ctx.Err() == nil {
				// Leave out the leases whose release was sent by the
				// time the records were read (the snapshot is taken
				// after): a slot re-granted before the read came from a
				// release sent before it.
				var releasedBy map[string]bool
				n, err := h.heldErr("p", func(id string) bool {
					if releasedBy == nil {
						mu.Lock()
						releasedBy = maps.Clone(done)
						mu.Unlock()
					}
					return releasedBy[id]
				})
				if err != nil {
					fail("sample: %v", err)
				}
				maxHeld = max(maxHeld, n)
				samples++
				time.Sleep(20 * time.Millisecond)
			}
		})
		kills := 0
		for kills < 2 {
			time.Sleep(run / 3)
			l := leaderOf(t, ds...)
			if code := l.stop(syscall.SIGKILL); code != -9 {
				t.Fatalf("kill -9 of the leader: exit %d", code)
			}
			kills++
			for i, d := range ds {
				if d == l {
					ds[i] = launchRPD(t, h.cwd, h.env, d.addr, "watch", "-listen", d.addr, h.conf)
				}
			}
		}
		wg.Wait()
		if maxHeld > slots {
			t.Errorf("the backend recorded %d held slots of a %d-slot pool at one sample", maxHeld, slots)
		}
		for _, b := range bad {
			t.Error(b)
		}
		if grants.Load() == 0 || kills != 2 {
			t.Fatalf("%d grants and %d kills; the run proves nothing", grants.Load(), kills)
		}
		t.Logf("%d grants, %d samples of the records (max held %d of %d), leader killed %d times", grants.Load(), samples, maxHeld, slots, kills)
	})
}

// The leader paused (SIGSTOP) for twice its lease: the standby takes over
// with the held lease counted, the paused one grants nothing when it
// resumes and steps down, and the counts stay right.
func TestHAE2ESigstop(t *testing.T) {
	h := newHAStack(t, false, "pool \"p\" {\n  slots = 2\n}\n")
	a, b := h.start(), h.start()
	leader := leaderOf(t, a, b)
	standby := a
	if leader == a {
		standby = b
	}
	ctx := context.Background()
	held, err := leader.c.Acquire(ctx, "p", api.AcquireRequest{TaskID: "held", TTLSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second) // twice the 2 s lease
	if leaderOf(t, standby) != standby {
		t.Fatal("unreachable")
	}
	// The new leader fills the pool while the old one is paused.
	if _, err := standby.c.Acquire(ctx, "p", api.AcquireRequest{TaskID: "new"}); err != nil {
		t.Fatalf("acquire at the new leader: %v", err)
	}
	if err := leader.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Asked directly, the resumed ex-leader must not grant a third slot.
	direct, _ := client.New(leader.addr, client.WithRetry(5*time.Second))
	for range 5 {
		if l, err := direct.Acquire(ctx, "p", api.AcquireRequest{TaskID: "stale"}); err == nil {
			t.Fatalf("the resumed ex-leader granted %+v in a full pool", l)
		}
	}
	if n := h.held("p"); n != 2 {
		t.Fatalf("the backend records %d held slots; want 2", n)
	}
	st := leader.waitStatus("the ex-leader to step down", func(st api.Status) bool {
		return st.Role == "standby" && st.Leader != nil && st.Leader.Address == "http://"+standby.addr
	})
	if st.Epoch != 0 {
		t.Fatalf("the ex-leader reports epoch %d as a standby", st.Epoch)
	}
	if ps := standby.pool("p"); ps.Used != 2 {
		t.Fatalf("the new leader counts %+v; want 2 used", ps)
	}
	if err := leader.c.Release(ctx, held.LeaseID); err != nil {
		t.Fatalf("release of the lease granted before the pause, through the ex-leader: %v", err)
	}
	if ps := standby.pool("p"); ps.Used != 1 {
		t.Fatalf("after the release the new leader counts %+v; want 1 used", ps)
	}
}

// leaderAndStandby runs two "rpd watch" of one stack (default 5 s leader
// lease) with a 1-slot pool "p", and returns them by role.
func leaderAndStandby(t *testing.T) (leader, standby *liveDaemon) {
	t.Helper()
	conf, cwd := t.TempDir(), t.TempDir()
	writeConf(t, filepath.Join(conf, "main.hcl"), "rpd {\n  stack = \"e2e\"\n}\npool \"p\" {\n  slots = 1\n}\n")
	a := startRPD(t, cwd, nil, "watch", conf)
	b := startRPD(t, cwd, nil, "watch", conf)
	leader, standby = leaderOf(t, a, b), a
	if leader == a {
		standby = b
	}
	return leader, standby
}

// SIGTERM on the leader releases its lease: the standby takes over at
// once (well before a 5 s lease would run out), with the lease counted.
func TestHAE2ESigtermHandover(t *testing.T) {
	leader, standby := leaderAndStandby(t)
	l, err := leader.c.Acquire(context.Background(), "p", api.AcquireRequest{TaskID: "held"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if code := leader.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM: exit %d; log:\n%s", code, leader.stderr)
	}
	standby.waitStatus("the standby to take over", func(st api.Status) bool { return st.Role == "leader" })
	if el := time.Since(start); el > 4*time.Second {
		t.Fatalf("handover took %v: the lease was not released (a 5 s lease ran out instead)", el)
	}
	if ps := standby.pool("p"); ps.Used != 1 {
		t.Fatalf("after the handover pool p = %+v; want the held lease counted", ps)
	}
	if err := standby.c.Release(context.Background(), l.LeaseID); err != nil {
		t.Fatal(err)
	}
}
