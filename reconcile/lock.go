package reconcile

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// lockRetryInterval is how long Apply waits between attempts to take a
// held lock while -lock-timeout has not run out.
const lockRetryInterval = 500 * time.Millisecond

// newID returns a random identifier for locks and lineages.
func newID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("reconcile: crypto/rand failed: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

// acquireLock takes the state lock, retrying while another holder has it
// until timeout has passed. The returned error, when the lock stayed held,
// wraps the *LockedError with the holder's info.
func acquireLock(ctx context.Context, l Locker, info LockInfo, ttl, timeout time.Duration, clock Clock) (LockInfo, error) {
	deadline := clock.Now().Add(timeout)
	for {
		info.Created = clock.Now()
		info.Expires = info.Created.Add(ttl)
		got, err := l.Lock(ctx, info, ttl)
		if err == nil {
			if got.ID == "" {
				got.ID = info.ID
			}
			return got, nil
		}
		var locked *LockedError
		if !errors.As(err, &locked) {
			return LockInfo{}, fmt.Errorf("acquire the state lock: %w", err)
		}
		left := deadline.Sub(clock.Now())
		if left <= 0 {
			if timeout > 0 {
				return LockInfo{}, fmt.Errorf("acquire the state lock (gave up after -lock-timeout=%s): %w", timeout, err)
			}
			return LockInfo{}, fmt.Errorf("acquire the state lock (use -lock-timeout to wait for it): %w", err)
		}
		select {
		case <-ctx.Done():
			return LockInfo{}, fmt.Errorf("acquire the state lock: %w", ctx.Err())
		case <-clock.After(min(left, lockRetryInterval)):
		}
	}
}
