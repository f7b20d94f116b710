package daemon

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/backend/backendtest"
	"github.com/rpdhq/rpd/client"
	"github.com/rpdhq/rpd/internal/awstest"
	"github.com/rpdhq/rpd/internal/tlstest"
)

// BenchmarkAcquireReleaseHTTP is the load test: concurrent clients over
// 127.0.0.1, each op one acquire (answer at once) plus one release of a
// slot of a 64-slot pool, through the Go client. It reports pairs/s, the
// p50/p99 latency of a pair, and those of its two halves (the acquire
// waits for its record's commit; the release does not). Run with -cpu to
// vary the client count (RunParallel uses GOMAXPROCS×parallelism
// goroutines).
func BenchmarkAcquireReleaseHTTP(b *testing.B) {
	benchPairs(b, startDaemon(b, `pool "load" { slots = 64 }`))
}

// BenchmarkAcquireReleaseHTTPEarly is BenchmarkAcquireReleaseHTTP with the
// answers of grants sent by the grant journal's writer (early, the
// default) and by their requests' goroutines (late), alternated in one
// run.
func BenchmarkAcquireReleaseHTTPEarly(b *testing.B) {
	for _, late := range []bool{false, true} {
		b.Run(map[bool]string{false: "early", true: "late"}[late], func(b *testing.B) {
			benchPairs(b, startDaemon(b, `pool "load" { slots = 64 }`, func(o *Options) { o.LateAnswers = late }))
		})
	}
}

// BenchmarkAcquireReleaseHTTPDynamoDB is BenchmarkAcquireReleaseHTTP on
// the aws backend against the emulators (dynalite for the lease items).
func BenchmarkAcquireReleaseHTTPDynamoDB(b *testing.B) {
	ep := awstest.Start(b)
	for _, kv := range ep.Env() {
		k, v, _ := strings.Cut(kv, "=")
		b.Setenv(k, v)
	}
	dir, state := b.TempDir(), b.TempDir()
	stack := backendtest.RandomName("b")
	writeFile(b, filepath.Join(dir, "rpd.hcl"), fmt.Sprintf("rpd {\n  stack = %q\n  backend \"aws\" {\n    region       = %q\n    table_prefix = %q\n  }\n}\n", stack, awstest.Region, "rpd-"+stack))
	writeFile(b, filepath.Join(dir, "main.hcl"), `pool "load" { slots = 64 }`)
	benchPairs(b, startDaemonIn(b, dir, state))
}

func benchPairs(b *testing.B, td *testDaemon) {
	defer TuneGC()() // as rpd serve runs
	ctx := context.Background()
	var mu sync.Mutex
	var pair, acq, rel []time.Duration
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var lp, la, lr []time.Duration
		for pb.Next() {
			t0 := time.Now()
			l, err := td.c.Acquire(ctx, "load", api.AcquireRequest{TaskID: "bench", WaitSeconds: 5})
			if err != nil {
				b.Error(err)
				return
			}
			t1 := time.Now()
			if err := td.c.Release(ctx, l.LeaseID); err != nil {
				b.Error(err)
				return
			}
			t2 := time.Now()
			lp, la, lr = append(lp, t2.Sub(t0)), append(la, t1.Sub(t0)), append(lr, t2.Sub(t1))
		}
		mu.Lock()
		pair, acq, rel = append(pair, lp...), append(acq, la...), append(rel, lr...)
		mu.Unlock()
	})
	el := time.Since(start)
	b.StopTimer()
	if len(pair) == 0 {
		return
	}
	b.ReportMetric(float64(len(pair))/el.Seconds(), "pairs/s")
	for _, m := range []struct {
		prefix string
		lat    []time.Duration
	}{{"", pair}, {"acquire-", acq}, {"release-", rel}} {
		slices.Sort(m.lat)
		b.ReportMetric(float64(m.lat[len(m.lat)/2].Microseconds()), m.prefix+"p50-µs")
		b.ReportMetric(float64(m.lat[len(m.lat)*99/100].Microseconds()), m.prefix+"p99-µs")
	}
}

// BenchmarkHeartbeatHTTP is the heartbeat's cost on the hot path: each
// client heartbeats a lease of its own, and each 200 is sent only after the
// new expiry is committed (the same group commit as grants). Compare its
// p50/p99 with BenchmarkAcquireReleaseHTTP's acquire half in the same run.
func BenchmarkHeartbeatHTTP(b *testing.B) {
	td := startDaemon(b, `pool "load" { slots = 64 }`)
	ctx := context.Background()
	var mu sync.Mutex
	var lat []time.Duration
	var n atomic.Int64
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		l, err := td.c.Acquire(ctx, "load", api.AcquireRequest{TaskID: fmt.Sprint("hb", n.Add(1)), WaitSeconds: 5, TTLSeconds: 600})
		if err != nil {
			b.Error(err)
			return
		}
		defer td.c.Release(ctx, l.LeaseID)
		var ll []time.Duration
		for pb.Next() {
			t0 := time.Now()
			if _, err := td.c.Heartbeat(ctx, l.LeaseID); err != nil {
				b.Error(err)
				return
			}
			ll = append(ll, time.Since(t0))
		}
		mu.Lock()
		lat = append(lat, ll...)
		mu.Unlock()
	})
	el := time.Since(start)
	b.StopTimer()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/el.Seconds(), "heartbeats/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkStatusHTTP is the same-run baseline: one GET of a small
// document per op, the cheapest round trip the API has.
func BenchmarkStatusHTTP(b *testing.B) {
	td := startDaemon(b, `pool "load" { slots = 64 }`)
	ctx := context.Background()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := td.c.Health(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkHAAcquireRelease is BenchmarkAcquireReleaseHTTP on a stack
// served by two daemons: through the leader (every record write fenced by
// its epoch) and through the standby, as a client given only the
// standby's address sees it: the first answer names the leader
// (X-Rpd-Leader) and the client sends the rest there. "forwarded"
// keeps every request on the standby (client.WithFollowLeader(false)):
// the forward's own cost. Compare with BenchmarkAcquireReleaseHTTP of the
// same run (one daemon, also the leader of its stack).
func BenchmarkHAAcquireRelease(b *testing.B) {
	dir, state := b.TempDir(), b.TempDir()
	writeFile(b, filepath.Join(dir, "rpd.hcl"), rpdBlock(state))
	writeFile(b, filepath.Join(dir, "main.hcl"), `pool "load" { slots = 64 }`)
	defer TuneGC()() // as rpd serve runs
	leader := startDaemonIn(b, dir, state)
	standby := startDaemonIn(b, dir, state)
	forwardOnly, err := client.New(standby.addr, client.WithRetry(0), client.WithFollowLeader(false))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		c    *client.Client
	}{{"leader", leader.c}, {"standby", standby.c}, {"forwarded", forwardOnly}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			b.SetParallelism(8)
			b.ResetTimer()
			start := time.Now()
			var pairs atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					l, err := bc.c.Acquire(ctx, "load", api.AcquireRequest{TaskID: "bench", WaitSeconds: 5})
					if err != nil {
						b.Error(err)
						return
					}
					if err := bc.c.Release(ctx, l.LeaseID); err != nil {
						b.Error(err)
						return
					}
					pairs.Add(1)
				}
			})
			b.ReportMetric(float64(pairs.Load())/time.Since(start).Seconds(), "pairs/s")
		})
	}
}

// BenchmarkAcquireReleaseHTTPTLS measures what TLS costs the load test:
// BenchmarkAcquireReleaseHTTP's pairs over plain HTTP without credentials
// ("plain"); over TLS 1.3 with a bearer token checked against its SHA-256,
// on the client's HTTP/1.1 connections ("tls") and on one HTTP/2
// connection ("tls-http2"); and "tls" with the audit log written
// ("tls+audit"), each on a daemon of its own. On a shared machine the
// load moves between sub-benchmarks; "interleaved" is the fair one: each
// client goroutine alternates a pair on a plain daemon and a pair on a TLS
// one, so both see the same load, and it reports the latencies of each
// and the TLS/plain ratio of their medians. (BenchmarkAcquireReleaseHTTP
// itself stays the plain one, so that its figures compare with earlier
// runs.)
func BenchmarkAcquireReleaseHTTPTLS(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchPairs(b, startDaemon(b, `pool "load" { slots = 64 }`)) })
	for _, v := range []struct {
		name         string
		audit, http2 bool
	}{{"tls", false, false}, {"tls-http2", false, true}, {"tls+audit", true, false}} {
		b.Run(v.name, func(b *testing.B) { benchPairs(b, startTLSBenchDaemon(b, v.audit, v.http2)) })
	}
	b.Run("interleaved", func(b *testing.B) {
		plain, secure := startDaemon(b, `pool "load" { slots = 64 }`), startTLSBenchDaemon(b, false, false)
		ctx := context.Background()
		var mu sync.Mutex
		var lat [2][]time.Duration
		b.SetParallelism(8)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			var local [2][]time.Duration
			for i := 0; pb.Next(); i++ {
				td := [2]*testDaemon{plain, secure}[i%2]
				t0 := time.Now()
				l, err := td.c.Acquire(ctx, "load", api.AcquireRequest{TaskID: "bench", WaitSeconds: 5})
				if err != nil {
					b.Error(err)
					return
				}
				if err := td.c.Release(ctx, l.LeaseID); err != nil {
					b.Error(err)
					return
				}
				local[i%2] = append(local[i%2], time.Since(t0))
			}
			mu.Lock()
			lat[0], lat[1] = append(lat[0], local[0]...), append(lat[1], local[1]...)
			mu.Unlock()
		})
		b.StopTimer()
		if len(lat[0]) == 0 || len(lat[1]) == 0 {
			return
		}
		var p50 [2]float64
		for i, name := range []string{"plain", "tls"} {
			slices.Sort(lat[i])
			p50[i] = float64(lat[i][len(lat[i])/2].Microseconds())
			b.ReportMetric(p50[i], name+"-p50-µs")
			b.ReportMetric(float64(lat[i][len(lat[i])*99/100].Microseconds()), name+"-p99-µs")
		}
		b.ReportMetric(p50[1]/p50[0], "tls/plain-p50")
	})
}

// startTLSBenchDaemon runs a daemon serving TLS with the test tokens (and
// the audit log, with audit), and a client of it as the worker: over the
// client's own HTTP/1.1 wire, or with http2 over net/http's HTTP/2.
func startTLSBenchDaemon(b *testing.B, audit, http2 bool) *testDaemon {
	ca := tlstest.New(b)
	dir, state := b.TempDir(), b.TempDir()
	rpd := tlsRPD(b, ca, state, "")
	if !audit {
		rpd = regexp.MustCompile(`(?m)^\s*audit_log = .*\n`).ReplaceAllString(rpd, "")
	}
	writeFile(b, filepath.Join(dir, "rpd.hcl"), rpd)
	writeFile(b, filepath.Join(dir, "tokens.hcl"), tokenBlocks(b, state))
	writeFile(b, filepath.Join(dir, "main.hcl"), `pool "load" { slots = 64 }`)
	td := startDaemonIn(b, dir, state)
	opts := []client.Option{client.WithRetry(0), client.WithCAFile(ca.CAFile), client.WithToken(testSecrets["worker"])}
	if http2 {
		opts = append(opts, client.WithHTTPClient(&http.Client{Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}, ForceAttemptHTTP2: true, DisableCompression: true,
		}}))
	}
	c, err := client.New("https://"+td.addr, opts...)
	if err != nil {
		b.Fatal(err)
	}
	td.c = c
	return td
}
