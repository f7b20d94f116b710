package local_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/backendtest"
	"github.com/rpdhq/rpd/runtime/pools"
)

// BenchmarkLocalSendReceiveDelete measures messages/s through the SQLite
// queue: each message is sent, received and deleted. "batch10" receives and
// deletes ten at a time (DeleteBatch), as the pickup manager does; "single"
// does one message per call.
func BenchmarkLocalSendReceiveDelete(b *testing.B) {
	for _, batch := range []int{10, 1} {
		name := "single"
		if batch > 1 {
			name = fmt.Sprintf("batch%d", batch)
		}
		b.Run(name, func(b *testing.B) {
			be := openAt(b, filepath.Join(b.TempDir(), "bench.db"), "s", nil)
			ctx := context.Background()
			if err := be.CreateQueue(ctx, "q", backend.QueueAttributes{VisibilityTimeout: time.Minute}); err != nil {
				b.Fatal(err)
			}
			q := be.Queue("q")
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; {
				k := min(batch, b.N-done)
				for i := 0; i < k; i++ {
					if err := q.Send(ctx, `{"task":"t"}`, 0); err != nil {
						b.Fatal(err)
					}
				}
				msgs, err := q.Receive(ctx, k, 0, 0)
				if err != nil || len(msgs) != k {
					b.Fatalf("received %d, %v; want %d", len(msgs), err, k)
				}
				if k == 1 {
					err = q.Delete(ctx, msgs[0].ReceiptHandle)
				} else {
					handles := make([]string, k)
					for i, m := range msgs {
						handles[i] = m.ReceiptHandle
					}
					err = q.DeleteBatch(ctx, handles)
				}
				if err != nil {
					b.Fatal(err)
				}
				done += k
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkLocalTransition measures conditional transitions/s: each
// iteration moves one of 100 instances idle→claimed or back.
func BenchmarkLocalTransition(b *testing.B) {
	be := openAt(b, filepath.Join(b.TempDir(), "bench.db"), "s", nil)
	backendtest.BenchTransition(b, be.Instances())
}

// BenchmarkBaselineSQLite is the same-run baseline for the two benchmarks
// above: the cheapest SQLite writes with the backend's settings (WAL,
// synchronous=NORMAL), one autocommit INSERT and one DELETE by key per
// iteration, with no queue semantics. Compare ns/op: the queue's cost per
// message (send + receive + delete, batched by ten) and a transition's cost
// against this pair of bare writes.
func BenchmarkBaselineSQLite(b *testing.B) {
	path := filepath.Join(b.TempDir(), "baseline.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(10000)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := db.Exec(`INSERT INTO t (id, body) VALUES (?, ?)`, i, `{"task":"t"}`); err != nil {
			b.Fatal(err)
		}
		if _, err := db.Exec(`DELETE FROM t WHERE id = ?`, i); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
}

// BenchmarkLocalLeasePairs measures the grant path without HTTP: 16
// goroutines (8 per CPU on 2) each write a pool lease through the leader's
// fenced store and delete it, as an acquire and a release do. Every write
// returns once durable (the grant journal's fdatasync, or SQLite's
// synchronous=FULL commit before it).
func BenchmarkLocalLeasePairs(b *testing.B) {
	be := openAt(b, filepath.Join(b.TempDir(), "bench.db"), "s", nil)
	ctx := context.Background()
	l, _, err := be.AcquireLeader(ctx, backend.LeaderClaim{Holder: "bench", Lease: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	ps := be.PoolStore().Fence(l.Epoch)
	var n atomic.Int64
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := fmt.Sprint("l", n.Add(1))
			rec := pools.LeaseRecord{LeaseID: id, Pool: "p", TaskID: "t", Slots: 1, GrantedAt: time.Unix(1, 0), ExpiresAt: time.Unix(2, 0), TTL: time.Minute}
			if err := ps.PutLease(ctx, rec); err != nil {
				b.Error(err)
				return
			}
			if err := ps.DeleteLease(ctx, id); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
}
