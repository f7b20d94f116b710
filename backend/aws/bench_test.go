package aws_test

import (
	"context"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/backendtest"
	"github.com/rpdhq/rpd/internal/awstest"
)

// BenchmarkAWSSendReceiveDelete is BenchmarkLocalSendReceiveDelete/batch10
// against the emulators (local-aws-sqs), for comparison.
func BenchmarkAWSSendReceiveDelete(b *testing.B) {
	e := awstest.Start(b)
	stack := backendtest.RandomName("s")
	be := open(b, e.Options(stack, "t"+stack))
	ctx := context.Background()
	if err := be.CreateQueue(ctx, stack+"-q", backend.QueueAttributes{VisibilityTimeout: time.Minute}); err != nil {
		b.Fatal(err)
	}
	q := be.Queue(stack + "-q")
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		k := min(10, b.N-done)
		for i := 0; i < k; i++ {
			if err := q.Send(ctx, `{"task":"t"}`, 0); err != nil {
				b.Fatal(err)
			}
		}
		var handles []string
		for attempt := 0; len(handles) < k && attempt < 20; attempt++ {
			msgs, err := q.Receive(ctx, k-len(handles), 0, time.Second)
			if err != nil {
				b.Fatal(err)
			}
			for _, m := range msgs {
				handles = append(handles, m.ReceiptHandle)
			}
		}
		if len(handles) != k {
			b.Fatalf("received %d; want %d", len(handles), k)
		}
		if err := q.DeleteBatch(ctx, handles); err != nil {
			b.Fatal(err)
		}
		done += k
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkAWSTransition is BenchmarkLocalTransition against dynalite.
func BenchmarkAWSTransition(b *testing.B) {
	e := awstest.Start(b)
	stack := backendtest.RandomName("s")
	be := open(b, e.Options(stack, "t"+stack))
	ctx := context.Background()
	if err := be.EnsureTables(ctx); err != nil {
		b.Fatal(err)
	}
	backendtest.BenchTransition(b, be.Instances())
}
