package pools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// failStore fails the deletes of the IDs in fail, without naming them, and
// counts its calls.
type failStore struct {
	MemoryStore
	fail    map[string]bool
	mu      sync.Mutex
	singles int
	batches [][]string
}

func (f *failStore) DeleteLease(ctx context.Context, id string) error {
	f.mu.Lock()
	f.singles++
	f.mu.Unlock()
	if f.fail[id] {
		return errors.New("disk full")
	}
	return f.MemoryStore.DeleteLease(ctx, id)
}

type batchFailStore struct{ *failStore }

func (b batchFailStore) DeleteLeases(ctx context.Context, ids []string) error {
	b.mu.Lock()
	b.batches = append(b.batches, ids)
	b.mu.Unlock()
	return nil
}

func TestDeleteLeases(t *testing.T) {
	ctx := context.Background()
	f := &failStore{fail: map[string]bool{"l7": true, "l70": true}}
	var ids []string
	for i := range 150 { // more than one round of concurrent deletes
		id := fmt.Sprintf("l%d", i)
		ids = append(ids, id)
		if err := f.PutLease(ctx, LeaseRecord{LeaseID: id, Pool: "p", Slots: 1}); err != nil {
			t.Fatal(err)
		}
	}
	err := DeleteLeases(ctx, f, ids)
	if err == nil || !strings.Contains(err.Error(), "delete pool lease l7: disk full") || !strings.Contains(err.Error(), "delete pool lease l70: disk full") {
		t.Errorf("DeleteLeases: %v; want the two failures named", err)
	}
	if f.singles != len(ids) {
		t.Errorf("%d DeleteLease calls; want %d", f.singles, len(ids))
	}
	if recs, _ := f.LoadLeases(ctx); len(recs) != 2 {
		t.Errorf("%d records left; want the 2 that failed", len(recs))
	}
	if err := DeleteLeases(ctx, f, []string{"l7"}); err == nil || err.Error() != "delete pool lease l7: disk full" {
		t.Errorf("DeleteLeases of one: %v", err)
	}
	if err := DeleteLeases(ctx, f, nil); err != nil {
		t.Errorf("DeleteLeases of none: %v", err)
	}

	b := batchFailStore{&failStore{}}
	if err := DeleteLeases(ctx, b, ids); err != nil {
		t.Fatal(err)
	}
	if b.singles != 0 || len(b.batches) != 1 || len(b.batches[0]) != len(ids) {
		t.Errorf("a batch store got %d single deletes and batches %v; want one batch of %d", b.singles, b.batches, len(ids))
	}
}
