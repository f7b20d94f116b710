package local_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/backendtest"
	"github.com/rpdhq/rpd/backend/local"
	"github.com/rpdhq/rpd/runtime/pickup"
	"github.com/rpdhq/rpd/runtime/pools"
)

func openAt(t testing.TB, path, stack string, clock func() time.Time) *local.Backend {
	t.Helper()
	b, err := local.Open(context.Background(), path, local.Options{Stack: stack, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestOpenCreatesParentDirAndDefaults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a dir", "b#?%", "state.db")
	openAt(t, path, "s", nil)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database file not created: %v", err)
	}
	if _, err := local.Open(context.Background(), path, local.Options{}); err == nil {
		t.Error("Open without a stack succeeded")
	}
	if _, err := local.Open(context.Background(), "", local.Options{Stack: "s"}); err == nil || !strings.Contains(err.Error(), backend.DefaultLocalPath) {
		t.Errorf("Open without a path: %v; want an error naming the default path", err)
	}
	// Re-opening an existing file keeps its data (migrations are not re-run).
	b := openAt(t, path, "s", nil)
	if err := b.CreateQueue(context.Background(), "q", backend.QueueAttributes{}); err != nil {
		t.Fatal(err)
	}
	b2 := openAt(t, path, "s", nil)
	if _, err := b2.DescribeQueue(context.Background(), "q"); err != nil {
		t.Errorf("queue not visible after re-open: %v", err)
	}
}

func TestOpenRejectsForeignAndNewerFiles(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a database ", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(dir, "foreign.db")
	newer := filepath.Join(dir, "newer.db")
	for path, stmt := range map[string]string{
		foreign: `CREATE TABLE customers (id INTEGER)`,
		newer:   fmt.Sprintf(`PRAGMA user_version = %d`, local.SchemaVersion()+1),
	} {
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	for _, tc := range []struct{ path, want string }{
		{garbage, "garbage.db"},
		{foreign, "not an rpd database"},
		{newer, "newer than this rpd knows"},
	} {
		_, err := local.Open(context.Background(), tc.path, local.Options{Stack: "s"})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("Open(%s) = %v; want an error naming the file and saying %q", tc.path, err, tc.want)
		}
	}
}

func TestCorruptStateIsAnErrorNamingTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	b := openAt(t, path, "prod", nil)
	ctx := context.Background()
	if _, err := b.WriteState(ctx, []byte(`{"queues":[]}`), 0); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE state SET doc = ? WHERE stack = 'prod'`, []byte(`{"queues":[`)); err != nil {
		t.Fatal(err)
	}
	doc, v, err := b.ReadState(ctx)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "corrupt") || doc != nil || v != 0 {
		t.Errorf("ReadState of a corrupt document = %q, %d, %v; want an error naming %s", doc, v, err, path)
	}
}

func TestStackIsolation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	a, b := openAt(t, path, "a", nil), openAt(t, path, "b", nil)
	ctx := context.Background()
	if _, err := a.WriteState(ctx, []byte(`{"stack":"a"}`), 0); err != nil {
		t.Fatal(err)
	}
	if doc, v, err := b.ReadState(ctx); doc != nil || v != 0 || err != nil {
		t.Errorf("stack b reads %q, %d, %v; want nothing", doc, v, err)
	}
	if _, err := a.Lock(ctx, backend.LockInfo{Who: "a"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lock(ctx, backend.LockInfo{Who: "b"}, time.Minute); err != nil {
		t.Errorf("stack b cannot lock while stack a holds its own lock: %v", err)
	}
	if err := a.PoolStore().PutLease(ctx, pools.LeaseRecord{LeaseID: "l", Pool: "p", Slots: 1}); err != nil {
		t.Fatal(err)
	}
	if recs, err := b.PoolStore().LoadLeases(ctx); err != nil || len(recs) != 0 {
		t.Errorf("stack b loads %v, %v; want no leases", recs, err)
	}
}

func TestDescribeCounts(t *testing.T) {
	clock := backendtest.NewFakeClock(time.Unix(1000, 0))
	b := openAt(t, filepath.Join(t.TempDir(), "state.db"), "s", clock.Now)
	ctx := context.Background()
	if err := b.CreateQueue(ctx, "q", backend.QueueAttributes{VisibilityTimeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	q := b.Queue("q")
	for i, d := range []time.Duration{0, 0, 0, time.Minute} {
		if err := q.Send(ctx, fmt.Sprint(i), d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Receive(ctx, 1, 0, 0); err != nil {
		t.Fatal(err)
	}
	info, err := b.DescribeQueue(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if info.Visible != 2 || info.InFlight != 1 || info.Delayed != 1 || !strings.HasPrefix(info.URL, "sqlite://") {
		t.Errorf("Describe = %+v; want 2 visible, 1 in flight, 1 delayed, a sqlite:// URL", info)
	}
}

func TestClosedBackendErrorsAreTransient(t *testing.T) {
	b, err := local.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"), local.Options{Stack: "s"})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	ctx := context.Background()
	if _, _, err := b.ReadState(ctx); err == nil {
		t.Error("ReadState on a closed backend succeeded")
	}
	if _, err := b.Instances().Transition(ctx, pickup.Transition{ID: "i", From: pickup.StateIdle, To: pickup.StateClaimed}); err == nil || errors.Is(err, pickup.ErrConditionFailed) {
		t.Errorf("Transition on a closed backend: %v; want a transient error", err)
	}
	if err := b.Unlock(ctx, "x"); err == nil || errors.Is(err, backend.ErrLockNotHeld) {
		t.Errorf("Unlock on a closed backend: %v; want a transient error", err)
	}
}

// The two-process test: the parent and a child process (this test binary
// re-executed) receive from one queue and race transitions on one instance
// table in the same file at the same time.

const helperEnv = "RPD_LOCAL_HELPER_DB"

type helperResult struct {
	Received []string // message IDs
	Won      []string // instance IDs
	Err      string
}

func drainAndClaim(ctx context.Context, path, owner string) helperResult {
	var r helperResult
	b, err := local.Open(ctx, path, local.Options{Stack: "s"})
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer b.Close()
	q := b.Queue("q")
	ids, err := b.Instances().List(ctx, "c", "")
	if err != nil {
		r.Err = err.Error()
		return r
	}
	for i := 0; i < 1000; i++ {
		// Interleave: one receive, one claim attempt.
		msgs, err := q.Receive(ctx, 3, time.Hour, 0)
		if err != nil {
			r.Err = err.Error()
			return r
		}
		for _, m := range msgs {
			r.Received = append(r.Received, m.ID)
		}
		if i < len(ids) {
			_, err := b.Instances().Transition(ctx, pickup.Transition{ID: ids[i].ID, From: pickup.StateIdle, To: pickup.StateClaimed, Owner: owner})
			switch {
			case err == nil:
				r.Won = append(r.Won, ids[i].ID)
			case !errors.Is(err, pickup.ErrConditionFailed):
				r.Err = err.Error()
				return r
			}
		}
		if len(msgs) == 0 && i >= len(ids) {
			return r
		}
	}
	return r
}

func TestHelperProcess(t *testing.T) {
	path := os.Getenv(helperEnv)
	if path == "" {
		t.Skip("helper for TestTwoProcesses; runs only when re-executed by it")
	}
	if err := os.WriteFile(path+".ready", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, _ := json.Marshal(drainAndClaim(ctx, path, "child"))
	if err := os.WriteFile(path+".out", out, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestTwoProcesses(t *testing.T) {
	const messages, instances = 300, 100
	path := filepath.Join(t.TempDir(), "state.db")
	b := openAt(t, path, "s", nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.CreateQueue(ctx, "q", backend.QueueAttributes{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < messages; i++ {
		if err := b.Queue("q").Send(ctx, fmt.Sprint(i), 0); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < instances; i++ {
		if err := b.Instances().Put(ctx, pickup.Instance{ID: fmt.Sprintf("i-%03d", i), Class: "c", State: pickup.StateIdle}); err != nil {
			t.Fatal(err)
		}
	}

	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+path)
	var childOut strings.Builder
	cmd.Stdout, cmd.Stderr = &childOut, &childOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ { // wait (≤10s) until the child is about to start
		if _, err := os.Stat(path + ".ready"); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	parent := drainAndClaim(ctx, path, "parent")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child process: %v\n%s", err, childOut.String())
	}
	raw, err := os.ReadFile(path + ".out")
	if err != nil {
		t.Fatalf("child wrote no result: %v\n%s", err, childOut.String())
	}
	var child helperResult
	if err := json.Unmarshal(raw, &child); err != nil {
		t.Fatal(err)
	}
	if parent.Err != "" || child.Err != "" {
		t.Fatalf("errors: parent %q, child %q", parent.Err, child.Err)
	}

	seen := map[string]string{}
	for who, ids := range map[string][]string{"parent": parent.Received, "child": child.Received} {
		for _, id := range ids {
			if prev, dup := seen[id]; dup {
				t.Errorf("message %s received by %s and %s", id, prev, who)
			}
			seen[id] = who
		}
	}
	if len(seen) != messages {
		t.Errorf("%d messages received in all; want %d", len(seen), messages)
	}
	won := map[string]string{}
	for who, ids := range map[string][]string{"parent": parent.Won, "child": child.Won} {
		for _, id := range ids {
			if prev, dup := won[id]; dup {
				t.Errorf("instance %s won by %s and %s", id, prev, who)
			}
			won[id] = who
		}
	}
	list, err := b.Instances().List(ctx, "c", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range list {
		if in.State != pickup.StateClaimed || in.Owner != won[in.ID] {
			t.Errorf("instance %s is %s by %q; the winner reported was %q", in.ID, in.State, in.Owner, won[in.ID])
		}
	}
	t.Logf("parent received %d, child %d; parent won %d, child %d", len(parent.Received), len(child.Received), len(parent.Won), len(child.Won))
	if len(child.Received) == 0 && len(child.Won) == 0 {
		t.Logf("the child got nothing: the processes did not overlap this run")
	}
}

// TestConcurrentGoroutinesStress hammers one file from many goroutines with
// every kind of write at once, for -race.
func TestConcurrentGoroutinesStress(t *testing.T) {
	b := openAt(t, filepath.Join(t.TempDir(), "state.db"), "s", nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.CreateQueue(ctx, "q", backend.QueueAttributes{}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := b.Queue("q")
			for i := 0; i < 25; i++ {
				if err := q.Send(ctx, fmt.Sprintf("%d-%d", g, i), 0); err != nil {
					errs <- err
					return
				}
				msgs, err := q.Receive(ctx, 2, time.Hour, 0)
				if err != nil {
					errs <- err
					return
				}
				for _, m := range msgs {
					if err := q.Delete(ctx, m.ReceiptHandle); err != nil {
						errs <- fmt.Errorf("delete %s: %w", m.ID, err)
						return
					}
				}
				if _, _, err := b.ReadState(ctx); err != nil {
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
}

// TestBusyFileIsTransient holds the file's write lock from another
// connection (as another process would) past the backend's busy timeout:
// a transition then fails with a transient error, never ErrConditionFailed,
// and succeeds once the lock is released.
func TestBusyFileIsTransient(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	b, err := local.Open(context.Background(), path, local.Options{Stack: "s", BusyTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	if err := b.Instances().Put(ctx, pickup.Instance{ID: "i", Class: "c", State: pickup.StateIdle}); err != nil {
		t.Fatal(err)
	}
	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	claim := pickup.Transition{ID: "i", From: pickup.StateIdle, To: pickup.StateClaimed, Owner: "w"}
	_, err = b.Instances().Transition(ctx, claim)
	if err == nil || errors.Is(err, pickup.ErrConditionFailed) || !strings.Contains(err.Error(), "transient") {
		t.Errorf("Transition on a busy file: %v; want a transient error", err)
	}
	if err := b.Queue("q").Send(ctx, "x", 0); err == nil {
		t.Errorf("Send on a busy file succeeded")
	}
	if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Instances().Transition(ctx, claim); err != nil {
		t.Errorf("Transition after the lock was released: %v", err)
	}
}
