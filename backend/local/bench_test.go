package local_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/backendtest"
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
