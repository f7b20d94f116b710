package backend_test

import (
	"fmt"
	"time"

	"github.com/rpdhq/rpd/backend"
)

func ExampleNormalizeQueueAttributes() {
	attrs, err := backend.NormalizeQueueAttributes(backend.QueueAttributes{VisibilityTimeout: 30 * time.Second})
	fmt.Println(attrs.Retention, err)
	_, err = backend.NormalizeQueueAttributes(backend.QueueAttributes{Retention: 10 * time.Second})
	fmt.Println(err)
	// Output:
	// 96h0m0s <nil>
	// queue retention 10s: must be between 1m0s and 336h0m0s
}
