package pools

import (
	"context"
	"sync"
)

// MemoryStore is a Store kept in process memory: it survives nothing, so it
// serves tests and single-process use where Restore is only exercised by
// handing the same MemoryStore to a second Manager. The zero value is ready.
type MemoryStore struct {
	mu   sync.Mutex
	recs map[string]LeaseRecord
}

var _ Store = (*MemoryStore)(nil)

// PutLease creates or replaces rec. It fails only if ctx is done.
func (s *MemoryStore) PutLease(ctx context.Context, rec LeaseRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recs == nil {
		s.recs = make(map[string]LeaseRecord)
	}
	s.recs[rec.LeaseID] = rec
	return nil
}

// DeleteLease removes the record; a missing record is not an error.
func (s *MemoryStore) DeleteLease(ctx context.Context, leaseID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.recs, leaseID)
	return nil
}

// LoadLeases returns a copy of every record, in no particular order.
func (s *MemoryStore) LoadLeases(ctx context.Context) ([]LeaseRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]LeaseRecord, 0, len(s.recs))
	for _, r := range s.recs {
		out = append(out, r)
	}
	return out, nil
}
