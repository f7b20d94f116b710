package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/client"
	"github.com/rpdhq/rpd/internal/awstest"
)

// The nemesis: replicas of one stack under faults of the leader (kill -9,
// SIGSTOP/SIGCONT, SIGTERM) and of the backend (the DynamoDB emulator
// paused), with clients that hold their leases across several heartbeats
// and count the holders on their own side. A client believes it holds a
// slot from an answered grant until the expires_at of its last answered
// grant or heartbeat (or until it sends its release, or a heartbeat says
// 404); a grant answered while more slots are believed held than the pool
// has is an over-grant, whatever the daemons' own counts say.

// fault is one thing the nemesis does to the stack.
type fault string

const (
	faultKill9    fault = "kill -9 leader"
	faultSigstop  fault = "SIGSTOP leader"
	faultSigterm  fault = "SIGTERM leader"
	faultDDBStall fault = "DynamoDB stall"
)

type nemesisConfig struct {
	onEmulators bool
	slots       int
	clients     int
	ttl         time.Duration // asked by clients; they heartbeat every ttl/2
	hold        time.Duration // how long a client keeps a lease (> ttl/2)
	run         time.Duration
	every       time.Duration // one fault per period, in the order of faults
	faults      []fault
	stop        time.Duration // how long SIGSTOP and the DynamoDB stall last
	lease       string        // the leader lease (ha.lease)
}

type nemesisResult struct {
	grants, heartbeats int
	maxOverlap         int // the most slots believed held at a grant, the new one included
	lost               int // heartbeats answered 404 before the expiry last promised
	failover           map[fault][]time.Duration
	leaked             int // slots still used after every client released and the TTL ran out
	faultsDone         int
}

func (r nemesisResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d grants, %d heartbeats, %d faults; max overlap %d, lost leases %d, leaked slots %d", r.grants, r.heartbeats, r.faultsDone, r.maxOverlap, r.lost, r.leaked)
	for _, f := range []fault{faultKill9, faultSigstop, faultSigterm, faultDDBStall} {
		ds := r.failover[f]
		if len(ds) == 0 {
			continue
		}
		slices.Sort(ds)
		fmt.Fprintf(&b, "; %s: failover p50 %v max %v (n=%d)", f, ds[len(ds)/2].Round(10*time.Millisecond), ds[len(ds)-1].Round(10*time.Millisecond), len(ds))
	}
	return b.String()
}

// believer is one client's view of its lease.
type believer struct {
	until time.Time // zero: holds nothing
	slots int
}

func runNemesis(t testing.TB, cfg nemesisConfig) nemesisResult {
	t.Helper()
	rpdBlock, env := fmt.Sprintf("rpd {\n  stack = \"e2e\"\n  ha {\n    lease = %q\n  }\n}\n", cfg.lease), []string(nil)
	var ep awstest.Endpoints
	if cfg.onEmulators {
		ep = awstest.Start(t)
		stack := fmt.Sprintf("n%d", time.Now().UnixNano()%1_000_000)
		rpdBlock = fmt.Sprintf("rpd {\n  stack = %q\n  ha {\n    lease = %q\n  }\n  backend \"aws\" {\n    region       = %q\n    table_prefix = %q\n  }\n}\n", stack, cfg.lease, awstest.Region, "rpd-"+stack)
		env = ep.Env()
	}
	conf, cwd := t.TempDir(), t.TempDir()
	writeConf(t, conf+"/main.hcl", rpdBlock+fmt.Sprintf("pool \"p\" {\n  slots = %d\n}\n", cfg.slots))
	ds := []*liveDaemon{startRPD(t, cwd, env, "watch", conf), startRPD(t, cwd, env, "watch", conf), startRPD(t, cwd, env, "watch", conf)}
	addrs := make([]string, len(ds))
	for i, d := range ds {
		addrs[i] = d.addr
	}
	var (
		mu       sync.Mutex
		res      = nemesisResult{failover: map[fault][]time.Duration{}}
		holds    = make([]believer, cfg.clients)
		answered time.Time // the last grant or heartbeat answered 200
		problems []string
	)
	problem := func(format string, args ...any) {
		if len(problems) < 10 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	// believed sums the slots clients other than self believe they hold at now.
	believed := func(self int, now time.Time) int {
		n := 0
		for i, h := range holds {
			if i != self && h.until.After(now) {
				n += h.slots
			}
		}
		return n
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.run)
	defer cancel()
	var wg sync.WaitGroup
	for i := range cfg.clients {
		order := append(append([]string{}, addrs[i%len(addrs):]...), addrs[:i%len(addrs)]...)
		c, err := client.New(strings.Join(order, ","), client.WithRetry(cfg.ttl))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for ctx.Err() == nil {
				l, err := c.Acquire(context.Background(), "p", api.AcquireRequest{TaskID: fmt.Sprint("c", i), WaitSeconds: 1, TTLSeconds: cfg.ttl.Seconds(), RequestID: client.NewRequestID()})
				if err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				now := time.Now()
				mu.Lock()
				if over := believed(i, now) + l.Slots; over > res.maxOverlap {
					res.maxOverlap = over
				}
				if over := believed(i, now) + l.Slots; over > cfg.slots {
					problem("at %s client %d was granted %s while the others believed they held %d of %d slots", now.Format("15:04:05.000"), i, l.LeaseID, over-l.Slots, cfg.slots)
				}
				holds[i] = believer{until: l.ExpiresAt, slots: l.Slots}
				res.grants++
				answered = now
				mu.Unlock()
				end := time.Now().Add(cfg.hold + time.Duration(rng.Int64N(int64(cfg.hold))))
				next := time.Now().Add(cfg.ttl / 2)
				for time.Now().Before(end) && ctx.Err() == nil {
					time.Sleep(min(time.Until(next), time.Until(end), 100*time.Millisecond))
					if time.Now().Before(next) {
						continue
					}
					hctx, hcancel := context.WithTimeout(context.Background(), cfg.ttl)
					hb, err := c.Heartbeat(hctx, l.LeaseID)
					hcancel()
					now := time.Now()
					var ae *api.Error
					mu.Lock()
					switch {
					case err == nil:
						holds[i].until = later(holds[i].until, hb.ExpiresAt)
						res.heartbeats++
						answered = now
						next = now.Add(cfg.ttl / 2)
					case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
						if holds[i].until.After(now) {
							res.lost++
							problem("at %s the heartbeat of %s (client %d) was answered 404 while its last answer promised it until %s", now.Format("15:04:05.000"), l.LeaseID, i, holds[i].until.Format("15:04:05.000"))
						}
						holds[i] = believer{}
						end = now // acquire again
					default:
						next = now.Add(500 * time.Millisecond) // 503 or unreachable: retry soon
					}
					mu.Unlock()
				}
				mu.Lock()
				held := holds[i].until.After(time.Now())
				holds[i] = believer{} // before the release is sent: the slot may be re-granted at once
				mu.Unlock()
				if held {
					rctx, rcancel := context.WithTimeout(context.Background(), cfg.ttl)
					_ = c.Release(rctx, l.LeaseID) // a release that fails leaves the slot to its TTL
					rcancel()
				}
			}
		})
	}

	// The faults, one per period, each applied to whoever leads then.
	restart := func(i int) {
		d := ds[i]
		ds[i] = launchRPD(t, cwd, env, d.addr, "watch", "-listen", d.addr, conf)
	}
	begun := time.Now()
	for k := 0; ; k++ {
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(begun.Add(time.Duration(k+1) * cfg.every))):
		}
		if ctx.Err() != nil || time.Until(deadlineOf(ctx)) < cfg.stop+2*time.Second {
			break
		}
		f := cfg.faults[k%len(cfg.faults)]
		li := leaderIndex(ds)
		if li < 0 {
			continue
		}
		start := time.Now()
		switch f {
		case faultKill9:
			ds[li].stop(syscall.SIGKILL)
			restart(li)
		case faultSigterm:
			if code := ds[li].stop(syscall.SIGTERM); code != 0 {
				mu.Lock()
				problem("SIGTERM of the leader: exit %d", code)
				mu.Unlock()
			}
			restart(li)
		case faultSigstop:
			_ = ds[li].cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(cfg.stop)
			_ = ds[li].cmd.Process.Signal(syscall.SIGCONT)
		case faultDDBStall:
			if err := ep.PauseDynamoDB(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(cfg.stop)
			if err := ep.ResumeDynamoDB(); err != nil {
				t.Fatal(err)
			}
		}
		// Failover: from the fault to the next grant or heartbeat answered
		// (past the answers that were on their way when it struck).
		for i := 0; i < 400; i++ {
			mu.Lock()
			a := answered
			mu.Unlock()
			if a.After(start.Add(100 * time.Millisecond)) {
				mu.Lock()
				res.failover[f] = append(res.failover[f], a.Sub(start))
				mu.Unlock()
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		res.faultsDone++
	}
	wg.Wait()

	// Leaked: once every client released (or stopped heartbeating), the
	// pool must come back to 0 within a TTL.
	var used int
	for i := 0; i < 200; i++ {
		li := leaderIndex(ds)
		if li >= 0 {
			if ps, err := ds[li].c.Pool(context.Background(), "p"); err == nil {
				if used = ps.Used; used == 0 {
					break
				}
			}
		}
		time.Sleep(cfg.ttl / 50)
	}
	res.leaked = used
	for _, p := range problems {
		t.Error(p)
	}
	return res
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// leaderIndex is the index of the daemon of ds whose status says leader,
// waiting up to 10 s for one; -1 when none does.
func leaderIndex(ds []*liveDaemon) int {
	for range 100 {
		for i, d := range ds {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			st, err := d.c.Status(ctx)
			cancel()
			if err == nil && st.Role == "leader" {
				return i
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return -1
}

// A short nemesis run on each backend: no over-grant counted on the client
// side, no lease forgotten that an answer promised, nothing leaked. The
// "stall" case is the directed probe of a heartbeat answered during a
// backend stall: three holders fill a 3-slot pool and heartbeat every half
// TTL, DynamoDB stalls for 4.5 s with the default 5 s leader lease (so
// heartbeats reach the leader while it still leads but cannot write), the
// leadership moves, and a fourth client asks for a slot all along.
func TestNemesis(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process fault injection; skipped with -short")
	}
	for _, tc := range []struct {
		name string
		cfg  nemesisConfig
	}{
		{"local", nemesisConfig{clients: 6, hold: 4 * time.Second, run: 38 * time.Second, every: 8 * time.Second, lease: "2s",
			faults: []fault{faultKill9, faultSigstop, faultSigterm}}},
		{"emulators", nemesisConfig{onEmulators: true, clients: 6, hold: 4 * time.Second, run: 38 * time.Second, every: 8 * time.Second, lease: "2s",
			faults: []fault{faultDDBStall, faultKill9, faultSigterm}}},
		{"stall", nemesisConfig{onEmulators: true, clients: 4, hold: time.Minute, run: 18 * time.Second, every: 4 * time.Second, lease: "5s",
			faults: []fault{faultDDBStall}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.slots, cfg.ttl, cfg.stop = 3, 6*time.Second, 4500*time.Millisecond
			res := runNemesis(t, cfg)
			t.Log(res)
			if res.maxOverlap > 3 || res.lost > 0 || res.leaked > 0 {
				t.Fatalf("%s", res)
			}
			if res.grants == 0 || res.faultsDone < len(cfg.faults) {
				t.Fatalf("the run proves nothing: %s", res)
			}
		})
	}
}

// BenchmarkNemesis is the long run (60 s per backend, every fault kind):
// its figures are maximum overlap, lost leases, failover p50/max per fault
// type and leaked slots. Run it with -benchtime 1x.
func BenchmarkNemesis(b *testing.B) {
	for _, tc := range []struct {
		name        string
		onEmulators bool
		faults      []fault
	}{
		{"local", false, []fault{faultKill9, faultSigstop, faultSigterm}},
		{"emulators", true, []fault{faultDDBStall, faultKill9, faultSigstop, faultSigterm}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				res := runNemesis(b, nemesisConfig{
					onEmulators: tc.onEmulators, slots: 3, clients: 12,
					ttl: 6 * time.Second, hold: 4 * time.Second,
					run: 60 * time.Second, every: 10 * time.Second, stop: 8 * time.Second,
					faults: tc.faults, lease: "5s",
				})
				b.Log(res)
				b.ReportMetric(float64(res.maxOverlap), "max-overlap")
				b.ReportMetric(float64(res.lost), "lost-leases")
				b.ReportMetric(float64(res.leaked), "leaked-slots")
			}
		})
	}
}
