package main

import (
	"context"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/client"
)

// haTrials is the number of failovers each figure is taken over.
const haTrials = 10

// BenchmarkHAFailover measures, over haTrials kill -9s of the leader of a
// two-daemon stack (default 5 s lease), the time from the kill to the
// first grant answered by the new leader, asked through the survivor with
// a client that retries (as a CI job would). The killed daemon is
// restarted between trials. Reports p50 and max in ms; b.N is ignored.
func BenchmarkHAFailover(b *testing.B) {
	benchHandover(b, syscall.SIGKILL)
}

// BenchmarkHAHandover is BenchmarkHAFailover with SIGTERM: the leader
// drains and releases its lease, and the standby takes over at once.
func BenchmarkHAHandover(b *testing.B) {
	benchHandover(b, syscall.SIGTERM)
}

func benchHandover(b *testing.B, sig syscall.Signal) {
	conf, cwd := b.TempDir(), b.TempDir()
	writeConf(b, filepath.Join(conf, "main.hcl"), "rpd {\n  stack = \"bench\"\n}\npool \"p\" {\n  slots = 64\n}\n")
	ds := []*liveDaemon{startRPD(b, cwd, nil, "watch", conf), startRPD(b, cwd, nil, "watch", conf)}
	var took []time.Duration
	for range haTrials {
		leader, survivor := ds[0], ds[1]
		if leaderRole(survivor) {
			leader, survivor = survivor, leader
		}
		c, _ := client.New(survivor.addr, client.WithRetry(30*time.Second))
		start := time.Now()
		leader.stop(sig)
		l, err := c.Acquire(context.Background(), "p", api.AcquireRequest{TaskID: "after"})
		if err != nil {
			b.Fatalf("first grant after the %v: %v", sig, err)
		}
		took = append(took, time.Since(start))
		if err := c.Release(context.Background(), l.LeaseID); err != nil {
			b.Fatal(err)
		}
		ds = []*liveDaemon{survivor, launchRPD(b, cwd, nil, leader.addr, "watch", "-listen", leader.addr, conf)}
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "max-ms")
	b.ReportMetric(float64(took[0].Milliseconds()), "min-ms")
}

func leaderRole(d *liveDaemon) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := d.c.Status(ctx)
	return err == nil && st.Role == "leader"
}
