package local_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/backendtest"
	"github.com/rpdhq/rpd/backend/local"
	"github.com/rpdhq/rpd/runtime/pickup"
	"github.com/rpdhq/rpd/runtime/pools"
)

// A file whose schema lacks tables (hand-made, at the current version so
// that no migration touches it) still opens: the statements that do not
// prepare run unprepared and fail when called, naming the missing table,
// as they did before statements were prepared at Open.
func TestUnpreparableStatementsFailWhenCalled(t *testing.T) {
	path := writeSQLite(t, "partial.db",
		`CREATE TABLE pool_leases (stack TEXT NOT NULL, lease_id TEXT NOT NULL, pool TEXT NOT NULL, task_id TEXT NOT NULL,
			priority INTEGER NOT NULL, slots INTEGER NOT NULL, granted_ns INTEGER NOT NULL, expires_ns INTEGER NOT NULL,
			ttl_ns INTEGER NOT NULL DEFAULT 0, owner TEXT NOT NULL DEFAULT '', PRIMARY KEY (stack, lease_id))`,
		fmt.Sprintf(`PRAGMA user_version = %d`, local.SchemaVersion()))
	ctx := context.Background()
	b := openAt(t, path, "s", nil)

	q := b.Queue("q")
	if err := q.Send(ctx, "x", 0); err == nil || !strings.Contains(err.Error(), "no such table") {
		t.Errorf("Send without a messages table: %v; want a no such table error", err)
	}
	if _, err := q.Receive(ctx, 1, 0, 0); err == nil || !strings.Contains(err.Error(), "no such table") {
		t.Errorf("Receive without a queues table: %v; want a no such table error", err)
	}
	if err := q.Delete(ctx, "1.abc"); err == nil || errors.Is(err, pickup.ErrStaleHandle) {
		t.Errorf("Delete without a messages table: %v; want a non-stale error", err)
	}
	if _, err := b.DescribeQueue(ctx, "q"); err == nil || errors.Is(err, backend.ErrQueueNotFound) {
		t.Errorf("DescribeQueue without a queues table: %v; want an error other than not found", err)
	}
	if _, err := b.Instances().Transition(ctx, pickup.Transition{ID: "i", From: pickup.StateIdle, To: pickup.StateClaimed}); err == nil || errors.Is(err, pickup.ErrConditionFailed) {
		t.Errorf("Transition without an instances table: %v; want a transient error", err)
	}
	if _, _, err := b.ReadState(ctx); err == nil {
		t.Error("ReadState without a state table succeeded")
	}
	// The pool_leases statements did prepare and work.
	rec := pools.LeaseRecord{LeaseID: "p/1", Pool: "p", Slots: 1, TTL: time.Minute}
	if err := b.PoolStore().PutLease(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if recs, err := b.PoolStore().LoadLeases(ctx); err != nil || len(recs) != 1 {
		t.Fatalf("LoadLeases = %+v, %v; want the one record", recs, err)
	}
}

// Prepared statements are shared by every goroutine: more concurrent
// readers than read connections, and writers inside and outside
// transactions, each get their own results.
func TestPreparedStatementsUnderConcurrency(t *testing.T) {
	ctx := context.Background()
	b := openAt(t, filepath.Join(t.TempDir(), "s.db"), "s", nil)
	const queues, rounds = 4, 25
	for i := range queues {
		if err := b.CreateQueue(ctx, fmt.Sprintf("q%d", i), backend.QueueAttributes{VisibilityTimeout: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3*queues*rounds)
	for i := range queues {
		name := fmt.Sprintf("q%d", i)
		wg.Add(3)
		go func() { // sender, then receiver and deleter of its own messages
			defer wg.Done()
			q := b.Queue(name)
			for r := range rounds {
				body := fmt.Sprintf("%s-%d", name, r)
				if err := q.Send(ctx, body, 0); err != nil {
					errs <- err
					return
				}
				msgs, err := q.Receive(ctx, 1, 0, 0)
				if err != nil || len(msgs) != 1 || msgs[0].Body != body {
					errs <- fmt.Errorf("receive from %s: %+v, %v; want %q", name, msgs, err, body)
					return
				}
				if err := q.Delete(ctx, msgs[0].ReceiptHandle); err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() { // describer
			defer wg.Done()
			for range rounds {
				info, err := b.DescribeQueue(ctx, name)
				if err != nil || info.Name != name || info.Attributes.VisibilityTimeout != time.Minute {
					errs <- fmt.Errorf("describe %s: %+v, %v", name, info, err)
					return
				}
			}
		}()
		go func() { // lease writer and reader
			defer wg.Done()
			for r := range rounds {
				id := fmt.Sprintf("%s/%d", name, r)
				if err := b.PoolStore().PutLease(ctx, pools.LeaseRecord{LeaseID: id, Pool: name, Slots: 1}); err != nil {
					errs <- err
					return
				}
				if _, err := b.PoolStore().LoadLeases(ctx); err != nil {
					errs <- err
					return
				}
				if err := b.PoolStore().DeleteLease(ctx, id); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	recs, err := b.PoolStore().LoadLeases(ctx)
	if err != nil || len(recs) != 0 {
		t.Errorf("leases left: %+v, %v; want none", recs, err)
	}
	for i := range queues {
		info, err := b.DescribeQueue(ctx, fmt.Sprintf("q%d", i))
		if err != nil || info.Visible+info.InFlight+info.Delayed != 0 {
			t.Errorf("queue q%d after the run: %+v, %v; want empty", i, info, err)
		}
	}
}

// DescribeQueue (one statement for configuration and counts) leaves out
// messages past the queue's retention, reports a missing queue as
// ErrQueueNotFound and stored tags it cannot read as an error naming them.
func TestDescribeRetentionMissingAndBadTags(t *testing.T) {
	clock := backendtest.NewFakeClock(time.Unix(1000, 0))
	path := filepath.Join(t.TempDir(), "s.db")
	b := openAt(t, path, "s", clock.Now)
	ctx := context.Background()
	if err := b.CreateQueue(ctx, "q", backend.QueueAttributes{Retention: time.Minute, Tags: map[string]string{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Queue("q").Send(ctx, "old", 0); err != nil {
		t.Fatal(err)
	}
	clock.Advance(30 * time.Second)
	if err := b.Queue("q").Send(ctx, "new", 0); err != nil {
		t.Fatal(err)
	}
	info, err := b.DescribeQueue(ctx, "q")
	if err != nil || info.Visible != 2 || info.Attributes.Retention != time.Minute || info.Attributes.Tags["k"] != "v" {
		t.Fatalf("Describe before retention = %+v, %v; want 2 visible, retention 1m, tag k=v", info, err)
	}
	clock.Advance(31 * time.Second) // "old" is 61s old, "new" 31s
	if info, err := b.DescribeQueue(ctx, "q"); err != nil || info.Visible != 1 || info.InFlight != 0 || info.Delayed != 0 {
		t.Fatalf("Describe after the first message's retention = %+v, %v; want 1 visible", info, err)
	}
	if _, err := b.DescribeQueue(ctx, "nope"); !errors.Is(err, backend.ErrQueueNotFound) {
		t.Errorf("Describe of a missing queue: %v; want ErrQueueNotFound", err)
	}

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE queues SET tags = '{not json' WHERE name = 'q'`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.DescribeQueue(ctx, "q"); err == nil || !strings.Contains(err.Error(), "unreadable tags") {
		t.Errorf("Describe with unreadable tags: %v; want an error naming them", err)
	}
}
