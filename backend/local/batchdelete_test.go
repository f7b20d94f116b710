package local

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend"
)

// DeleteLeases and DeleteGrants delete every record named, fenced (grant
// journal) or not (SQLite), and only those; a missing one is no error.
func TestBatchDeletes(t *testing.T) {
	for _, fenced := range []bool{false, true} {
		t.Run(fmt.Sprint("fenced=", fenced), func(t *testing.T) {
			ctx := context.Background()
			b, fp, fg, _ := lazyLeader(t, filepath.Join(t.TempDir(), "c.db"), nil)
			ps, gs := b.PoolStore(), b.GrantStore()
			if fenced {
				ps, gs = fp, fg
			}
			var ids []string
			for i := range 100 { // beyond one chunk of the daemon's queue
				id := fmt.Sprintf("l%03d", i)
				ids = append(ids, id)
				if err := ps.PutLease(ctx, rec(id)); err != nil {
					t.Fatal(err)
				}
				if err := gs.PutGrant(ctx, "permit/"+id, []byte("{}")); err != nil {
					t.Fatal(err)
				}
			}
			if err := ps.DeleteLeases(ctx, append(ids[:90:90], "missing")); err != nil {
				t.Fatal(err)
			}
			var gids []string
			for _, id := range ids[10:] {
				gids = append(gids, "permit/"+id)
			}
			if err := gs.DeleteGrants(ctx, gids); err != nil {
				t.Fatal(err)
			}
			if err := ps.DeleteLeases(ctx, nil); err != nil {
				t.Fatal(err)
			}
			if got, want := strings.Join(leaseIDs(t, b), ","), strings.Join(ids[90:], ","); got != want {
				t.Errorf("leases left: %s; want %s", got, want)
			}
			grants, err := b.GrantStore().LoadGrants(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(grants) != 10 {
				t.Errorf("%d grants left; want 10", len(grants))
			}
			for _, id := range ids[:10] {
				if _, ok := grants["permit/"+id]; !ok {
					t.Errorf("grant permit/%s was deleted; it was not named", id)
				}
			}
		})
	}
}

// A stale leader's batch fails with ErrFenced, naming the IDs, and deletes
// nothing; so does one with an ended ctx (not written) and one after Close.
func TestBatchDeletesFail(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	path := filepath.Join(t.TempDir(), "c.db")
	ctx := context.Background()
	a, staleP, staleG, epoch := lazyLeader(t, path, clock)
	for _, id := range []string{"x", "y"} {
		if err := staleP.PutLease(ctx, rec(id)); err != nil {
			t.Fatal(err)
		}
		if err := staleG.PutGrant(ctx, id, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := staleP.DeleteLeases(cctx, []string{"x", "y"}); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "x, y") {
		t.Errorf("DeleteLeases with an ended ctx: %v", err)
	}
	nb, err := Open(ctx, path, Options{Stack: "s", Clock: func() time.Time { return now.Add(2 * time.Second) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nb.Close() })
	if l, held, err := nb.AcquireLeader(ctx, backend.LeaderClaim{Holder: "b", Lease: time.Minute}); err != nil || !held || l.Epoch != epoch+1 {
		t.Fatalf("takeover: %+v, %v, %v", l, held, err)
	}
	err = staleP.DeleteLeases(ctx, []string{"x", "y"})
	if !errors.Is(err, backend.ErrFenced) || !strings.Contains(err.Error(), "delete pool leases x, y of stack s") {
		t.Errorf("stale DeleteLeases: %v; want ErrFenced naming x, y", err)
	}
	if err := staleG.DeleteGrants(ctx, []string{"x", "y"}); !errors.Is(err, backend.ErrFenced) {
		t.Errorf("stale DeleteGrants: %v; want ErrFenced", err)
	}
	if got := strings.Join(leaseIDs(t, nb), ","); got != "x,y" {
		t.Errorf("the new leader reads %s; want x,y", got)
	}
	a.Close()
	if err := a.PoolStore().DeleteLeases(ctx, []string{"x"}); err == nil || !strings.Contains(err.Error(), "closed; open it again") {
		t.Errorf("DeleteLeases after Close: %v", err)
	}
}
