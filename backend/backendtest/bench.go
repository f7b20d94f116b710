package backendtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/rpdhq/rpd/runtime/pickup"
)

// BenchTransition is the body of each backend's transition benchmark: it
// puts 100 idle instances of class "c" in t, then each iteration moves one
// of them idle→claimed or back with a conditional Transition, and reports
// transitions/s.
func BenchTransition(b *testing.B, t pickup.InstanceTable) {
	ctx := context.Background()
	const n = 100
	for i := range n {
		if err := t.Put(ctx, pickup.Instance{ID: fmt.Sprintf("i-%03d", i), Class: "c", State: pickup.StateIdle}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tr := pickup.Transition{ID: fmt.Sprintf("i-%03d", i%n), From: pickup.StateIdle, To: pickup.StateClaimed, Owner: "w"}
		if (i/n)%2 == 1 {
			tr = pickup.Transition{ID: tr.ID, From: pickup.StateClaimed, To: pickup.StateIdle, ExpectOwner: "w"}
		}
		if _, err := t.Transition(ctx, tr); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "transitions/s")
}
