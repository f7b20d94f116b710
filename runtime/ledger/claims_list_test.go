package ledger

import (
	"testing"
	"time"
)

func TestClaims(t *testing.T) {
	l, clk := newTestLedger(t, Config{Max: 10, Grant: GrantImmediate, ClaimTTL: time.Minute, StaleAfter: 30 * time.Second, PollInterval: 5 * time.Second})
	if got := l.Claims(); len(got) != 0 {
		t.Fatalf("Claims of a new ledger = %+v, want none", got)
	}
	mustObserve(t, l, clk, 2)
	a, err := l.TryRequest(Request{WorkerID: "w-a", Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	b, err := l.TryRequest(Request{WorkerID: "w-b", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if err := b.Confirm(); err != nil {
		t.Fatal(err)
	}
	got := l.Claims()
	if len(got) != 2 {
		t.Fatalf("Claims = %+v, want 2", got)
	}
	if got[0].ID != a.ID() || got[0].WorkerID != "w-a" || got[0].Count != 2 || !got[0].ConfirmedAt.IsZero() || !got[0].ExpiresAt.Equal(a.ExpiresAt()) {
		t.Errorf("first claim = %+v, want w-a's unconfirmed claim of 2", got[0])
	}
	if got[1].ID != b.ID() || !got[1].ConfirmedAt.Equal(clk.Now()) || !got[1].GrantedAt.Equal(b.GrantedAt()) {
		t.Errorf("second claim = %+v, want w-b's claim confirmed now", got[1])
	}

	// a lapses unconfirmed; b is retired by a figure taken after its confirm.
	clk.Advance(time.Minute)
	mustObserve(t, l, clk, 3)
	if got := l.Claims(); len(got) != 0 {
		t.Fatalf("Claims after expiry and retirement = %+v, want none", got)
	}
}
