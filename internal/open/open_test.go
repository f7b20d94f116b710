package open_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/internal/open"
	"github.com/rpdhq/rpd/runtime/pools"
)

// The zero Config is the local backend at its default path, relative to
// the working directory, created on open.
func TestOpenZeroConfigIsTheDefaultLocalBackend(t *testing.T) {
	t.Chdir(t.TempDir())
	b, err := open.Open(context.Background(), "s", backend.Config{}, open.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	want := backend.Config{Type: "local", Path: backend.DefaultLocalPath}
	if b.Config != want || !b.Exists || b.Where != "local backend "+backend.DefaultLocalPath {
		t.Errorf("opened %+v, exists %v, where %q; want %+v at %q", b.Config, b.Exists, b.Where, want, backend.DefaultLocalPath)
	}
	if _, err := os.Stat(backend.DefaultLocalPath); err != nil {
		t.Errorf("the database was not created: %v", err)
	}
	for name, missing := range map[string]bool{
		"Queues": b.Queues == nil, "State": b.State == nil, "Lock": b.Lock == nil, "Leader": b.Leader == nil,
		"Pools": b.Pools == nil, "Grants": b.Grants == nil, "Instances": b.Instances == nil,
		"FencedPools": b.FencedPools == nil, "FencedGrants": b.FencedGrants == nil, "Queue": b.Queue == nil,
	} {
		if missing {
			t.Errorf("%s is nil on a local backend", name)
		}
	}
	if b.Tables != nil {
		t.Error("a local backend has tables to create")
	}
	if err := b.Ping(context.Background()); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

// Held counts the unexpired pool leases, as stored.
func TestLiveHeldSumsUnexpiredLeases(t *testing.T) {
	ctx := context.Background()
	b, err := open.Open(ctx, "s", backend.Config{Path: filepath.Join(t.TempDir(), "state.db")}, open.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	now := time.Now()
	for _, r := range []pools.LeaseRecord{
		{LeaseID: "a", Pool: "p", TaskID: "t1", Slots: 2, GrantedAt: now, ExpiresAt: now.Add(time.Hour)},
		{LeaseID: "b", Pool: "p", TaskID: "t2", Slots: 3, GrantedAt: now},                                   // no TTL
		{LeaseID: "c", Pool: "p", TaskID: "t3", Slots: 5, GrantedAt: now, ExpiresAt: now.Add(-time.Minute)}, // expired
		{LeaseID: "d", Pool: "q", TaskID: "t4", Slots: 1, GrantedAt: now, ExpiresAt: now.Add(time.Hour)},
	} {
		if err := b.Pools.PutLease(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	live := b.Live()
	if live.Held == nil {
		t.Fatal("Live().Held is nil")
	}
	got, err := live.Held.HeldSlots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["p"] != 5 || got["q"] != 1 {
		t.Errorf("held = %v; want map[p:5 q:1]", got)
	}
}

// A read-only open of a local database that does not exist creates
// nothing, reads as empty and refuses writes.
func TestOpenReadOnlyMissingLocalCreatesNothing(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "state.db")
	b, err := open.Open(ctx, "s", backend.Config{Type: "local", Path: path}, open.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := os.Stat(filepath.Dir(path)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a read-only open created %s (stat: %v)", filepath.Dir(path), err)
	}
	if b.Exists || !strings.Contains(b.Where, "not created yet") {
		t.Errorf("exists %v, where %q; want a backend that says it does not exist", b.Exists, b.Where)
	}
	if b.Lock != nil || b.Leader != nil || b.Pools != nil || b.Live().Held != nil || b.Live().Lock != nil {
		t.Error("a backend that does not exist has a lock, leader, pool store or held slots")
	}
	if doc, v, err := b.State.ReadState(ctx); doc != nil || v != 0 || err != nil {
		t.Errorf("ReadState = %q, %d, %v; want nothing", doc, v, err)
	}
	if _, err := b.Queues.DescribeQueue(ctx, "q"); !errors.Is(err, backend.ErrQueueNotFound) {
		t.Errorf("DescribeQueue: %v; want ErrQueueNotFound", err)
	}
	if err := b.Queues.CreateQueue(ctx, "q", backend.QueueAttributes{}); err == nil || !strings.Contains(err.Error(), "rpd apply") {
		t.Errorf("CreateQueue: %v; want a refusal that says how to create the backend", err)
	}
	if _, err := b.State.WriteState(ctx, []byte("{}"), 0); err == nil {
		t.Error("WriteState on a read-only backend that does not exist succeeded")
	}

	// Once the file exists, a read-only open opens it.
	rw, err := open.Open(ctx, "s", backend.Config{Path: path}, open.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rw.Close()
	ro, err := open.Open(ctx, "s", backend.Config{Path: path}, open.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if !ro.Exists || ro.Lock == nil {
		t.Errorf("read-only open of an existing database: exists %v, lock %v", ro.Exists, ro.Lock)
	}
}

// The aws backend gets its default table prefix here, and makes no call
// to AWS on open.
func TestOpenAWSAppliesTheDefaultTablePrefix(t *testing.T) {
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_PROFILE", "")
	b, err := open.Open(context.Background(), "ci", backend.Config{Type: "aws", Region: "eu-west-1"}, open.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Config.TablePrefix != "rpd-ci" || b.Where != "aws backend (table prefix rpd-ci)" {
		t.Errorf("config %+v, where %q; want table prefix rpd-ci", b.Config, b.Where)
	}
	if b.Tables == nil || b.Leader == nil || b.Pools == nil || b.Grants == nil {
		t.Error("an aws backend lacks tables, leader, pool store or grant store")
	}
}

func TestOpenRefusesAnUnknownType(t *testing.T) {
	_, err := open.Open(context.Background(), "s", backend.Config{Type: "s3"}, open.Options{})
	if err == nil || !strings.Contains(err.Error(), `unknown backend type "s3"`) {
		t.Errorf("Open(type s3) = %v; want an error naming the type", err)
	}
}
