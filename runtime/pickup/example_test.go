package pickup_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rpdhq/rpd/runtime/pickup"
)

// A manager fills its class's pool with Offer and serves requests with
// Pickup; Release gives an instance back. The in-memory queue and table
// stand in for backend/local or backend/aws.
func Example() {
	ctx := context.Background()
	clock := newTestClock()
	m, err := pickup.NewManager(pickup.Config{
		Class: "medium", CPU: 2, Mem: 4 << 30, InstanceTypes: []string{"c6i.*", "m6i.*"},
		EmptyConfirmWait: pickup.ShortPollConfirm, // the in-memory queue's short polls are exact
	}, newMemQueue(clock.Now), newMemTable(clock.Now), pickup.Options{Clock: clock, Logger: discardLogger()})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, in := range []pickup.Instance{
		{ID: "i-spot", UsageClass: pickup.UsageSpot, InstanceType: "m6i.large", CPU: 2, MemMiB: 4096, ResourceClass: "medium", Threshold: clock.Now().Add(time.Hour)},
		{ID: "i-od", UsageClass: pickup.UsageOnDemand, InstanceType: "c6i.large", CPU: 2, MemMiB: 4096, ResourceClass: "medium", Threshold: clock.Now().Add(time.Hour)},
	} {
		if err := m.Offer(ctx, in); err != nil {
			fmt.Println(err)
			return
		}
	}

	in, err := m.Pickup(ctx, pickup.Requirements{UsageClass: pickup.UsageOnDemand, InstanceTypes: []string{"c6i.*"}}, "run-42")
	fmt.Println(in.ID, in.State, in.Owner, err)

	// The spot instance was a misfit: re-queued with the 3s delay, so the
	// queue now looks empty.
	_, err = m.Pickup(ctx, pickup.Requirements{UsageClass: pickup.UsageOnDemand}, "run-43")
	var ex *pickup.ExhaustedError
	fmt.Println(errors.Is(err, pickup.ErrExhausted), errors.As(err, &ex) && ex.Kind == pickup.Global)

	rel, err := m.Release(ctx, in.ID, "run-42", pickup.ReOffer)
	fmt.Println(rel.ID, rel.State, err)

	s := m.Stats(ctx)
	fmt.Println("passed", s.Passed, "requeued", s.Requeued, "claimed", s.Claimed, "exhausted", s.ExhaustedGlobal)
	// Output:
	// i-od claimed run-42 <nil>
	// true true
	// i-od idle <nil>
	// passed 1 requeued 1 claimed 1 exhausted 1
}

// ParseEntry is strict: anything but the seed's seven fields is discarded.
func ExampleParseEntry() {
	_, err := pickup.ParseEntry(`{"instanceId":"i-1","usageClass":"spot","instanceType":"c6i.large","cpu":2,"mem":4096,"resourceClass":"medium","threshold":"2025-05-31T12:20:00Z","zone":"a"}`)
	fmt.Println(err)
	e, err := pickup.ParseEntry(`{"instanceId":"i-1","usageClass":"spot","instanceType":"c6i.large","cpu":2,"mem":4096,"resourceClass":"medium","threshold":"2025-05-31T12:20:00Z"}`)
	fmt.Println(e.InstanceID, e.CPU, e.MemMiB, e.Threshold.Format(time.RFC3339), err)
	// Output:
	// pickup: discard message (malformed): unknown field "zone"
	// i-1 2 4096 2025-05-31T12:20:00Z <nil>
}
