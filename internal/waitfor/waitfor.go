// Package waitfor is the tests' one poll with a deadline: wait until a
// condition holds, bounded in time, failing the test with what it waited
// for. No test sleeps a fixed time to synchronise; it waits for what it
// can observe.
package waitfor

import (
	"testing"
	"time"
)

// DefaultTimeout bounds Until.
const DefaultTimeout = 5 * time.Second

// Until polls cond every millisecond until it holds, for at most
// DefaultTimeout, and fails t with what otherwise.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Within(t, DefaultTimeout, what, cond)
}

// Within is Until with its own bound.
func Within(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	Paced(t, timeout, time.Millisecond, what, cond)
}

// Paced is Within polling every interval: for conditions that cost a
// request to a server each.
func Paced(t testing.TB, timeout, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
			return
		}
		time.Sleep(interval)
	}
}
