package snapshot_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rpdhq/rpd/backend/local"
	"github.com/rpdhq/rpd/backend/snapshot"
	"github.com/rpdhq/rpd/runtime/pools"
)

// A held pool lease is backed up from one embedded backend and restored
// into an empty one: the way `rpd backup` and `rpd restore` move a stack.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "rpd-snapshot-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	stores := func(b *local.Backend) snapshot.Stores {
		return snapshot.Stores{State: b, Leader: b, Pools: b.PoolStore(), Grants: b.GrantStore(), Instances: b.Instances()}
	}
	from, err := local.Open(ctx, filepath.Join(dir, "from.db"), local.Options{Stack: "ci"})
	if err != nil {
		panic(err)
	}
	defer from.Close()
	held := pools.LeaseRecord{LeaseID: "db/r-1", Pool: "db", TaskID: "build-1", Slots: 1,
		GrantedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour), TTL: time.Hour}
	if err := from.PoolStore().PutLease(ctx, held); err != nil {
		panic(err)
	}

	snap, err := snapshot.Take(ctx, stores(from), "ci", nil)
	if err != nil {
		panic(err)
	}
	var file bytes.Buffer // what `rpd backup -out FILE` writes
	if err := snapshot.Write(&file, snap); err != nil {
		panic(err)
	}

	back, err := snapshot.Read(&file)
	if err != nil {
		panic(err)
	}
	to, err := local.Open(ctx, filepath.Join(dir, "to.db"), local.Options{Stack: "ci"})
	if err != nil {
		panic(err)
	}
	defer to.Close()
	if err := snapshot.Restore(ctx, stores(to), "ci", back, snapshot.RestoreOptions{}); err != nil {
		panic(err)
	}
	recs, err := to.PoolStore().LoadLeases(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(back.Format, len(recs), recs[0].LeaseID, recs[0].TaskID)
	// Output: rpd-backup/1 1 db/r-1 build-1
}
