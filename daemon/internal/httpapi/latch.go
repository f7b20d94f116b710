package httpapi

import (
	"context"
	"sync"
)

// RequestLatch serialises the requests that carry the same request_id, so
// that a client's retry racing its original (whose answer was lost) waits
// for it and then finds its grant, instead of being granted a second time.
type RequestLatch struct {
	mu       sync.Mutex
	inflight map[string]chan struct{}
}

// Lock waits until no other request holds key, then holds it; it fails
// with ctx's error if ctx ends first. The returned func releases key.
func (rl *RequestLatch) Lock(ctx context.Context, key string) (func(), error) {
	for {
		rl.mu.Lock()
		if rl.inflight == nil {
			rl.inflight = map[string]chan struct{}{}
		}
		busy, ok := rl.inflight[key]
		if !ok {
			done := make(chan struct{})
			rl.inflight[key] = done
			rl.mu.Unlock()
			return func() {
				rl.mu.Lock()
				delete(rl.inflight, key)
				rl.mu.Unlock()
				close(done)
			}, nil
		}
		rl.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
