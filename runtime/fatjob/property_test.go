package fatjob

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// model is the sequential specification of a Pool: available amounts that
// Reconfigure shifts by the change of the totals (so they may go negative),
// and one FIFO queue served while its head fits.
type model struct {
	scanTotal, deltaTotal, spillTotal int64 // spillTotal is 0 when unlimited
	unlimited                         bool
	avail                             [3]int64

	queue    []*modelWaiter
	held     []*modelPermit
	released []*Permit

	granted, denied, waited, cancelled uint64
	waitTime                           time.Duration
}

type modelWaiter struct {
	id     int
	req    Request
	since  time.Time
	cancel context.CancelFunc
	ch     chan result
}

type modelPermit struct {
	perm  *Permit
	req   Request
	spill SpillGrant
}

func newModel(cfg Config) *model {
	m := &model{}
	m.reconfigure(cfg)
	return m
}

// reconfigure applies cfg and returns the waiters that fail because they
// can no longer fit.
func (m *model) reconfigure(cfg Config) (failed []*modelWaiter) {
	spillTotal := cfg.spillTotal()
	m.avail[resScan] += int64(cfg.ScanRingBytes) - m.scanTotal
	m.avail[resDelta] += int64(cfg.DeltaCacheBytes) - m.deltaTotal
	m.avail[resSpill] += spillTotal - m.spillTotal
	m.scanTotal, m.deltaTotal, m.spillTotal = int64(cfg.ScanRingBytes), int64(cfg.DeltaCacheBytes), spillTotal
	m.unlimited = cfg.SpillSlots == nil
	m.queue = slices.DeleteFunc(m.queue, func(w *modelWaiter) bool {
		if m.exceeds(w.req) {
			failed = append(failed, w)
			m.denied++
			return true
		}
		return false
	})
	return failed
}

func (m *model) exceeds(r Request) bool {
	return int64(r.ScanRingBytes) > m.scanTotal || int64(r.DeltaCacheBytes) > m.deltaTotal
}

// take takes r if it fits, in the pool's terms: a zero amount always fits.
func (m *model) take(r Request) (SpillGrant, bool) {
	fits := func(i int, n int64) bool { return n == 0 || m.avail[i] >= n }
	spill := SpillNotRequested
	if r.NeedsSpillSlot {
		spill = SpillUnlimited
		if !m.unlimited {
			spill = SpillLimited
		}
	}
	if !fits(resScan, int64(r.ScanRingBytes)) || !fits(resDelta, int64(r.DeltaCacheBytes)) || (spill == SpillLimited && !fits(resSpill, 1)) {
		return 0, false
	}
	m.avail[resScan] -= int64(r.ScanRingBytes)
	m.avail[resDelta] -= int64(r.DeltaCacheBytes)
	if spill == SpillLimited {
		m.avail[resSpill]--
	}
	return spill, true
}

func (m *model) put(mp *modelPermit) {
	m.avail[resScan] += int64(mp.req.ScanRingBytes)
	m.avail[resDelta] += int64(mp.req.DeltaCacheBytes)
	if mp.spill == SpillLimited {
		m.avail[resSpill]++
	}
}

// dispatch grants queued requests in FIFO order while the head fits.
type modelGrant struct {
	w     *modelWaiter
	spill SpillGrant
}

func (m *model) dispatch(now time.Time) (grants []modelGrant) {
	for len(m.queue) > 0 {
		w := m.queue[0]
		spill, ok := m.take(w.req)
		if !ok {
			break
		}
		m.queue = m.queue[1:]
		m.granted++
		m.waited++
		m.waitTime += now.Sub(w.since)
		grants = append(grants, modelGrant{w, spill})
	}
	return grants
}

type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func receiveWithin(t fataler, ch <-chan result, what string) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: Acquire did not return within 5s", what)
		return result{}
	}
}

// TestPropertyPoolMatchesModel drives random sequences of TryAcquire,
// Acquire, cancellation, Release (also repeated) and Reconfigure against
// the pool and the sequential model, and after every step compares what the
// callers got (including which queued requests were granted, i.e. FIFO
// order), the monitoring methods, Stats and the over-commit invariant.
func TestPropertyPoolMatchesModel(t *testing.T) {
	genConfig := rapid.Custom(func(t *rapid.T) Config {
		cfg := Config{
			ScanRingBytes:   rapid.Uint64Range(1, 10).Draw(t, "scan"),
			DeltaCacheBytes: rapid.Uint64Range(1, 10).Draw(t, "delta"),
		}
		if rapid.Bool().Draw(t, "limited") {
			cfg.SpillSlots = LimitedSpill(rapid.IntRange(1, 3).Draw(t, "slots"))
		}
		return cfg
	})
	genRequest := rapid.Custom(func(t *rapid.T) Request {
		return Request{
			ScanRingBytes:   rapid.Uint64Range(0, 12).Draw(t, "scan"),
			DeltaCacheBytes: rapid.Uint64Range(0, 12).Draw(t, "delta"),
			NeedsSpillSlot:  rapid.Bool().Draw(t, "spill"),
		}
	})

	rapid.Check(t, func(t *rapid.T) {
		clock := &fakeClock{}
		cfg := genConfig.Draw(t, "config")
		p, err := New(cfg, WithClock(clock.now))
		if err != nil {
			t.Fatal(err)
		}
		m := newModel(cfg)
		nextID := 0
		t.Cleanup(func() {
			for _, w := range m.queue {
				w.cancel()
				<-w.ch
			}
		})

		// settle checks that exactly the model's grants and failures
		// happened, and nothing else.
		settle := func(grants []modelGrant, failed []*modelWaiter) {
			for _, g := range grants {
				r := receiveWithin(t, g.w.ch, fmt.Sprintf("waiter %d", g.w.id))
				if r.err != nil {
					t.Fatalf("waiter %d (%+v): got %v, the model grants it", g.w.id, g.w.req, r.err)
				}
				if r.perm.Spill() != g.spill {
					t.Fatalf("waiter %d: spill %v, model %v", g.w.id, r.perm.Spill(), g.spill)
				}
				m.held = append(m.held, &modelPermit{r.perm, g.w.req, g.spill})
			}
			for _, w := range failed {
				if r := receiveWithin(t, w.ch, fmt.Sprintf("waiter %d", w.id)); !errors.Is(r.err, ErrExceedsCapacity) {
					t.Fatalf("waiter %d (%+v): got %v, %v; want ErrExceedsCapacity", w.id, w.req, r.perm, r.err)
				}
			}
			if got := p.Stats().Queued; got != len(m.queue) {
				t.Fatalf("pool has %d queued, model %d: a request was granted out of FIFO order", got, len(m.queue))
			}
		}

		t.Repeat(map[string]func(*rapid.T){
			"TryAcquire": func(t *rapid.T) {
				clock.advance(time.Second)
				r := genRequest.Draw(t, "request")
				perm, ok := p.TryAcquire(r)
				spill, want := SpillNotRequested, r.isEmpty()
				if !want && len(m.queue) == 0 {
					spill, want = m.take(r)
				}
				if ok != want {
					t.Fatalf("TryAcquire(%+v) = %v, model %v (avail %v, queued %d)", r, ok, want, m.avail, len(m.queue))
				}
				if !ok {
					m.denied++
					return
				}
				m.granted++
				if perm.Spill() != spill {
					t.Fatalf("spill %v, model %v", perm.Spill(), spill)
				}
				m.held = append(m.held, &modelPermit{perm, r, spill})
			},
			"Acquire": func(t *rapid.T) {
				clock.advance(time.Second)
				r := genRequest.Draw(t, "request")
				ctx, cancel := context.WithCancel(context.Background())
				w := &modelWaiter{id: nextID, req: r, since: clock.now(), cancel: cancel, ch: make(chan result, 1)}
				nextID++
				go func() {
					perm, err := p.Acquire(ctx, r)
					w.ch <- result{perm, err}
				}()
				switch {
				case r.isEmpty():
				case m.exceeds(r):
					if res := receiveWithin(t, w.ch, "Acquire"); !errors.Is(res.err, ErrExceedsCapacity) {
						t.Fatalf("Acquire(%+v) = %v; want ErrExceedsCapacity", r, res.err)
					}
					m.denied++
					cancel()
					return
				case len(m.queue) == 0:
					if _, ok := m.take(r); !ok {
						m.queue = append(m.queue, w)
					}
				default:
					m.queue = append(m.queue, w)
				}
				if len(m.queue) > 0 && m.queue[len(m.queue)-1] == w {
					// Wait for it to join the queue.
					deadline := time.Now().Add(5 * time.Second)
					for p.Stats().Queued != len(m.queue) {
						if len(w.ch) > 0 || time.Now().After(deadline) {
							t.Fatalf("Acquire(%+v) did not queue (model avail %v)", r, m.avail)
						}
						time.Sleep(100 * time.Microsecond)
					}
					return
				}
				res := receiveWithin(t, w.ch, "Acquire")
				cancel()
				if res.err != nil {
					t.Fatalf("Acquire(%+v) = %v; the model grants it at once", r, res.err)
				}
				m.granted++
				spill := SpillNotRequested
				if r.NeedsSpillSlot {
					spill = SpillUnlimited
					if !m.unlimited {
						spill = SpillLimited
					}
				}
				m.held = append(m.held, &modelPermit{res.perm, r, spill})
			},
			"Cancel": func(t *rapid.T) {
				if len(m.queue) == 0 {
					t.Skip("nothing queued")
				}
				clock.advance(time.Second)
				i := rapid.IntRange(0, len(m.queue)-1).Draw(t, "waiter")
				w := m.queue[i]
				w.cancel()
				if r := receiveWithin(t, w.ch, "cancelled Acquire"); !errors.Is(r.err, context.Canceled) {
					t.Fatalf("cancelled waiter %d got %v, %v", w.id, r.perm, r.err)
				}
				m.cancelled++
				m.queue = slices.Delete(m.queue, i, i+1)
				settle(m.dispatch(clock.now()), nil)
			},
			"Release": func(t *rapid.T) {
				if len(m.held) == 0 {
					t.Skip("nothing held")
				}
				clock.advance(time.Second)
				i := rapid.IntRange(0, len(m.held)-1).Draw(t, "permit")
				mp := m.held[i]
				mp.perm.Release()
				m.held = slices.Delete(m.held, i, i+1)
				m.released = append(m.released, mp.perm)
				m.put(mp)
				settle(m.dispatch(clock.now()), nil)
			},
			"ReleaseAgain": func(t *rapid.T) {
				if len(m.released) == 0 {
					t.Skip("nothing released")
				}
				rapid.SampledFrom(m.released).Draw(t, "permit").Release()
				settle(nil, nil)
			},
			"Reconfigure": func(t *rapid.T) {
				clock.advance(time.Second)
				cfg := genConfig.Draw(t, "config")
				if err := p.Reconfigure(cfg); err != nil {
					t.Fatal(err)
				}
				failed := m.reconfigure(cfg)
				settle(m.dispatch(clock.now()), failed)
			},
			"": func(t *rapid.T) {
				if err := p.checkInvariants(); err != nil {
					t.Fatal(err)
				}
				if got, want := p.ScanRingAvailable(), uint64(max(0, m.avail[resScan])); got != want {
					t.Fatalf("ScanRingAvailable() = %d, model %d", got, want)
				}
				if got, want := p.DeltaCacheAvailable(), uint64(max(0, m.avail[resDelta])); got != want {
					t.Fatalf("DeltaCacheAvailable() = %d, model %d", got, want)
				}
				n, limited := p.SpillSlotsAvailable()
				if limited == m.unlimited || (limited && int64(n) != max(0, m.avail[resSpill])) {
					t.Fatalf("SpillSlotsAvailable() = %d, %v; model %d, unlimited=%v", n, limited, m.avail[resSpill], m.unlimited)
				}
				want := Stats{
					Granted: m.granted, Denied: m.denied, Waited: m.waited, WaitTime: m.waitTime, Cancelled: m.cancelled,
					ScanRingInUse:   uint64(m.scanTotal - m.avail[resScan]),
					DeltaCacheInUse: uint64(m.deltaTotal - m.avail[resDelta]),
					SpillSlotsInUse: int(m.spillTotal - m.avail[resSpill]),
					Queued:          len(m.queue),
				}
				if got := p.Stats(); got != want {
					t.Fatalf("Stats() = %+v\nmodel     %+v", got, want)
				}
				// Held amounts never exceed the totals unless a shrink left
				// them so; the model's held sums are the truth.
				var heldScan, heldDelta int64
				for _, mp := range m.held {
					heldScan += int64(mp.req.ScanRingBytes)
					heldDelta += int64(mp.req.DeltaCacheBytes)
				}
				if heldScan != m.scanTotal-m.avail[resScan] || heldDelta != m.deltaTotal-m.avail[resDelta] {
					t.Fatalf("model inconsistent: held %d/%d, totals %d/%d, avail %v", heldScan, heldDelta, m.scanTotal, m.deltaTotal, m.avail)
				}
			},
		})

		// Release everything, cancel the queue: the pool returns to full.
		for _, w := range m.queue {
			w.cancel()
		}
		for _, w := range m.queue {
			if r := receiveWithin(t, w.ch, "cancelled Acquire"); r.err == nil {
				r.perm.Release()
			}
		}
		m.queue = nil
		for _, mp := range m.held {
			mp.perm.Release()
		}
		if p.ScanRingAvailable() != uint64(m.scanTotal) || p.DeltaCacheAvailable() != uint64(m.deltaTotal) {
			t.Fatalf("pool not full after releasing everything: %d/%d of %d/%d",
				p.ScanRingAvailable(), p.DeltaCacheAvailable(), m.scanTotal, m.deltaTotal)
		}
		if n, limited := p.SpillSlotsAvailable(); limited && int64(n) != m.spillTotal {
			t.Fatalf("%d spill slots free after releasing everything, want %d", n, m.spillTotal)
		}
		if s := p.Stats(); s.Queued != 0 || s.ScanRingInUse != 0 || s.DeltaCacheInUse != 0 || s.SpillSlotsInUse != 0 {
			t.Fatalf("Stats after releasing everything = %+v", s)
		}
	})
}
