package pickup_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/aws"
	"github.com/rpdhq/rpd/backend/local"
	"github.com/rpdhq/rpd/internal/awstest"
	"github.com/rpdhq/rpd/runtime/pickup"
)

// envClock is the time an env runs on: a manual clock for backends whose
// clock can be injected, the wall clock for the AWS emulators.
type envClock interface {
	pickup.Clock
	Advance(d time.Duration)
}

type wall struct{}

func (wall) Now() time.Time                         { return time.Now() }
func (wall) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (wall) Advance(d time.Duration)                { time.Sleep(d) }

// env is one fresh class queue and the instance table on one backend.
type env struct {
	backend  string
	class    string
	q        pickup.Queue
	t        pickup.InstanceTable
	clock    envClock
	realTime bool
	// delay is the smallest requeue delay worth using on this backend
	// (whole seconds on SQS).
	delay time.Duration
	// visibility is the Visibility of the env's managers; drain waits it
	// out on real-time backends.
	visibility time.Duration
	depth      func(ctx context.Context) (int, error)
}

// backendKind opens a backend once per test and hands out fresh envs.
type backendKind struct {
	name string
	open func(t *testing.T) func(t *testing.T) *env
}

var classSeq atomic.Int64

func nextClass() string { return fmt.Sprintf("k%d", classSeq.Add(1)) }

// memKind is the in-memory fake, for unit tests.
var memKind = backendKind{name: "mem", open: func(*testing.T) func(*testing.T) *env {
	return func(t *testing.T) *env {
		c := newTestClock()
		return &env{backend: "mem", class: nextClass(), q: newMemQueue(c.Now), t: newMemTable(c.Now), clock: c, delay: 3 * time.Second, visibility: 30 * time.Second}
	}
}}

var localKind = backendKind{name: "local", open: func(t *testing.T) func(*testing.T) *env {
	return func(t *testing.T) *env {
		c := newTestClock()
		e, _ := openLocal(t, filepath.Join(t.TempDir(), "state.db"), c.Now)
		e.clock = c
		return e
	}
}}

// openLocal opens a SQLite backend at path with a class queue.
func openLocal(t testing.TB, path string, now func() time.Time) (*env, *local.Backend) {
	ctx := context.Background()
	b, err := local.Open(ctx, path, local.Options{Stack: "test", Clock: now})
	if err != nil {
		t.Fatalf("open local backend: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	class := "medium"
	if err := b.CreateQueue(ctx, "rp-"+class, backend.QueueAttributes{VisibilityTimeout: 30 * time.Second}); err != nil {
		t.Fatalf("create queue: %v", err)
	}
	depth := func(ctx context.Context) (int, error) {
		info, err := b.DescribeQueue(ctx, "rp-"+class)
		return info.Visible, err
	}
	return &env{backend: "local", class: class, q: b.Queue("rp-" + class), t: b.Instances(), delay: 3 * time.Second, visibility: 30 * time.Second, depth: depth}, b
}

// openAWS starts the emulators for t and opens the aws backend of stack
// on them, its tables (under tablePrefix) created.
func openAWS(t testing.TB, stack, tablePrefix string) (awstest.Endpoints, *aws.Backend) {
	t.Helper()
	eps := awstest.Start(t)
	ctx := context.Background()
	b, err := aws.Open(ctx, eps.Options(stack, tablePrefix))
	if err != nil {
		t.Fatalf("open aws backend: %v", err)
	}
	if err := b.EnsureTables(ctx); err != nil {
		t.Fatalf("ensure tables: %v", err)
	}
	return eps, b
}

var awsKind = backendKind{name: "aws", open: func(t *testing.T) func(*testing.T) *env {
	_, b := openAWS(t, "test", "pk")
	ctx := context.Background()
	return func(t *testing.T) *env {
		class := nextClass()
		name := "rp-" + class
		if err := b.CreateQueue(ctx, name, backend.QueueAttributes{VisibilityTimeout: 30 * time.Second}); err != nil {
			t.Fatalf("create queue: %v", err)
		}
		depth := func(ctx context.Context) (int, error) {
			info, err := b.DescribeQueue(ctx, name)
			return info.Visible, err
		}
		return &env{backend: "aws", class: class, q: b.Queue(name), t: b.Instances(), clock: wall{}, realTime: true, delay: time.Second, visibility: 30 * time.Second, depth: depth}
	}
}}

// behaviour is one behaviour test, run on every backend by TestBehaviours.
type behaviour struct {
	name string
	fn   func(t *testing.T, e *env)
}

// runBehaviours runs every case on each backend, the emulators started once
// per backend run; each case gets a fresh queue and class. The aws cases run
// in parallel since they wait on SQS's wall-clock delays.
func runBehaviours(t *testing.T, cases []behaviour) {
	for _, k := range []backendKind{memKind, localKind, awsKind} {
		t.Run(k.name, func(t *testing.T) {
			fresh := k.open(t)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					if k.name == "aws" {
						t.Parallel()
					}
					c.fn(t, fresh(t))
				})
			}
		})
	}
}

// config is the class configuration the behaviour tests use.
func (e *env) config() pickup.Config {
	return pickup.Config{
		Class: e.class, CPU: 2, Mem: 4 << 30,
		InstanceTypes:    []string{"c6i.*", "m6i.*", "m7i.large"},
		RequeueDelay:     e.delay,
		Visibility:       e.visibility,
		EmptyConfirmWait: pickup.ShortPollConfirm,
		Backoff:          10 * time.Millisecond,
	}
}

func (e *env) manager(t testing.TB, mod func(*pickup.Config)) *pickup.Manager {
	t.Helper()
	cfg := e.config()
	if mod != nil {
		mod(&cfg)
	}
	m, err := pickup.NewManager(cfg, e.q, e.t, pickup.Options{Clock: e.clock, Logger: discardLogger(), Depth: e.depth})
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	return m
}

// inst is an idle instance of the env's class.
func (e *env) inst(id, usage, itype string) pickup.Instance {
	return pickup.Instance{
		ID: e.class + "-" + id, Class: e.class, UsageClass: usage, InstanceType: itype,
		CPU: 2, MemMiB: 4096, ResourceClass: "medium", Threshold: e.clock.Now().Add(time.Hour),
	}
}

func (e *env) offer(t testing.TB, m *pickup.Manager, insts ...pickup.Instance) {
	t.Helper()
	for _, in := range insts {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := m.Offer(ctx, in)
		cancel()
		if err != nil {
			t.Fatalf("Offer %s: %v", in.ID, err)
		}
	}
}

// drain advances past every delay and visibility timeout, then receives and
// deletes every message, returning the instance IDs of the parseable ones
// and the count of the others.
func (e *env) drain(t testing.TB) (ids map[string]int, bad int) {
	t.Helper()
	if e.realTime {
		// Real SQS time: wait out the re-queue delay, and the visibility
		// timeout when the test shortened it (crash tests); other tests
		// leave nothing in flight.
		wait := e.delay
		if e.visibility < 30*time.Second {
			wait = max(wait, e.visibility)
		}
		time.Sleep(wait + 300*time.Millisecond)
	} else {
		e.clock.Advance(time.Hour)
	}
	ctx := context.Background()
	ids = map[string]int{}
	for range 1000 {
		msgs, err := e.q.Receive(ctx, 10, 5*time.Minute, 0)
		if err != nil {
			t.Fatalf("drain receive: %v", err)
		}
		if len(msgs) == 0 {
			return ids, bad
		}
		for _, msg := range msgs {
			if en, err := pickup.ParseEntry(msg.Body); err == nil {
				ids[en.InstanceID]++
			} else {
				bad++
			}
			if err := e.q.Delete(ctx, msg.ReceiptHandle); err != nil {
				t.Fatalf("drain delete: %v", err)
			}
		}
	}
	t.Fatal("drain: queue did not empty after 1000 receives")
	return nil, 0
}

func (e *env) get(t testing.TB, id string) pickup.Instance {
	t.Helper()
	in, err := e.t.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get %s: %v", id, err)
	}
	return in
}

func short(id string) string {
	if i := strings.IndexByte(id, '-'); i >= 0 {
		return id[i+1:]
	}
	return id
}
