package reconcile

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rpdhq/rpd/backend"
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
func acquireLock(ctx context.Context, l backend.Locker, info backend.LockInfo, ttl, timeout time.Duration) (backend.LockInfo, error) {
	deadline := time.Now().Add(timeout)
	for {
		info.Created = time.Now()
		info.Expires = info.Created.Add(ttl)
		got, err := l.Lock(ctx, info, ttl)
		if err == nil {
			if got.ID == "" {
				got.ID = info.ID
			}
			return got, nil
		}
		var locked *backend.LockedError
		if !errors.As(err, &locked) {
			return backend.LockInfo{}, fmt.Errorf("acquire the state lock: %w", err)
		}
		left := deadline.Sub(time.Now())
		if left <= 0 {
			if timeout > 0 {
				return backend.LockInfo{}, fmt.Errorf("acquire the state lock (gave up after -lock-timeout=%s): %w", timeout, err)
			}
			return backend.LockInfo{}, fmt.Errorf("acquire the state lock (use -lock-timeout to wait for it): %w", err)
		}
		select {
		case <-ctx.Done():
			return backend.LockInfo{}, fmt.Errorf("acquire the state lock: %w", ctx.Err())
		case <-time.After(min(left, lockRetryInterval)):
		}
	}
}

// LockOptions tune LockState.
type LockOptions struct {
	// Who and Operation describe the holder ("alice@build-3", "apply").
	Who, Operation string
	// Timeout is how long to keep retrying while someone else holds the
	// lock (0: fail at once with the holder's info).
	Timeout time.Duration
	// TTL is the lease (default 1m), renewed every third of it until
	// Release, so a killed process frees the lock by itself.
	TTL time.Duration
}

// HeldLock is the stack's state lock, held and renewed in the background
// until Release. rpd apply takes it before planning, so that the plan it
// shows cannot go stale while it waits for "yes"; Apply takes one itself
// when not given one.
type HeldLock struct {
	info   backend.LockInfo
	locker backend.Locker
	lost   chan error // receives once if a renewal fails
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

// LockState takes the state lock of live, retrying up to opts.Timeout
// while another holder has it; the error then wraps the *LockedError with
// the holder's info. The lock is renewed until Release.
func LockState(ctx context.Context, live Live, opts LockOptions) (*HeldLock, error) {
	if opts.TTL <= 0 {
		opts.TTL = time.Minute
	}
	if opts.Who == "" {
		opts.Who = DefaultWho()
	}
	if live.Lock == nil {
		return nil, errors.New("the backend has no state lock")
	}
	info, err := acquireLock(ctx, live.Lock, backend.LockInfo{ID: newID(), Who: opts.Who, Operation: opts.Operation}, opts.TTL, opts.Timeout)
	if err != nil {
		return nil, err
	}
	h := &HeldLock{info: info, locker: live.Lock, lost: make(chan error, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go h.renew(context.WithoutCancel(ctx), opts.TTL)
	return h, nil
}

// Info is the lock as stored.
func (h *HeldLock) Info() backend.LockInfo { return h.info }

// Lost receives an error once if renewing the lease failed: someone else
// may hold the lock now, and nothing more should be changed under it.
func (h *HeldLock) Lost() <-chan error { return h.lost }

func (h *HeldLock) renew(ctx context.Context, ttl time.Duration) {
	defer close(h.done)
	for {
		select {
		case <-h.stop:
			return
		case <-time.After(ttl / 3):
		}
		// A renewal that takes longer than a third of the lease is as good
		// as failed, and must not hold up Release.
		rctx, cancel := context.WithTimeout(ctx, ttl/3)
		err := h.locker.Renew(rctx, h.info.ID, ttl)
		cancel()
		if err != nil {
			h.lost <- fmt.Errorf("lost the state lock %s: %w", h.info.ID, err)
			return
		}
	}
}

// Release stops renewing and unlocks. It is idempotent; only the first
// call unlocks. When unlocking fails the lease still runs out by itself.
func (h *HeldLock) Release(ctx context.Context) error {
	var err error
	h.once.Do(func() {
		close(h.stop)
		<-h.done
		if uerr := h.locker.Unlock(ctx, h.info.ID); uerr != nil {
			err = fmt.Errorf("release the state lock %s: %w; run `rpd force-unlock %s` if it stays held", h.info.ID, uerr, h.info.ID)
		}
	})
	return err
}
