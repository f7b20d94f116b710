package daemon

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The reloader's owner runs the work handed to it one piece at a time,
// while readers of the state never wait for it; a caller whose
// context ends before the owner takes its work gets false, as does every
// caller after stop.
func TestReloaderOwner(t *testing.T) {
	r := newReloader()
	defer r.stop()
	release := make(chan struct{})
	var running, maxRunning atomic.Int32
	var ran []int
	var mu sync.Mutex
	var wg sync.WaitGroup
	started := make(chan struct{})
	wg.Go(func() {
		r.do(context.Background(), func() {
			close(started)
			<-release // a reload stuck in I/O
		})
	})
	<-started
	// Readers do not wait for the owner.
	done := make(chan struct{})
	go func() { _ = r.state(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("reading the state waited for a running reload")
	}
	// A caller that gives up while the owner is busy: its work never runs.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if r.do(ctx, func() { t.Error("work of a cancelled caller ran") }) {
		t.Fatal("do reported a cancelled caller's work as run")
	}
	for i := range 8 {
		wg.Go(func() {
			r.do(context.Background(), func() {
				n := running.Add(1)
				if n > maxRunning.Load() {
					maxRunning.Store(n)
				}
				mu.Lock()
				ran = append(ran, i)
				mu.Unlock()
				running.Add(-1)
			})
		})
	}
	close(release)
	wg.Wait()
	if maxRunning.Load() != 1 || len(ran) != 8 {
		t.Fatalf("%d pieces of work ran, at most %d at once; want 8, one at a time", len(ran), maxRunning.Load())
	}
	r.stop()
	if r.do(context.Background(), func() { t.Error("work ran after stop") }) {
		t.Fatal("do reported work as run after stop")
	}
}
