package backendtest_test

import (
	"fmt"
	"time"

	"github.com/rpdhq/rpd/backend/backendtest"
)

func ExampleFakeClock() {
	c := backendtest.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c.Advance(90 * time.Second)
	fmt.Println(c.Now().Format(time.TimeOnly))
	// Output:
	// 00:01:30
}
