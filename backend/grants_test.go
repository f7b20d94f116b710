package backend

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

type memGrants struct {
	mu      sync.Mutex
	recs    map[string][]byte
	fail    map[string]bool
	singles int
}

func (m *memGrants) PutGrant(_ context.Context, id string, body []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs[id] = body
	return nil
}

func (m *memGrants) DeleteGrant(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.singles++
	if m.fail[id] {
		return errors.New("disk full")
	}
	delete(m.recs, id)
	return nil
}

func (m *memGrants) LoadGrants(context.Context) (map[string][]byte, error) { return m.recs, nil }

type batchGrants struct {
	*memGrants
	batches [][]string
}

func (b *batchGrants) DeleteGrants(_ context.Context, ids []string) error {
	b.batches = append(b.batches, ids)
	return nil
}

func TestDeleteGrants(t *testing.T) {
	ctx := context.Background()
	m := &memGrants{recs: map[string][]byte{}, fail: map[string]bool{"g3": true}}
	var ids []string
	for i := range 100 {
		id := fmt.Sprintf("g%d", i)
		ids = append(ids, id)
		_ = m.PutGrant(ctx, id, nil)
	}
	if err := DeleteGrants(ctx, m, ids); err == nil || err.Error() != "delete grant g3: disk full" {
		t.Errorf("DeleteGrants: %v; want the failure named", err)
	}
	if m.singles != len(ids) || len(m.recs) != 1 {
		t.Errorf("%d DeleteGrant calls, %d records left; want %d and 1", m.singles, len(m.recs), len(ids))
	}
	b := &batchGrants{memGrants: &memGrants{recs: map[string][]byte{}}}
	if err := DeleteGrants(ctx, b, ids); err != nil {
		t.Fatal(err)
	}
	if b.singles != 0 || len(b.batches) != 1 || !strings.HasPrefix(strings.Join(b.batches[0], ","), "g0,g1,") {
		t.Errorf("a batch store got %d single deletes and batches %v; want one batch", b.singles, b.batches)
	}
}
