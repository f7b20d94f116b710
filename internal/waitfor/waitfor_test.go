package waitfor_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpdhq/rpd/internal/waitfor"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 3 {
			n.Add(1)
		}
	}()
	waitfor.Until(t, "three increments", func() bool { return n.Load() == 3 })
}

// fatalRecorder records Fatalf instead of stopping the goroutine.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = format
}

func TestWithinGivesUp(t *testing.T) {
	r := &fatalRecorder{TB: t}
	start := time.Now()
	waitfor.Within(r, 20*time.Millisecond, "nothing", func() bool { return false })
	if r.msg == "" || time.Since(start) < 20*time.Millisecond {
		t.Fatalf("Within returned after %v without failing", time.Since(start))
	}
}
