package faulty_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/faulty"
	"github.com/rpdhq/rpd/backend/local"
)

func Example() {
	dir, _ := os.MkdirTemp("", "faulty-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	b, _ := local.Open(ctx, filepath.Join(dir, "state.db"), local.Options{Stack: "demo"})
	defer b.Close()
	_ = b.CreateQueue(ctx, "jobs", backend.QueueAttributes{})

	// The second Send fails with a transient error before reaching the queue.
	in := faulty.New(faulty.Fault{Op: faulty.Send, Call: 2, Fail: true})
	q := in.Queue(b.Queue("jobs"))
	fmt.Println(q.Send(ctx, "a", 0))
	err := q.Send(ctx, "b", 0)
	fmt.Println(errors.Is(err, faulty.ErrInjected))
	fmt.Println(q.Send(ctx, "b", 0)) // the caller's retry
	fmt.Println(in.Calls(faulty.Send))
	// Output:
	// <nil>
	// true
	// <nil>
	// 3
}
