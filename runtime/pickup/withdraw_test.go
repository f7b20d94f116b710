package pickup_test

import (
	"slices"
	"testing"

	"github.com/rpdhq/rpd/runtime/pickup"
)

func TestWithdraw(t *testing.T) {
	runBehaviours(t, []behaviour{{"WithdrawLeavesClaimedAlone", testWithdraw}})
}

// testWithdraw takes idle runners out of the pool: their records leave
// idle and their messages go, a claimed runner is left alone, and no
// pickup finds a withdrawn runner.
func testWithdraw(t *testing.T, e *env) {
	ctx := ctxT(t)
	m := e.manager(t, nil)
	a, b, c := e.inst("a", pickup.UsageOnDemand, "c6i.large"), e.inst("b", pickup.UsageOnDemand, "c6i.large"), e.inst("c", pickup.UsageOnDemand, "c6i.large")
	e.offer(t, m, a, b, c)
	got, err := m.Pickup(ctx, anyOnDemand, "job-1")
	if err != nil {
		t.Fatalf("Pickup: %v", err)
	}
	if _, err := m.Withdraw(ctx, []string{b.ID}, pickup.StateIdle); err == nil {
		t.Fatal("Withdraw into idle: no error; want one")
	}
	done, err := m.Withdraw(ctx, []string{a.ID, b.ID, c.ID, e.class + "-missing"}, pickup.StateTerminating)
	if err != nil {
		t.Fatalf("Withdraw: %v", err)
	}
	var want []string
	for _, id := range []string{a.ID, b.ID, c.ID} {
		if id != got.ID {
			want = append(want, id)
		}
	}
	if !slices.Equal(done, want) {
		t.Fatalf("withdrew %v; want %v (not the claimed %s, not the missing one)", done, want, got.ID)
	}
	if rec := e.get(t, got.ID); rec.State != pickup.StateClaimed || rec.Owner != "job-1" {
		t.Fatalf("claimed runner: %s/%q; want claimed by job-1", rec.State, rec.Owner)
	}
	for _, id := range want {
		if rec := e.get(t, id); rec.State != pickup.StateTerminating {
			t.Fatalf("%s is %s; want terminating", id, rec.State)
		}
	}
	_, err = m.Pickup(ctx, anyOnDemand, "job-2")
	wantExhausted(t, err, pickup.Global)
	if ids, bad := e.drain(t); len(ids) != 0 || bad != 0 {
		t.Fatalf("queue still holds %v (+%d bad); want the withdrawn runners' messages gone", ids, bad)
	}
}
