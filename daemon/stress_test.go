package daemon

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rpdhq/rpd/api"
)

// Clients acquire, heartbeat and release over HTTP while the pool is
// resized by reloads: no reload drops a held lease (every heartbeat of a
// held lease succeeds), and when everyone has released, the pool is empty.
func TestStressReloadsNeverDropLeases(t *testing.T) {
	td := startDaemon(t, `pool "db" { slots = 2 }`)
	ctx := ctxT(t)
	stop := make(chan struct{})
	var reloads sync.WaitGroup
	reloads.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			writeFile(t, filepath.Join(td.dir, "main.hcl"), fmt.Sprintf(`pool "db" { slots = %d }`, 1+i%4))
			if res := td.d.Reload(ctx); !res.OK {
				t.Errorf("reload %d: %s", i, res.Error)
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	var workers sync.WaitGroup
	for w := 0; w < 8; w++ {
		workers.Go(func() {
			for i := 0; i < 25; i++ {
				l, err := td.c.Acquire(ctx, "db", api.AcquireRequest{TaskID: fmt.Sprintf("w%d-%d", w, i), WaitSeconds: 10})
				if err != nil {
					t.Errorf("acquire: %v", err)
					return
				}
				if _, err := td.c.Heartbeat(ctx, l.LeaseID); err != nil {
					t.Errorf("a reload dropped lease %s: %v", l.LeaseID, err)
				}
				if err := td.c.Release(ctx, l.LeaseID); err != nil {
					t.Errorf("release: %v", err)
				}
			}
		})
	}
	workers.Wait()
	close(stop)
	reloads.Wait()
	if ps, _ := td.c.Pool(ctx, "db"); ps.Used != 0 || ps.Queued != 0 {
		t.Fatalf("pool after every client released = %+v, want empty", ps)
	}
}
