package local

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Several processes started at once on a fresh state file (replicas of a
// stack) each open and migrate it: none fails for a lock another holds
// briefly (switching to WAL, the schema transaction), whatever the timing.
func TestConcurrentFirstOpen(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const rounds, openers = 15, 4
	for round := range rounds {
		path := filepath.Join(t.TempDir(), "state.db")
		var wg sync.WaitGroup
		errs := make([]error, openers)
		start := make(chan struct{})
		for i := range openers {
			wg.Go(func() {
				<-start
				b, err := Open(ctx, path, Options{Stack: "t"})
				if err != nil {
					errs[i] = err
					return
				}
				_, errs[i] = b.PoolStore().LoadLeases(ctx)
				b.Close()
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, opener %d: %v", round, i, err)
			}
		}
	}
}
