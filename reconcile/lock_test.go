package reconcile

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rpdhq/rpd/backend"
)

func TestHeldLockRenewsAndReleasesOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := newFakeBackend()
		h, err := LockState(ctx, f.live(), LockOptions{Who: "a@b", Operation: "apply", TTL: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if h.Info().Who != "a@b" || h.Info().ID == "" {
			t.Fatalf("info = %+v", h.Info())
		}
		// Renewals every third of the lease keep it a full lease ahead.
		time.Sleep(30 * time.Second)
		synctest.Wait()
		f.mu.Lock()
		exp := f.lock.Expires
		f.mu.Unlock()
		if want := time.Now().Add(30 * time.Second); !exp.Equal(want) {
			t.Fatalf("lease expires %v after three renewals; want %v", exp, want)
		}
		// A second taker fails with the holder's info.
		_, err = LockState(ctx, f.live(), LockOptions{Who: "x@y"})
		var le *backend.LockedError
		if !errors.As(err, &le) || le.Holder.Who != "a@b" {
			t.Fatalf("second LockState: %v", err)
		}
		// Concurrent releases unlock exactly once.
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = h.Release(ctx) }()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("Release: %v", err)
			}
		}
		unlocks := 0
		for _, c := range callsOf(f) {
			if c == "Unlock" {
				unlocks++
			}
		}
		if unlocks != 1 || f.lock != nil {
			t.Fatalf("%d unlocks, lock %+v", unlocks, f.lock)
		}
	})
}

func TestHeldLockReleaseReportsFailure(t *testing.T) {
	f := newFakeBackend()
	h, err := LockState(context.Background(), f.live(), LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.fail = func(call string) error {
		if call == "Unlock" {
			return errors.New("network down")
		}
		return nil
	}
	err = h.Release(context.Background())
	if err == nil || !strings.Contains(err.Error(), "rpd force-unlock "+h.Info().ID) {
		t.Fatalf("err = %v", err)
	}
	if _, err := LockState(context.Background(), Live{}, LockOptions{}); err == nil {
		t.Fatal("LockState without a backend.Locker succeeded")
	}
}

// hangingRenew is a Locker whose Renew blocks until its context ends, as a
// call on a stuck connection would.
type hangingRenew struct{ backend.Locker }

func (hangingRenew) Renew(ctx context.Context, _ string, _ time.Duration) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestHeldLockHungRenewal: a renewal that hangs counts as a lost lock after
// a third of the lease, and never holds up Release.
func TestHeldLockHungRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := newFakeBackend()
		live := f.live()
		live.Lock = hangingRenew{live.Lock}
		const ttl = 30 * time.Second
		h, err := LockState(ctx, live, LockOptions{Who: "a@b", TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		select {
		case err := <-h.Lost():
			if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "lost the state lock") {
				t.Fatalf("Lost: %v", err)
			}
		case <-time.After(time.Hour):
			t.Fatal("a hung renewal was never reported as a lost lock")
		}
		// The renewal started after a third of the lease and was given
		// another third.
		if got := time.Since(start); got != 2*ttl/3 {
			t.Errorf("lost after %v; want %v", got, 2*ttl/3)
		}
		if err := h.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
	})
}
