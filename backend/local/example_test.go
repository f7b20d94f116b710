package local_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/local"
	"github.com/rpdhq/rpd/runtime/pickup"
)

func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "rpd-example")
	defer os.RemoveAll(dir)

	b, err := local.Open(ctx, filepath.Join(dir, ".rpd", "state.db"), local.Options{Stack: "ci-prod"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()

	_ = b.CreateQueue(ctx, "ci-prod-rp-medium", backend.QueueAttributes{
		VisibilityTimeout: 30 * time.Second,
		Tags:              map[string]string{backend.StackTag: "ci-prod"},
	})
	q := b.Queue("ci-prod-rp-medium")
	_ = q.Send(ctx, `{"task":"t-1"}`, 0)
	msgs, _ := q.Receive(ctx, 10, 0, 0)
	fmt.Println(len(msgs), msgs[0].Body, msgs[0].ReceiveCount)
	fmt.Println(q.Delete(ctx, msgs[0].ReceiptHandle))
	fmt.Println(q.Delete(ctx, msgs[0].ReceiptHandle) != nil)

	inst := b.Instances()
	_ = inst.Put(ctx, pickup.Instance{ID: "i-1", Class: "rp-medium", State: pickup.StateIdle})
	got, err := inst.Transition(ctx, pickup.Transition{ID: "i-1", From: pickup.StateIdle, To: pickup.StateClaimed, Owner: "task-1"})
	fmt.Println(got.State, got.Owner, err)
	_, err = inst.Transition(ctx, pickup.Transition{ID: "i-1", From: pickup.StateIdle, To: pickup.StateClaimed, Owner: "task-2"})
	fmt.Println(err != nil)
	// Output:
	// 1 {"task":"t-1"} 1
	// <nil>
	// true
	// claimed task-1 <nil>
	// true
}
