package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/daemon/internal/httpapi"
	"github.com/rpdhq/rpd/runtime/pools"
)

// The fenced store is made once per epoch: again after a takeover, never
// reused across epochs.
func TestFencedStoreFollowsTheEpoch(t *testing.T) {
	var made []int64
	f := NewFenced(func(epoch int64) *int64 {
		made = append(made, epoch)
		return &epoch
	})
	for _, epoch := range []int64{3, 3, 3, 4, 4, 3} {
		if got := f.at(epoch); *got != epoch {
			t.Fatalf("at(%d) = a store fenced at %d", epoch, *got)
		}
	}
	if want := []int64{3, 4, 3}; !slices.Equal(made, want) {
		t.Fatalf("stores made for epochs %v; want %v", made, want)
	}
}

type fencedBatch struct {
	pools.MemoryStore
	epoch   int64
	err     error
	batches *[][]string
}

func (f *fencedBatch) DeleteLeases(_ context.Context, ids []string) error {
	*f.batches = append(*f.batches, ids)
	return f.err
}

// A batch of deletes checks the epoch once and goes to the store fenced
// with it in one call; a fenced batch steps the daemon down; without the
// leadership nothing is written.
func TestPoolsDeleteLeasesIsOneFencedBatch(t *testing.T) {
	var batches [][]string
	var fail error
	e := NewElector(nil, time.Minute, time.Second, "", "", func() string { return "" }, slog.New(slog.DiscardHandler))
	p := NewPools(e, func(epoch int64) pools.Store {
		return &fencedBatch{epoch: epoch, err: fail, batches: &batches}
	}, &pools.MemoryStore{})
	ctx := context.Background()
	if err := p.DeleteLeases(ctx, []string{"a"}); !errors.Is(err, httpapi.ErrNotLeader) || len(batches) != 0 {
		t.Fatalf("not leading: %v, %d batches written", err, len(batches))
	}
	e.epoch.Store(7)
	e.validUntil.Store(int64(time.Hour))
	if err := p.DeleteLeases(ctx, []string{"a", "b", "c"}); err != nil {
		t.Fatal(err)
	}
	if len(batches) != 1 || len(batches[0]) != 3 {
		t.Fatalf("batches %v; want one of 3", batches)
	}
	fail = fmt.Errorf("delete pool leases a of stack s: %w", backend.ErrFenced)
	e.epoch.Store(8) // a new fenced store, which fails
	if err := p.DeleteLeases(ctx, []string{"a"}); !errors.Is(err, backend.ErrFenced) {
		t.Fatalf("fenced batch: %v; want ErrFenced", err)
	}
	select {
	case <-e.Lost:
	default:
		t.Fatal("a fenced batch did not step the daemon down")
	}
}

// creatingStore records the epoch of each CreateLease.
type creatingStore struct {
	pools.MemoryStore
	epoch   int64
	created *[]int64
}

func (c *creatingStore) CreateLease(context.Context, pools.LeaseRecord) error {
	*c.created = append(*c.created, c.epoch)
	return nil
}

// A grant's record reaches the store fenced with the epoch as a
// CreateLease (pools.CreateLease), and nothing without the leadership.
func TestPoolsCreateLeaseIsFenced(t *testing.T) {
	var created []int64
	e := NewElector(nil, time.Minute, time.Second, "", "", func() string { return "" }, slog.New(slog.DiscardHandler))
	p := NewPools(e, func(epoch int64) pools.Store {
		return &creatingStore{epoch: epoch, created: &created}
	}, &pools.MemoryStore{})
	ctx := context.Background()
	if err := pools.CreateLease(ctx, p, pools.LeaseRecord{LeaseID: "a"}); !errors.Is(err, httpapi.ErrNotLeader) || len(created) != 0 {
		t.Fatalf("not leading: %v, %d records written", err, len(created))
	}
	e.epoch.Store(7)
	e.validUntil.Store(int64(time.Hour))
	if err := pools.CreateLease(ctx, p, pools.LeaseRecord{LeaseID: "a"}); err != nil {
		t.Fatal(err)
	}
	if len(created) != 1 || created[0] != 7 {
		t.Fatalf("CreateLease calls at epochs %v; want [7]", created)
	}
}
