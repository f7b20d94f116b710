package pools

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The property test drives a Manager (fake clock, MemoryStore) with random
// create / resize / delete / acquire / cancel / release / heartbeat /
// clock-advance (lease expiry) steps and compares it after every step with a
// sequential model of the documented policy: strict head of line over
// (priority desc, arrival asc), shrink fails requests that no longer fit,
// expiry frees slots, and the store holds exactly the held leases.

const (
	propTTL     = time.Minute
	propTimeout = 25 * time.Second
)

type modelReq struct {
	task        string
	pool        string
	prio, slots int
	seq         int
	ttl         bool
	timeout     bool // Request.Timeout = propTimeout
	deadline    time.Time
	queued      bool
	ch          <-chan result
	cancel      context.CancelFunc
	lease       *Lease
	expires     time.Time
	// Timer creation numbers, mirroring fakeClock's tie-break: the expiry
	// timer (made at grant) and the wait-timeout timer (made at enqueue).
	expTimer, waitTimer int
}

type modelPool struct {
	total, used int
	queue       []*modelReq // sorted: priority desc, arrival asc
	held        []*modelReq
	stats       PoolStats // counters only; Wait.Count but not the durations
}

type model struct {
	pools   map[string]*modelPool
	seq     int
	timers  int
	now     time.Time
	pending []*modelReq // granted in the model, result not yet collected
	all     []*modelReq
}

func (md *model) grant(p *modelPool, r *modelReq) {
	p.used += r.slots
	p.held = append(p.held, r)
	if r.ttl {
		r.expires = md.now.Add(propTTL)
		md.timers++
		r.expTimer = md.timers
	}
	p.stats.Granted++
	if r.queued {
		p.stats.Wait.Count++
	}
	md.pending = append(md.pending, r)
}

func (md *model) grantHeadOfLine(p *modelPool) {
	for len(p.queue) > 0 && p.queue[0].slots <= p.total-p.used {
		r := p.queue[0]
		p.queue = p.queue[1:]
		md.grant(p, r)
	}
}

func (md *model) drop(p *modelPool, r *modelReq) {
	p.held = slices.DeleteFunc(p.held, func(x *modelReq) bool { return x == r })
	p.used -= r.slots
}

func (md *model) collect(t *rapid.T) {
	t.Helper()
	for _, r := range md.pending {
		r.lease = mustGet(t, r.ch)
		if r.lease.TaskID() != r.task {
			t.Fatalf("result for %s carries task %s", r.task, r.lease.TaskID())
		}
	}
	md.pending = nil
}

func (md *model) names() []string { return slices.Sorted(maps.Keys(md.pools)) }

func (md *model) pickHeld(t *rapid.T, ttlOnly bool) (*modelPool, *modelReq) {
	type hp struct {
		p *modelPool
		r *modelReq
	}
	var all []hp
	for _, name := range md.names() {
		p := md.pools[name]
		for _, r := range p.held {
			if r.ttl || !ttlOnly {
				all = append(all, hp{p, r})
			}
		}
	}
	if len(all) == 0 {
		return nil, nil
	}
	x := all[rapid.IntRange(0, len(all)-1).Draw(t, "held")]
	return x.p, x.r
}

func TestPropertyAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clk := newFakeClock()
		store := &MemoryStore{}
		m := newTestManager(t, Options{Clock: clk, Store: store, DefaultPoolSlots: 2})
		md := &model{pools: map[string]*modelPool{DefaultPool: {total: 2}}, now: clk.Now()}
		defer func() {
			for _, r := range md.all {
				r.cancel()
			}
		}()
		ctx := context.Background()
		actions := map[string]func(*rapid.T){
			"create": func(t *rapid.T) {
				name := rapid.SampledFrom([]string{"a", "b"}).Draw(t, "name")
				slots := rapid.IntRange(1, 4).Draw(t, "slots")
				err := m.CreatePool(name, slots, "")
				if md.pools[name] != nil {
					if !errors.Is(err, ErrPoolExists) {
						t.Fatalf("CreatePool(%s) of an existing pool = %v", name, err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				md.pools[name] = &modelPool{total: slots}
			},
			"resize": func(t *rapid.T) {
				name := rapid.SampledFrom(md.names()).Draw(t, "name")
				slots := rapid.IntRange(1, 4).Draw(t, "slots")
				if err := m.UpdatePool(name, slots); err != nil {
					t.Fatal(err)
				}
				p := md.pools[name]
				p.total = slots
				var keep []*modelReq
				for _, r := range p.queue {
					if r.slots > slots {
						p.stats.Rejected++
						if err := mustFail(t, r.ch); !errors.Is(err, ErrExceedsCapacity) {
							t.Fatalf("request left behind by a shrink = %v, want ErrExceedsCapacity", err)
						}
						continue
					}
					keep = append(keep, r)
				}
				p.queue = keep
				md.grantHeadOfLine(p)
			},
			"delete": func(t *rapid.T) {
				name := rapid.SampledFrom(md.names()).Draw(t, "name")
				p := md.pools[name]
				err := m.DeletePool(name)
				switch {
				case name == DefaultPool:
					if !errors.Is(err, ErrDefaultPool) {
						t.Fatalf("delete default = %v", err)
					}
				case p.used > 0 || len(p.queue) > 0:
					if !errors.Is(err, ErrPoolInUse) {
						t.Fatalf("delete busy pool = %v", err)
					}
				default:
					if err != nil {
						t.Fatal(err)
					}
					delete(md.pools, name)
				}
			},
			"acquire": func(t *rapid.T) {
				name := rapid.SampledFrom(append(md.names(), "unknown")).Draw(t, "name")
				md.seq++
				r := &modelReq{
					task:  fmt.Sprintf("t%d", md.seq),
					pool:  name,
					prio:  rapid.IntRange(0, 1).Draw(t, "priority"),
					slots: rapid.IntRange(1, 3).Draw(t, "slots"),
					seq:   md.seq,
					ttl:   rapid.Bool().Draw(t, "ttl"),

					timeout: rapid.Bool().Draw(t, "timeout"),
				}
				req := Request{TaskID: r.task, Priority: r.prio, Slots: r.slots}
				if r.ttl {
					req.TTL = propTTL
				}
				if r.timeout {
					req.Timeout = propTimeout
				}
				rctx, cancel := context.WithCancel(ctx)
				r.cancel = cancel
				md.all = append(md.all, r)
				r.ch = acquireAsync(rctx, m, name, req)
				p := md.pools[name]
				switch {
				case p == nil:
					if err := mustFail(t, r.ch); !errors.Is(err, ErrUnknownPool) {
						t.Fatalf("acquire in unknown pool = %v", err)
					}
				case r.slots > p.total:
					p.stats.Rejected++
					if err := mustFail(t, r.ch); !errors.Is(err, ErrExceedsCapacity) {
						t.Fatalf("oversized acquire = %v", err)
					}
				case len(p.queue) == 0 && r.slots <= p.total-p.used:
					md.grant(p, r)
				default:
					r.queued = true
					i, _ := slices.BinarySearchFunc(p.queue, r, func(a, b *modelReq) int {
						if a.prio != b.prio {
							return b.prio - a.prio
						}
						return a.seq - b.seq
					})
					p.queue = slices.Insert(p.queue, i, r)
					if r.timeout {
						r.deadline = md.now.Add(propTimeout)
						md.timers++
						r.waitTimer = md.timers
					}
					waitQueued(t, m, name, len(p.queue))
				}
			},
			"cancel": func(t *rapid.T) {
				var queued []*modelReq
				for _, name := range md.names() {
					queued = append(queued, md.pools[name].queue...)
				}
				if len(queued) == 0 {
					return
				}
				r := rapid.SampledFrom(queued).Draw(t, "request")
				r.cancel()
				if err := mustFail(t, r.ch); !errors.Is(err, context.Canceled) {
					t.Fatalf("cancelled request = %v", err)
				}
				p := md.pools[r.pool]
				p.queue = slices.DeleteFunc(p.queue, func(x *modelReq) bool { return x == r })
				p.stats.Cancelled++
				md.grantHeadOfLine(p)
			},
			"release": func(t *rapid.T) {
				p, r := md.pickHeld(t, false)
				if r == nil {
					return
				}
				var err error
				if rapid.Bool().Draw(t, "by task") {
					err = m.Release(r.pool, r.task)
				} else {
					err = r.lease.Release()
				}
				if err != nil {
					t.Fatal(err)
				}
				md.drop(p, r)
				p.stats.Released++
				md.grantHeadOfLine(p)
			},
			"heartbeat": func(t *rapid.T) {
				_, r := md.pickHeld(t, true)
				if r == nil {
					return
				}
				if err := r.lease.Heartbeat(ctx); err != nil {
					t.Fatal(err)
				}
				r.expires = md.now.Add(propTTL)
			},
			"advance": func(t *rapid.T) {
				d := rapid.SampledFrom([]time.Duration{10 * time.Second, 30 * time.Second, 55 * time.Second}).Draw(t, "advance")
				target := md.now.Add(d)
				var timedOut []*modelReq
				for { // replay the due timers in the fake clock's order
					var next *modelReq
					var when time.Time
					var n int
					consider := func(r *modelReq, at time.Time, timer int) {
						if !at.After(target) && (next == nil || at.Before(when) || at.Equal(when) && timer < n) {
							next, when, n = r, at, timer
						}
					}
					for _, p := range md.pools {
						for _, r := range p.held {
							if r.ttl {
								consider(r, r.expires, r.expTimer)
							}
						}
						for _, r := range p.queue {
							if r.timeout {
								consider(r, r.deadline, r.waitTimer)
							}
						}
					}
					if next == nil {
						break
					}
					md.now = when
					p := md.pools[next.pool]
					if n == next.expTimer && next.ttl && slices.Contains(p.held, next) {
						md.drop(p, next)
						p.stats.Expired++
					} else {
						p.queue = slices.DeleteFunc(p.queue, func(x *modelReq) bool { return x == next })
						p.stats.TimedOut++
						timedOut = append(timedOut, next)
					}
					md.grantHeadOfLine(p)
				}
				md.now = target
				clk.Advance(d)
				for _, r := range timedOut {
					if err := mustFail(t, r.ch); !errors.Is(err, ErrTimeout) {
						t.Fatalf("timed-out request %s = %v, want ErrTimeout", r.task, err)
					}
				}
			},
			"": func(t *rapid.T) {
				md.collect(t)
				var got []string
				for _, st := range m.ListPools() {
					got = append(got, st.Name)
				}
				if !slices.Equal(got, md.names()) {
					t.Fatalf("pools %v, model %v", got, md.names())
				}
				held := map[string]bool{}
				for _, name := range md.names() {
					p := md.pools[name]
					st := mustStatus(t, m, name)
					qs := 0
					for _, r := range p.queue {
						qs += r.slots
					}
					stats := st.Stats
					stats.Wait.Sum, stats.Wait.Max = 0, 0
					if st.Total != p.total || st.Used != p.used || st.Available != max(p.total-p.used, 0) ||
						st.Queued != len(p.queue) || st.QueuedSlots != qs || stats != p.stats {
						t.Fatalf("pool %s: status %+v\nmodel total %d used %d queued %d (%d slots) stats %+v",
							name, st, p.total, p.used, len(p.queue), qs, p.stats)
					}
					for _, r := range p.held {
						if !r.lease.Held() {
							t.Fatalf("task %s: model holds, lease released", r.task)
						}
						held[r.lease.ID()] = true
					}
				}
				recs, err := store.LoadLeases(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(recs) != len(held) {
					t.Fatalf("%d store records, %d held leases", len(recs), len(held))
				}
				for _, rec := range recs {
					if !held[rec.LeaseID] {
						t.Fatalf("store record %+v is not a held lease", rec)
					}
				}
			},
		}
		check := actions[""]
		// Weighted so that queues form and drain often.
		weighted := []string{"create", "resize", "delete", "acquire", "acquire", "acquire", "acquire",
			"cancel", "release", "release", "release", "heartbeat", "advance", "advance"}
		for range rapid.IntRange(40, 150).Draw(t, "steps") {
			actions[rapid.SampledFrom(weighted).Draw(t, "action")](t)
			check(t)
		}
	})
}
