package httpapi

import (
	"context"
	"sync"
)

// RequestLatch serialises the requests that carry the same request_id, so
// that a client's retry racing its original (whose answer was lost) waits
// for it and then finds its grant, instead of being granted a second time.
// The zero value is ready; holding a key nobody waits for allocates
// nothing once the latch has warmed up.
type RequestLatch struct {
	mu       sync.Mutex
	inflight map[string]*latchEntry
	free     []*latchEntry // entries released with no waiter, reused
}

// latchEntry is a held key. Its done channel is closed when the holder
// releases it while someone waits; an entry nobody waited on is reused
// with its channel still open.
type latchEntry struct {
	done    chan struct{}
	waiters int // requests that waited on it (under RequestLatch.mu)
}

// maxFreeLatches bounds the entries a latch keeps for reuse: about the
// grants under way at once.
const maxFreeLatches = 256

// Held is a key held on a RequestLatch; Unlock releases it. The zero Held
// holds nothing.
type Held struct {
	rl  *RequestLatch
	key string
	e   *latchEntry
}

// Lock waits until no other request holds key, then holds it; it fails
// with ctx's error if ctx ends first.
func (rl *RequestLatch) Lock(ctx context.Context, key string) (Held, error) {
	for {
		rl.mu.Lock()
		if rl.inflight == nil {
			rl.inflight = map[string]*latchEntry{}
		}
		busy, ok := rl.inflight[key]
		if !ok {
			var e *latchEntry
			if n := len(rl.free); n > 0 {
				e, rl.free = rl.free[n-1], rl.free[:n-1]
			} else {
				e = &latchEntry{done: make(chan struct{})}
			}
			rl.inflight[key] = e
			rl.mu.Unlock()
			return Held{rl: rl, key: key, e: e}, nil
		}
		busy.waiters++
		rl.mu.Unlock()
		select {
		case <-busy.done:
		case <-ctx.Done():
			return Held{}, ctx.Err()
		}
	}
}

// Unlock releases the key: the requests waiting for it try again.
func (h Held) Unlock() {
	rl := h.rl
	if rl == nil {
		return
	}
	rl.mu.Lock()
	delete(rl.inflight, h.key)
	if h.e.waiters == 0 && len(rl.free) < maxFreeLatches {
		rl.free = append(rl.free, h.e)
		rl.mu.Unlock()
		return
	}
	rl.mu.Unlock()
	close(h.e.done) // the entry is not reused: its waiters may still look
}
