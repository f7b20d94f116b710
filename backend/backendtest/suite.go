package backendtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/runtime/pickup"
	"github.com/rpdhq/rpd/runtime/pools"
)

// Harness is one fresh backend, isolated from every other harness (its own
// stack, queues and tables), as the suite sees it.
type Harness struct {
	Admin     backend.QueueAdmin
	State     backend.StateStore
	Locker    backend.Locker
	Queue     func(name string) pickup.Queue
	Instances pickup.InstanceTable
	Pools     pools.Store
	Grants    GrantStore
	Leader    backend.LeaderStore
	// FencedPools and FencedGrants return the stores whose writes are
	// conditional on epoch being the stack's leader epoch.
	FencedPools  func(epoch int64) pools.Store
	FencedGrants func(epoch int64) GrantStore

	// Prefix is prepended to every queue name the suite creates, so that
	// harnesses sharing one SQS endpoint do not collide.
	Prefix string
	// Now is the backend's clock.
	Now func() time.Time
	// Advance lets d of the backend's time pass: a step of a fake clock,
	// or a real sleep for a backend on a real service.
	Advance func(d time.Duration)
	// Broken returns an instance table and a queue whose every call fails
	// for a transient reason (a closed database, an unreachable endpoint).
	Broken func(t *testing.T) (pickup.InstanceTable, pickup.Queue)
	// Deviations lists where the backend's service knowingly differs.
	Deviations Deviations
}

// GrantStore is the daemon's store of budget permits and VM-ceiling claims:
// opaque records by ID, kept apart from the pool leases.
type GrantStore interface {
	PutGrant(ctx context.Context, id string, body []byte) error
	DeleteGrant(ctx context.Context, id string) error
	LoadGrants(ctx context.Context) (map[string][]byte, error)
}

// Deviations are documented differences between a backend and the
// contract; each relaxes exactly one assertion (see docs/backends.md).
type Deviations struct {
	// StaleHandlesAccepted: Delete and ChangeVisibility with the receipt
	// handle of an earlier delivery, or of a deleted message, succeed
	// instead of failing with ErrStaleHandle (SQS standard queues).
	StaleHandlesAccepted bool
	// ChangeVisibilityCountsAsReceive: ChangeVisibility increments a
	// message's receive count (local-aws-sqs), so a message made visible
	// again and received has count 3, not 2.
	ChangeVisibilityCountsAsReceive bool
}

// countAfterChangeVisibility is the receive count of a message received,
// made visible again with ChangeVisibility, and received again.
func (d Deviations) countAfterChangeVisibility() int {
	if d.ChangeVisibilityCountsAsReceive {
		return 3
	}
	return 2
}

// Factory returns a fresh harness for t; it registers its own cleanup.
type Factory func(t *testing.T) *Harness

// Run runs the conformance suite. Subtests run in parallel, each on its
// own harness, so a backend that waits on real time pays for its longest
// wait once.
func Run(t *testing.T, f Factory) {
	tests := []struct {
		name string
		fn   func(*testing.T, *Harness)
	}{
		// First: on real time it waits out SQS's minimum retention (over a
		// minute) and holds one of the -parallel slots meanwhile; started
		// first, everything else runs in the other slots during the wait.
		{"Retention", testRetention},
		{"QueueAdmin", testQueueAdmin},
		{"ForeignQueue", testForeignQueue},
		{"BadInput", testBadInput},
		{"Delay", testDelay},
		{"QueueDefaultDelay", testQueueDefaultDelay},
		{"Visibility", testVisibility},
		{"ChangeVisibilityToZero", testChangeVisibilityToZero},
		{"StaleHandle", testStaleHandle},
		{"Batch", testBatch},
		{"LongPoll", testLongPoll},
		{"ConcurrentReceivers", testConcurrentReceivers},
		{"TransitionRace", testTransitionRace},
		{"TransitionConditions", testTransitionConditions},
		{"InstanceList", testInstanceList},
		{"ThresholdRange", testThresholdRange},
		{"ClaimDeadline", testClaimDeadline},
		{"ClaimedBy", testClaimedBy},
		{"TransientVsConditionFailed", testTransient},
		{"StateCAS", testStateCAS},
		{"StateCASRace", testStateCASRace},
		{"LockContention", testLockContention},
		{"LockExpiryAndRenew", testLockExpiry},
		{"ForceUnlock", testForceUnlock},
		{"PoolStore", testPoolStore},
		{"GrantStore", testGrantStore},
		{"LeaderLease", testLeaderLease},
		{"LeaderRace", testLeaderRace},
		{"Fencing", testFencing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, f(t))
		})
	}
}

// ctx returns a context bounded so that no subtest can hang.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// RandomName returns prefix followed by 8 random hex digits.
func RandomName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func stackTags(h *Harness) map[string]string {
	return map[string]string{backend.StackTag: h.Prefix}
}

// newQueue creates a queue with visibility 30s and the given delay.
func newQueue(t *testing.T, h *Harness, suffix string, attrs backend.QueueAttributes) pickup.Queue {
	t.Helper()
	name := h.Prefix + "-" + suffix
	if attrs.VisibilityTimeout == 0 {
		attrs.VisibilityTimeout = 30 * time.Second
	}
	if attrs.Tags == nil {
		attrs.Tags = stackTags(h)
	}
	if err := h.Admin.CreateQueue(ctx(t), name, attrs); err != nil {
		t.Fatalf("CreateQueue(%s): %v", name, err)
	}
	return h.Queue(name)
}

func send(t *testing.T, q pickup.Queue, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		if err := q.Send(ctx(t), b, 0); err != nil {
			t.Fatalf("Send(%q): %v", b, err)
		}
	}
}

// receiveN receives until it holds n messages or 10s have passed; SQS may
// return fewer than are visible on any one call.
func receiveN(t *testing.T, q pickup.Queue, n int, visibility time.Duration) []pickup.Message {
	t.Helper()
	var got []pickup.Message
	deadline := time.Now().Add(10 * time.Second)
	for attempt := 0; len(got) < n && attempt < 50 && time.Now().Before(deadline); attempt++ {
		msgs, err := q.Receive(ctx(t), min(10, n-len(got)), visibility, time.Second)
		if err != nil {
			t.Fatalf("Receive: %v", err)
		}
		got = append(got, msgs...)
	}
	if len(got) != n {
		t.Fatalf("received %d messages; want %d", len(got), n)
	}
	return got
}

func expectEmpty(t *testing.T, q pickup.Queue, why string) {
	t.Helper()
	msgs, err := q.Receive(ctx(t), 10, 0, 0)
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	if len(msgs) != 0 {
		t.Fatalf("%s: received %d messages (first %q); want none", why, len(msgs), msgs[0].Body)
	}
}

func testQueueAdmin(t *testing.T, h *Harness) {
	c := ctx(t)
	a, b, other := h.Prefix+"-a", h.Prefix+"-b", "x"+h.Prefix+"-c"
	attrs := backend.QueueAttributes{VisibilityTimeout: 45 * time.Second, Retention: time.Hour, Delay: 2 * time.Second, Tags: stackTags(h)}
	for _, n := range []string{b, a, other} {
		if err := h.Admin.CreateQueue(c, n, attrs); err != nil {
			t.Fatalf("CreateQueue(%s): %v", n, err)
		}
	}
	t.Cleanup(func() { _ = h.Admin.DeleteQueue(context.Background(), other) })
	if err := h.Admin.CreateQueue(c, a, attrs); err != nil {
		t.Errorf("CreateQueue of an existing queue with the same attributes: %v; want success", err)
	}
	changed := attrs
	changed.VisibilityTimeout = 50 * time.Second
	if err := h.Admin.CreateQueue(c, a, changed); err == nil {
		t.Errorf("CreateQueue of an existing queue with other attributes succeeded; want an error")
	}

	info, err := h.Admin.DescribeQueue(c, a)
	if err != nil {
		t.Fatalf("DescribeQueue: %v", err)
	}
	if info.Name != a || info.URL == "" {
		t.Errorf("DescribeQueue name %q url %q; want %q and a URL", info.Name, info.URL, a)
	}
	if got := info.Attributes; got.VisibilityTimeout != 45*time.Second || got.Retention != time.Hour || got.Delay != 2*time.Second || !reflect.DeepEqual(got.Tags, stackTags(h)) {
		t.Errorf("DescribeQueue attributes %+v; want visibility 45s, retention 1h, delay 2s, tags %v", got, stackTags(h))
	}

	upd := backend.QueueAttributes{VisibilityTimeout: 60 * time.Second, Retention: 2 * time.Hour, Tags: map[string]string{"team": "ci"}}
	if err := h.Admin.UpdateQueue(c, a, upd); err != nil {
		t.Fatalf("UpdateQueue: %v", err)
	}
	info, err = h.Admin.DescribeQueue(c, a)
	if err != nil {
		t.Fatalf("DescribeQueue: %v", err)
	}
	wantTags := map[string]string{backend.StackTag: h.Prefix, "team": "ci"}
	if got := info.Attributes; got.VisibilityTimeout != 60*time.Second || got.Retention != 2*time.Hour || got.Delay != 0 || !reflect.DeepEqual(got.Tags, wantTags) {
		t.Errorf("after UpdateQueue: %+v; want visibility 60s, retention 2h, delay 0, tags %v (merged)", got, wantTags)
	}

	names, err := h.Admin.ListQueues(c, h.Prefix+"-")
	if err != nil {
		t.Fatalf("ListQueues: %v", err)
	}
	if want := []string{a, b}; !reflect.DeepEqual(names, want) {
		t.Errorf("ListQueues(%q) = %v; want %v", h.Prefix+"-", names, want)
	}

	if err := h.Admin.DeleteQueue(c, b); err != nil {
		t.Fatalf("DeleteQueue: %v", err)
	}
	if _, err := h.Admin.DescribeQueue(c, b); !errors.Is(err, backend.ErrQueueNotFound) {
		t.Errorf("DescribeQueue of a deleted queue: %v; want ErrQueueNotFound", err)
	}
	if err := h.Admin.UpdateQueue(c, b, attrs); !errors.Is(err, backend.ErrQueueNotFound) {
		t.Errorf("UpdateQueue of a deleted queue: %v; want ErrQueueNotFound", err)
	}
	if err := h.Queue(b).Send(c, "x", 0); !errors.Is(err, backend.ErrQueueNotFound) {
		t.Errorf("Send to a deleted queue: %v; want ErrQueueNotFound", err)
	}
	if _, err := h.Queue(b).Receive(c, 1, 0, 0); !errors.Is(err, backend.ErrQueueNotFound) {
		t.Errorf("Receive from a deleted queue: %v; want ErrQueueNotFound", err)
	}
	names, err = h.Admin.ListQueues(c, h.Prefix+"-")
	if err != nil || !reflect.DeepEqual(names, []string{a}) {
		t.Errorf("ListQueues after delete = %v, %v; want [%s]", names, err, a)
	}
}

// testForeignQueue: a queue created without the stack's tag is described
// with the tags it has, so reconcile can report it as not managed by rpd.
func testForeignQueue(t *testing.T, h *Harness) {
	c := ctx(t)
	name := h.Prefix + "-foreign"
	if err := h.Admin.CreateQueue(c, name, backend.QueueAttributes{VisibilityTimeout: 30 * time.Second, Tags: map[string]string{"owner": "someone-else"}}); err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	info, err := h.Admin.DescribeQueue(c, name)
	if err != nil {
		t.Fatalf("DescribeQueue: %v", err)
	}
	if _, ok := info.Attributes.Tags[backend.StackTag]; ok || info.Attributes.Tags["owner"] != "someone-else" {
		t.Errorf("foreign queue tags %v; want exactly its own tags, no %s", info.Attributes.Tags, backend.StackTag)
	}
}

func testBadInput(t *testing.T, h *Harness) {
	c := ctx(t)
	for _, name := range []string{"", "has space", "dot.name", string(make([]byte, 81))} {
		if err := h.Admin.CreateQueue(c, name, backend.QueueAttributes{}); err == nil {
			t.Errorf("CreateQueue(%q) succeeded; want an error", name)
		}
	}
	for _, attrs := range []backend.QueueAttributes{
		{Retention: 10 * time.Second},
		{Retention: 15 * 24 * time.Hour},
		{VisibilityTimeout: 13 * time.Hour},
		{VisibilityTimeout: 1500 * time.Millisecond},
		{Delay: 16 * time.Minute},
		{Delay: -time.Second},
	} {
		if err := h.Admin.CreateQueue(c, h.Prefix+"-bad", attrs); err == nil {
			t.Errorf("CreateQueue with %+v succeeded; want an error", attrs)
		}
	}
	q := newQueue(t, h, "input", backend.QueueAttributes{})
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"Send empty", q.Send(c, "", 0)},
		{"Send delay 16m", q.Send(c, "x", 16*time.Minute)},
		{"Send too big", q.Send(c, string(make([]byte, backend.MaxMessageBytes+1)), 0)},
		{"ChangeVisibility 13h", q.ChangeVisibility(c, "h", 13*time.Hour)},
		{"DeleteBatch empty", q.DeleteBatch(c, nil)},
		{"DeleteBatch 11", q.DeleteBatch(c, []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11"})},
		{"DeleteBatch duplicate", q.DeleteBatch(c, []string{"a", "a"})},
		{"ChangeVisibilityBatch empty", q.ChangeVisibilityBatch(c, nil, 0)},
	} {
		var be *pickup.BatchError
		if tc.err == nil || errors.As(tc.err, &be) {
			t.Errorf("%s: %v; want a plain error", tc.name, tc.err)
		}
	}
	for _, tc := range []struct {
		max       int
		vis, wait time.Duration
	}{{0, 0, 0}, {11, 0, 0}, {1, -time.Second, 0}, {1, 0, 21 * time.Second}} {
		if _, err := q.Receive(c, tc.max, tc.vis, tc.wait); err == nil {
			t.Errorf("Receive(max %d, visibility %v, wait %v) succeeded; want an error", tc.max, tc.vis, tc.wait)
		}
	}
	if err := h.Instances.Put(c, pickup.Instance{Class: "c", State: pickup.StateIdle}); err == nil {
		t.Errorf("Put of an instance without ID succeeded")
	}
	if _, err := h.Instances.Transition(c, pickup.Transition{ID: "i", To: pickup.StateClaimed}); err == nil || errors.Is(err, pickup.ErrConditionFailed) {
		t.Errorf("Transition without From: %v; want a usage error", err)
	}
	if _, err := h.State.WriteState(c, []byte("{not json"), 0); err == nil {
		t.Errorf("WriteState of invalid JSON succeeded")
	}
	if _, err := h.Locker.Lock(c, backend.LockInfo{Who: "x"}, 0); err == nil {
		t.Errorf("Lock with ttl 0 succeeded")
	}
	if err := h.Pools.PutLease(c, pools.LeaseRecord{Pool: "p"}); err == nil {
		t.Errorf("PutLease without LeaseID succeeded")
	}
}

func testDelay(t *testing.T, h *Harness) {
	c := ctx(t)
	q := newQueue(t, h, "delay", backend.QueueAttributes{})
	if err := q.Send(c, "later", 2*time.Second); err != nil {
		t.Fatalf("Send: %v", err)
	}
	expectEmpty(t, q, "right after a send with delay 2s")
	h.Advance(2200 * time.Millisecond)
	msgs := receiveN(t, q, 1, 0)
	if msgs[0].Body != "later" || msgs[0].ReceiveCount != 1 {
		t.Errorf("got %+v; want body later, receive count 1", msgs[0])
	}
}

func testQueueDefaultDelay(t *testing.T, h *Harness) {
	q := newQueue(t, h, "qdelay", backend.QueueAttributes{Delay: 2 * time.Second})
	send(t, q, "x")
	expectEmpty(t, q, "right after a send to a queue with delay 2s")
	h.Advance(2200 * time.Millisecond)
	receiveN(t, q, 1, 0)
}

func testVisibility(t *testing.T, h *Harness) {
	q := newQueue(t, h, "vis", backend.QueueAttributes{})
	send(t, q, "m")
	first := receiveN(t, q, 1, 2*time.Second)[0]
	expectEmpty(t, q, "while the message is invisible")
	h.Advance(2500 * time.Millisecond)
	second := receiveN(t, q, 1, 2*time.Second)[0]
	if second.ID != first.ID || second.ReceiveCount != 2 {
		t.Errorf("redelivery %+v; want message %s with receive count 2", second, first.ID)
	}
	if second.ReceiptHandle == first.ReceiptHandle {
		t.Errorf("redelivery reused receipt handle %q; want a new one", first.ReceiptHandle)
	}
	if err := q.Delete(ctx(t), second.ReceiptHandle); err != nil {
		t.Fatalf("Delete with the current handle: %v", err)
	}
	h.Advance(2500 * time.Millisecond)
	expectEmpty(t, q, "after delete")
}

func testChangeVisibilityToZero(t *testing.T, h *Harness) {
	q := newQueue(t, h, "cv0", backend.QueueAttributes{})
	send(t, q, "m")
	first := receiveN(t, q, 1, 30*time.Second)[0]
	expectEmpty(t, q, "while invisible for 30s")
	if err := q.ChangeVisibility(ctx(t), first.ReceiptHandle, 0); err != nil {
		t.Fatalf("ChangeVisibility(0): %v", err)
	}
	again := receiveN(t, q, 1, 30*time.Second)[0]
	if want := h.Deviations.countAfterChangeVisibility(); again.ID != first.ID || again.ReceiveCount != want {
		t.Errorf("after ChangeVisibility(0) got %+v; want message %s, receive count %d", again, first.ID, want)
	}
}

func testStaleHandle(t *testing.T, h *Harness) {
	c := ctx(t)
	q := newQueue(t, h, "stale", backend.QueueAttributes{})
	send(t, q, "m")
	first := receiveN(t, q, 1, 30*time.Second)[0]
	if err := q.ChangeVisibility(c, first.ReceiptHandle, 0); err != nil {
		t.Fatalf("ChangeVisibility: %v", err)
	}
	second := receiveN(t, q, 1, 30*time.Second)[0]
	if h.Deviations.StaleHandlesAccepted {
		t.Log("deviation StaleHandlesAccepted: not asserting ErrStaleHandle for the first delivery's handle")
	} else {
		if err := q.Delete(c, first.ReceiptHandle); !errors.Is(err, pickup.ErrStaleHandle) {
			t.Errorf("Delete with the first delivery's handle: %v; want ErrStaleHandle", err)
		}
		if err := q.ChangeVisibility(c, first.ReceiptHandle, 0); !errors.Is(err, pickup.ErrStaleHandle) {
			t.Errorf("ChangeVisibility with the first delivery's handle: %v; want ErrStaleHandle", err)
		}
		expectEmpty(t, q, "after stale-handle calls (the second delivery is still in flight)")
	}
	if err := q.Delete(c, second.ReceiptHandle); err != nil {
		t.Fatalf("Delete with the current handle: %v", err)
	}
	if err := q.ChangeVisibility(c, second.ReceiptHandle, 0); !errors.Is(err, pickup.ErrStaleHandle) {
		t.Errorf("ChangeVisibility of a deleted message: %v; want ErrStaleHandle", err)
	}
	if !h.Deviations.StaleHandlesAccepted {
		if err := q.Delete(c, second.ReceiptHandle); !errors.Is(err, pickup.ErrStaleHandle) {
			t.Errorf("second Delete of the same handle: %v; want ErrStaleHandle", err)
		}
	}
	if err := q.Delete(c, "not-a-handle"); !errors.Is(err, pickup.ErrStaleHandle) {
		t.Errorf("Delete with a malformed handle: %v; want ErrStaleHandle", err)
	}
}

func testBatch(t *testing.T, h *Harness) {
	c := ctx(t)
	q := newQueue(t, h, "batch", backend.QueueAttributes{})
	send(t, q, "1", "2", "3", "4", "5")
	msgs := receiveN(t, q, 5, 30*time.Second)
	handles := make([]string, len(msgs))
	for i, m := range msgs {
		handles[i] = m.ReceiptHandle
	}
	if err := q.ChangeVisibilityBatch(c, handles, 0); err != nil {
		t.Fatalf("ChangeVisibilityBatch: %v", err)
	}
	msgs = receiveN(t, q, 5, 30*time.Second)
	var bodies []string
	handles = handles[:0]
	for _, m := range msgs {
		bodies = append(bodies, m.Body)
		handles = append(handles, m.ReceiptHandle)
		if want := h.Deviations.countAfterChangeVisibility(); m.ReceiveCount != want {
			t.Errorf("message %s receive count %d; want %d", m.Body, m.ReceiveCount, want)
		}
	}
	sort.Strings(bodies)
	if want := []string{"1", "2", "3", "4", "5"}; !reflect.DeepEqual(bodies, want) {
		t.Errorf("bodies %v; want %v", bodies, want)
	}
	const bogus = "bogus-handle"
	err := q.DeleteBatch(c, append(handles, bogus))
	var be *pickup.BatchError
	if !errors.As(err, &be) {
		t.Fatalf("DeleteBatch with one bad handle: %v; want a *BatchError", err)
	}
	if len(be.Failed) != 1 || !errors.Is(be.Failed[bogus], pickup.ErrStaleHandle) {
		t.Errorf("BatchError.Failed = %v; want only %q, wrapping ErrStaleHandle", be.Failed, bogus)
	}
	if err := q.ChangeVisibilityBatch(c, []string{bogus}, 0); !errors.As(err, &be) || !errors.Is(be.Failed[bogus], pickup.ErrStaleHandle) {
		t.Errorf("ChangeVisibilityBatch with a bad handle: %v; want a *BatchError naming it", err)
	}
	h.Advance(1500 * time.Millisecond)
	expectEmpty(t, q, "after DeleteBatch")
}

func testRetention(t *testing.T, h *Harness) {
	c := ctx(t)
	q := newQueue(t, h, "ret", backend.QueueAttributes{Retention: time.Minute})
	send(t, q, "old")
	// Receive it first, to know it is there (approximate counts may lag),
	// with a visibility that ends well before the retention period does:
	// retention applies to in-flight messages too.
	receiveN(t, q, 1, 2*time.Second)
	h.Advance(time.Minute + 2*time.Second)
	expectEmpty(t, q, "after the retention period")
	info, err := h.Admin.DescribeQueue(c, h.Prefix+"-ret")
	if err != nil {
		t.Fatal(err)
	}
	if info.Visible+info.InFlight+info.Delayed != 0 {
		t.Errorf("DescribeQueue after retention: visible %d in flight %d delayed %d; want 0", info.Visible, info.InFlight, info.Delayed)
	}
}

func testLongPoll(t *testing.T, h *Harness) {
	q := newQueue(t, h, "poll", backend.QueueAttributes{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(300 * time.Millisecond)
		if err := q.Send(context.Background(), "late", 0); err != nil {
			t.Errorf("Send: %v", err)
		}
	}()
	start := time.Now()
	msgs, err := q.Receive(ctx(t), 1, 0, 5*time.Second)
	<-done
	if err != nil || len(msgs) != 1 {
		t.Fatalf("long poll: %d messages, %v; want the message sent during the wait", len(msgs), err)
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("long poll returned after %v; want soon after the send at 300ms", took)
	}

	// A cancelled context ends the wait early with an error.
	cctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start = time.Now()
	msgs, err = q.Receive(cctx, 1, 0, 5*time.Second)
	if err == nil || len(msgs) != 0 {
		t.Errorf("Receive with a context cancelled during the wait: %d messages, %v; want an error", len(msgs), err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("cancelled Receive returned after %v; want about 300ms", took)
	}
}

func testConcurrentReceivers(t *testing.T, h *Harness) {
	const total, receivers = 40, 6
	q := newQueue(t, h, "conc", backend.QueueAttributes{})
	for i := 0; i < total; i++ {
		send(t, q, fmt.Sprint(i))
	}
	var mu sync.Mutex
	seen := map[string]int{}
	count := 0
	deadline := time.Now().Add(20 * time.Second)
	var wg sync.WaitGroup
	for r := 0; r < receivers; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for attempt := 0; attempt < 200 && time.Now().Before(deadline); attempt++ {
				mu.Lock()
				finished := count >= total
				mu.Unlock()
				if finished {
					return
				}
				msgs, err := q.Receive(context.Background(), 5, 60*time.Second, 0)
				if err != nil {
					t.Errorf("Receive: %v", err)
					return
				}
				mu.Lock()
				for _, m := range msgs {
					seen[m.ID]++
					count++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for id, n := range seen {
		if n != 1 {
			t.Errorf("message %s delivered %d times while invisible; want once", id, n)
		}
	}
	if len(seen) != total {
		t.Errorf("%d distinct messages received; want %d", len(seen), total)
	}
}

func putIdle(t *testing.T, h *Harness, id, class string, threshold time.Time) {
	t.Helper()
	if err := h.Instances.Put(ctx(t), pickup.Instance{ID: id, Class: class, State: pickup.StateIdle, UsageClass: "spot", InstanceType: "m7g.large", CPU: 2, MemMiB: 8192, ResourceClass: "medium", Threshold: threshold}); err != nil {
		t.Fatalf("Put(%s): %v", id, err)
	}
}

func testTransitionRace(t *testing.T, h *Harness) {
	const rounds, racers = 4, 12
	for round := 0; round < rounds; round++ {
		id := fmt.Sprintf("%s-i-%d", h.Prefix, round)
		putIdle(t, h, id, "race", h.Now().Add(time.Hour))
		var wg sync.WaitGroup
		errs := make([]error, racers)
		for r := 0; r < racers; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[r] = h.Instances.Transition(context.Background(), pickup.Transition{
					ID: id, From: pickup.StateIdle, To: pickup.StateClaimed, Owner: fmt.Sprintf("task-%d", r), Now: h.Now(),
				})
			}()
		}
		wg.Wait()
		winner := -1
		for r, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Errorf("round %d: racers %d and %d both won", round, winner, r)
			case err == nil:
				winner = r
			case !errors.Is(err, pickup.ErrConditionFailed):
				t.Errorf("round %d: racer %d lost with %v; want ErrConditionFailed", round, r, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody won", round)
		}
		got, err := h.Instances.Get(ctx(t), id)
		if err != nil || got.State != pickup.StateClaimed || got.Owner != fmt.Sprintf("task-%d", winner) {
			t.Errorf("round %d: record %+v, %v; want claimed by task-%d", round, got, err, winner)
		}
	}
}

func testTransitionConditions(t *testing.T, h *Harness) {
	c := ctx(t)
	now := h.Now()
	id := h.Prefix + "-cond"
	putIdle(t, h, id, "cond", now.Add(time.Hour))
	claim := pickup.Transition{ID: id, From: pickup.StateIdle, To: pickup.StateClaimed, Owner: "task-1", Now: now}
	got, err := h.Instances.Transition(c, claim)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if got.State != pickup.StateClaimed || got.Owner != "task-1" || !got.UpdatedAt.Equal(now) || got.CPU != 2 || got.InstanceType != "m7g.large" {
		t.Errorf("claimed record %+v; want claimed by task-1, UpdatedAt %v, other fields kept", got, now)
	}
	for _, tc := range []struct {
		name string
		tr   pickup.Transition
	}{
		{"wrong from", pickup.Transition{ID: id, From: pickup.StateIdle, To: pickup.StateClaimed, Owner: "task-2"}},
		{"wrong owner", pickup.Transition{ID: id, From: pickup.StateClaimed, To: pickup.StateIdle, ExpectOwner: "task-2"}},
		{"no owner expected", pickup.Transition{ID: id, From: pickup.StateClaimed, To: pickup.StateIdle}},
		{"missing record", pickup.Transition{ID: id + "-missing", From: pickup.StateIdle, To: pickup.StateClaimed}},
	} {
		if _, err := h.Instances.Transition(c, tc.tr); !errors.Is(err, pickup.ErrConditionFailed) {
			t.Errorf("%s: %v; want ErrConditionFailed", tc.name, err)
		}
	}
	got, err = h.Instances.Transition(c, pickup.Transition{ID: id, From: pickup.StateClaimed, To: pickup.StateIdle, ExpectOwner: "task-1"})
	if err != nil || got.State != pickup.StateIdle || got.Owner != "" {
		t.Errorf("release by the owner: %+v, %v; want idle with no owner", got, err)
	}

	// The threshold: an idle entry past it cannot be claimed with Now set,
	// but can without (Now zero skips the check).
	stale := h.Prefix + "-stale"
	putIdle(t, h, stale, "cond", now.Add(-time.Second))
	if _, err := h.Instances.Transition(c, pickup.Transition{ID: stale, From: pickup.StateIdle, To: pickup.StateClaimed, Owner: "t", Now: now}); !errors.Is(err, pickup.ErrConditionFailed) {
		t.Errorf("claim past the threshold: %v; want ErrConditionFailed", err)
	}
	if _, err := h.Instances.Transition(c, pickup.Transition{ID: stale, From: pickup.StateIdle, To: pickup.StateRetired}); err != nil {
		t.Errorf("retire without Now: %v", err)
	}
	if _, err := h.Instances.Get(c, h.Prefix+"-nope"); !errors.Is(err, pickup.ErrNotFound) {
		t.Errorf("Get of a missing record: %v; want ErrNotFound", err)
	}
}

// testThresholdRange: a threshold the backend cannot store exactly is
// refused by Put (it used to wrap: year 2300 became a time in 1715, the
// claim then failed as a lost race and the runner was lost), and one at
// the edge of the range round-trips and can be claimed.
func testThresholdRange(t *testing.T, h *Harness) {
	c := ctx(t)
	now := h.Now()
	far := h.Prefix + "-far"
	for _, th := range []time.Time{
		time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC),
		backend.MaxStoredTime.Add(time.Nanosecond),
		backend.MinStoredTime.Add(-time.Nanosecond),
	} {
		err := h.Instances.Put(c, pickup.Instance{ID: far, Class: "range", State: pickup.StateIdle, UsageClass: "spot", InstanceType: "m7g.large", CPU: 2, MemMiB: 8192, ResourceClass: "medium", Threshold: th})
		if err == nil {
			t.Errorf("Put with threshold %v: accepted a time the backend cannot store", th)
		}
	}
	if _, err := h.Instances.Get(c, far); !errors.Is(err, pickup.ErrNotFound) {
		t.Errorf("Get after refused Puts: %v; want ErrNotFound", err)
	}
	edge := h.Prefix + "-edge"
	th := time.Date(2262, 1, 1, 0, 0, 0, 123, time.UTC)
	putIdle(t, h, edge, "range", th)
	got, err := h.Instances.Get(c, edge)
	if err != nil || !got.Threshold.Equal(th) {
		t.Fatalf("Get of a threshold in 2262: %v, %v; want %v", got.Threshold, err, th)
	}
	if _, err := h.Instances.Transition(c, pickup.Transition{ID: edge, From: pickup.StateIdle, To: pickup.StateClaimed, Owner: "t", Now: now}); err != nil {
		t.Errorf("claim of an entry with a threshold in 2262: %v", err)
	}
}

func testInstanceList(t *testing.T, h *Harness) {
	c := ctx(t)
	class := h.Prefix + "-list"
	th := h.Now().Add(time.Hour).Truncate(time.Microsecond).UTC()
	for _, id := range []string{"c", "a", "b"} {
		putIdle(t, h, h.Prefix+"-"+id, class, th)
	}
	putIdle(t, h, h.Prefix+"-other", class+"x", th)
	if _, err := h.Instances.Transition(c, pickup.Transition{ID: h.Prefix + "-b", From: pickup.StateIdle, To: pickup.StateClaimed, Owner: "t"}); err != nil {
		t.Fatal(err)
	}
	ids := func(state pickup.State) []string {
		list, err := h.Instances.List(c, class, state)
		if err != nil {
			t.Fatalf("List(%s, %q): %v", class, state, err)
		}
		var out []string
		for _, in := range list {
			out = append(out, in.ID)
			if in.Class != class || !in.Threshold.Equal(th) || in.MemMiB != 8192 || in.ResourceClass != "medium" || in.UsageClass != "spot" {
				t.Errorf("listed %+v; want the fields put (class %s, threshold %v)", in, class, th)
			}
		}
		return out
	}
	p := h.Prefix + "-"
	if got, want := ids(""), []string{p + "a", p + "b", p + "c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("List any state = %v; want %v", got, want)
	}
	if got, want := ids(pickup.StateIdle), []string{p + "a", p + "c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("List idle = %v; want %v", got, want)
	}
	if got := ids(pickup.StateRetired); len(got) != 0 {
		t.Errorf("List retired = %v; want none", got)
	}
}

// testClaimDeadline: a claim's deadline is stored, survives reads, is
// cleared by a transition without one, and LapsedBy claims only a record
// whose deadline is set and passed.
func testClaimDeadline(t *testing.T, h *Harness) {
	c := ctx(t)
	now := h.Now().Truncate(time.Microsecond)
	id := h.Prefix + "-deadline"
	putIdle(t, h, id, "deadline", now.Add(time.Hour))
	deadline := now.Add(2 * time.Minute)
	got, err := h.Instances.Transition(c, pickup.Transition{ID: id, From: pickup.StateIdle, To: pickup.StateClaimed, Owner: "w", Now: now, ClaimExpires: deadline})
	if err != nil || !got.ClaimExpires.Equal(deadline) {
		t.Fatalf("claim with a deadline: %+v, %v; want ClaimExpires %v", got, err, deadline)
	}
	if rec, err := h.Instances.Get(c, id); err != nil || !rec.ClaimExpires.Equal(deadline) {
		t.Fatalf("Get: %+v, %v; want ClaimExpires %v", rec, err, deadline)
	}
	lapse := pickup.Transition{ID: id, From: pickup.StateClaimed, To: pickup.StateIdle, ExpectOwner: "w", LapsedBy: deadline.Add(-time.Second)}
	if _, err := h.Instances.Transition(c, lapse); !errors.Is(err, pickup.ErrConditionFailed) {
		t.Fatalf("lapse before the deadline: %v; want ErrConditionFailed", err)
	}
	// A confirm: same state and owner, the deadline cleared.
	got, err = h.Instances.Transition(c, pickup.Transition{ID: id, From: pickup.StateClaimed, To: pickup.StateClaimed, ExpectOwner: "w", Owner: "w"})
	if err != nil || !got.ClaimExpires.IsZero() || got.Owner != "w" {
		t.Fatalf("confirm: %+v, %v; want claimed by w, no deadline", got, err)
	}
	lapse.LapsedBy = deadline.Add(time.Hour)
	if _, err := h.Instances.Transition(c, lapse); !errors.Is(err, pickup.ErrConditionFailed) {
		t.Fatalf("lapse of a confirmed claim: %v; want ErrConditionFailed", err)
	}
	// Unconfirmed and past: the lapse succeeds and clears owner and deadline.
	id2 := h.Prefix + "-deadline2"
	putIdle(t, h, id2, "deadline", now.Add(time.Hour))
	if _, err := h.Instances.Transition(c, pickup.Transition{ID: id2, From: pickup.StateIdle, To: pickup.StateClaimed, Owner: "v", Now: now, ClaimExpires: deadline}); err != nil {
		t.Fatal(err)
	}
	lapse.ID, lapse.ExpectOwner, lapse.LapsedBy = id2, "v", deadline
	got, err = h.Instances.Transition(c, lapse)
	if err != nil || got.State != pickup.StateIdle || got.Owner != "" || !got.ClaimExpires.IsZero() {
		t.Fatalf("lapse at the deadline: %+v, %v; want idle, no owner, no deadline", got, err)
	}
	// Put stores a deadline too (a record restored as it was).
	id3 := h.Prefix + "-deadline3"
	if err := h.Instances.Put(c, pickup.Instance{ID: id3, Class: "deadline", State: pickup.StateClaimed, Owner: "u", Threshold: now.Add(time.Hour), ClaimExpires: deadline}); err != nil {
		t.Fatal(err)
	}
	if rec, err := h.Instances.Get(c, id3); err != nil || !rec.ClaimExpires.Equal(deadline) {
		t.Fatalf("Get after Put: %+v, %v; want ClaimExpires %v", rec, err, deadline)
	}
}

// testClaimedBy: the claims of one owner in one class, and nothing else.
func testClaimedBy(t *testing.T, h *Harness) {
	c := ctx(t)
	class := h.Prefix + "-owned"
	th := h.Now().Add(time.Hour)
	for _, id := range []string{"b", "a", "c", "d"} {
		putIdle(t, h, h.Prefix+"-o"+id, class, th)
	}
	putIdle(t, h, h.Prefix+"-ox", class+"x", th)
	claim := func(id, class, owner string) {
		t.Helper()
		if _, err := h.Instances.Transition(c, pickup.Transition{ID: h.Prefix + "-o" + id, From: pickup.StateIdle, To: pickup.StateClaimed, Owner: owner}); err != nil {
			t.Fatalf("claim %s: %v", id, err)
		}
	}
	claim("b", class, "job-1")
	claim("a", class, "job-1")
	claim("c", class, "job-2")
	claim("x", class+"x", "job-1")
	// d: claimed by job-1, then released: no longer its claim.
	claim("d", class, "job-1")
	if _, err := h.Instances.Transition(c, pickup.Transition{ID: h.Prefix + "-od", From: pickup.StateClaimed, To: pickup.StateIdle, ExpectOwner: "job-1"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	// An index may lag the table a moment (DynamoDB's is eventually
	// consistent); the emulator's does not, so one short retry suffices.
	for range 20 {
		list, err := h.Instances.ClaimedBy(c, class, "job-1")
		if err != nil {
			t.Fatalf("ClaimedBy: %v", err)
		}
		got = got[:0]
		for _, in := range list {
			got = append(got, in.ID)
			if in.Owner != "job-1" || in.State != pickup.StateClaimed || in.Class != class {
				t.Errorf("ClaimedBy listed %+v; want job-1's claims in %s", in, class)
			}
		}
		if len(got) == 2 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if want := []string{h.Prefix + "-oa", h.Prefix + "-ob"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ClaimedBy(job-1) = %v; want %v", got, want)
	}
	if list, err := h.Instances.ClaimedBy(c, class, "nobody"); err != nil || len(list) != 0 {
		t.Errorf("ClaimedBy(nobody) = %v, %v; want none", list, err)
	}
	if _, err := h.Instances.ClaimedBy(c, class, ""); err == nil {
		t.Error("ClaimedBy with an empty owner succeeded; want an error")
	}
}

func testTransient(t *testing.T, h *Harness) {
	table, q := h.Broken(t)
	c := ctx(t)
	_, err := table.Transition(c, pickup.Transition{ID: "i-1", From: pickup.StateIdle, To: pickup.StateClaimed, Owner: "t"})
	if err == nil || errors.Is(err, pickup.ErrConditionFailed) {
		t.Errorf("Transition on a broken backend: %v; want a transient error, not ErrConditionFailed", err)
	}
	if _, err := table.Get(c, "i-1"); err == nil || errors.Is(err, pickup.ErrNotFound) {
		t.Errorf("Get on a broken backend: %v; want a transient error, not ErrNotFound", err)
	}
	if _, err := table.ClaimedBy(c, "c", "t"); err == nil {
		t.Errorf("ClaimedBy on a broken backend succeeded")
	}
	if err := q.Delete(c, "1.abc"); err == nil || errors.Is(err, pickup.ErrStaleHandle) {
		t.Errorf("Delete on a broken backend: %v; want a transient error, not ErrStaleHandle", err)
	}
	if _, err := q.Receive(c, 1, 0, 0); err == nil {
		t.Errorf("Receive on a broken backend succeeded")
	}
}

func testStateCAS(t *testing.T, h *Harness) {
	c := ctx(t)
	doc, v, err := h.State.ReadState(c)
	if doc != nil || v != 0 || err != nil {
		t.Fatalf("ReadState of a new stack = %q, %d, %v; want nil, 0, nil", doc, v, err)
	}
	if v, err = h.State.WriteState(c, []byte(`{"n":1}`), 0); err != nil || v != 1 {
		t.Fatalf("first WriteState = %d, %v; want 1", v, err)
	}
	if _, err = h.State.WriteState(c, []byte(`{"n":"lost"}`), 0); !errors.Is(err, backend.ErrVersionConflict) {
		t.Errorf("WriteState at version 0 after version 1: %v; want ErrVersionConflict", err)
	}
	if v, err = h.State.WriteState(c, []byte(`{"n":2}`), 1); err != nil || v != 2 {
		t.Fatalf("WriteState at version 1 = %d, %v; want 2", v, err)
	}
	for _, stale := range []int64{1, 3} {
		if _, err = h.State.WriteState(c, []byte(`{"n":"lost"}`), stale); !errors.Is(err, backend.ErrVersionConflict) {
			t.Errorf("WriteState at version %d (current 2): %v; want ErrVersionConflict", stale, err)
		}
	}
	doc, v, err = h.State.ReadState(c)
	if string(doc) != `{"n":2}` || v != 2 || err != nil {
		t.Errorf("ReadState = %q, %d, %v; want {\"n\":2}, 2", doc, v, err)
	}
}

func testStateCASRace(t *testing.T, h *Harness) {
	const writers = 8
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[w] = h.State.WriteState(context.Background(), []byte(fmt.Sprintf(`{"writer":%d}`, w)), 0)
		}()
	}
	wg.Wait()
	winners := 0
	for w, err := range errs {
		switch {
		case err == nil:
			winners++
		case !errors.Is(err, backend.ErrVersionConflict):
			t.Errorf("writer %d: %v; want success or ErrVersionConflict", w, err)
		}
	}
	if winners != 1 {
		t.Errorf("%d writers won the race at version 0; want exactly 1", winners)
	}
}

func testLockContention(t *testing.T, h *Harness) {
	c := ctx(t)
	const lockers = 8
	var wg sync.WaitGroup
	got := make([]backend.LockInfo, lockers)
	errs := make([]error, lockers)
	for l := 0; l < lockers; l++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[l], errs[l] = h.Locker.Lock(context.Background(), backend.LockInfo{Who: fmt.Sprintf("user%d@host", l), Operation: "apply"}, time.Minute)
		}()
	}
	wg.Wait()
	winner := -1
	for l, err := range errs {
		var le *backend.LockedError
		switch {
		case err == nil && winner >= 0:
			t.Errorf("lockers %d and %d both hold the lock", winner, l)
		case err == nil:
			winner = l
		case !errors.As(err, &le):
			t.Errorf("locker %d: %v; want a *LockedError", l, err)
		}
	}
	if winner < 0 {
		t.Fatal("nobody took the lock")
	}
	held := got[winner]
	if held.ID == "" || held.Who != fmt.Sprintf("user%d@host", winner) || held.Operation != "apply" || !held.Expires.After(held.Created) {
		t.Errorf("held lock %+v; want an ID, the winner's info and a lease", held)
	}
	_, err := h.Locker.Lock(c, backend.LockInfo{Who: "late@host", Operation: "plan"}, time.Minute)
	var le *backend.LockedError
	if !errors.As(err, &le) {
		t.Fatalf("Lock while held: %v; want *LockedError", err)
	}
	if le.Holder.ID != held.ID || le.Holder.Who != held.Who || le.Holder.Operation != "apply" || !le.Holder.Expires.Equal(held.Expires) || !le.Holder.Created.Equal(held.Created) {
		t.Errorf("LockedError holder %+v; want %+v", le.Holder, held)
	}
	if err := h.Locker.Unlock(c, "not-the-id"); !errors.Is(err, backend.ErrLockNotHeld) {
		t.Errorf("Unlock with another ID: %v; want ErrLockNotHeld", err)
	}
	if err := h.Locker.Unlock(c, held.ID); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := h.Locker.Unlock(c, held.ID); !errors.Is(err, backend.ErrLockNotHeld) {
		t.Errorf("second Unlock: %v; want ErrLockNotHeld", err)
	}
	if _, err := h.Locker.Lock(c, backend.LockInfo{Who: "next@host"}, time.Minute); err != nil {
		t.Errorf("Lock after Unlock: %v", err)
	}
}

func testLockExpiry(t *testing.T, h *Harness) {
	c := ctx(t)
	// Margins of a second, so that a backend on real time passes on a
	// loaded machine: the first lease ends at 2s, the renewed one at 3s,
	// and the contender comes at 2s (+ call latency).
	a, err := h.Locker.Lock(c, backend.LockInfo{ID: "lock-a", Who: "a@host", Operation: "apply"}, 2*time.Second)
	if err != nil || a.ID != "lock-a" {
		t.Fatalf("Lock = %+v, %v; want ID lock-a", a, err)
	}
	h.Advance(time.Second)
	if err := h.Locker.Renew(c, a.ID, 2*time.Second); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	h.Advance(time.Second)
	var le *backend.LockedError
	if _, err := h.Locker.Lock(c, backend.LockInfo{Who: "b@host"}, time.Second); !errors.As(err, &le) {
		t.Fatalf("Lock past the first lease but within the renewed one: %v; want *LockedError", err)
	}
	if err := h.Locker.Renew(c, "lock-b", time.Second); !errors.Is(err, backend.ErrLockNotHeld) {
		t.Errorf("Renew of a lock not held: %v; want ErrLockNotHeld", err)
	}
	h.Advance(2 * time.Second)
	b, err := h.Locker.Lock(c, backend.LockInfo{ID: "lock-b", Who: "b@host"}, time.Minute)
	if err != nil {
		t.Fatalf("Lock after the lease expired: %v; want a takeover", err)
	}
	if err := h.Locker.Renew(c, a.ID, time.Minute); !errors.Is(err, backend.ErrLockNotHeld) {
		t.Errorf("Renew by the previous holder after takeover: %v; want ErrLockNotHeld", err)
	}
	if err := h.Locker.Unlock(c, a.ID); !errors.Is(err, backend.ErrLockNotHeld) {
		t.Errorf("Unlock by the previous holder: %v; want ErrLockNotHeld", err)
	}
	if err := h.Locker.Unlock(c, b.ID); err != nil {
		t.Errorf("Unlock by the new holder: %v", err)
	}
}

func testForceUnlock(t *testing.T, h *Harness) {
	c := ctx(t)
	held, err := h.Locker.Lock(c, backend.LockInfo{Who: "gone@host", Operation: "apply"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Locker.ForceUnlock(c, "wrong-id"); !errors.Is(err, backend.ErrLockNotHeld) {
		t.Errorf("ForceUnlock with a wrong ID: %v; want ErrLockNotHeld", err)
	}
	if err := h.Locker.ForceUnlock(c, held.ID); err != nil {
		t.Fatalf("ForceUnlock: %v", err)
	}
	if _, err := h.Locker.Lock(c, backend.LockInfo{Who: "me@host"}, time.Minute); err != nil {
		t.Errorf("Lock after ForceUnlock: %v", err)
	}
}

func testPoolStore(t *testing.T, h *Harness) {
	c := ctx(t)
	granted := h.Now().Truncate(time.Microsecond).UTC()
	recs := []pools.LeaseRecord{
		{LeaseID: "l1", Pool: "big", TaskID: "t1", Priority: 2, Slots: 4, GrantedAt: granted, ExpiresAt: granted.Add(time.Minute), TTL: time.Minute, Owner: "ci-workers"},
		{LeaseID: "l2", Pool: "big", TaskID: "t2", Priority: 0, Slots: 1, GrantedAt: granted},
		{LeaseID: "l3", Pool: "small", TaskID: "t3", Slots: 2, GrantedAt: granted},
	}
	for _, r := range recs {
		if err := h.Pools.PutLease(c, r); err != nil {
			t.Fatalf("PutLease(%s): %v", r.LeaseID, err)
		}
	}
	recs[0].ExpiresAt = granted.Add(2 * time.Minute) // a heartbeat
	if err := h.Pools.PutLease(c, recs[0]); err != nil {
		t.Fatal(err)
	}
	if err := h.Pools.DeleteLease(c, "l2"); err != nil {
		t.Fatal(err)
	}
	if err := h.Pools.DeleteLease(c, "never-existed"); err != nil {
		t.Errorf("DeleteLease of a missing record: %v; want nil", err)
	}
	got, err := h.Pools.LoadLeases(c)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(got, func(i, j int) bool { return got[i].LeaseID < got[j].LeaseID })
	want := []pools.LeaseRecord{recs[0], recs[2]}
	if len(got) != len(want) {
		t.Fatalf("LoadLeases = %+v; want %+v", got, want)
	}
	for i := range want {
		if got[i].LeaseID != want[i].LeaseID || got[i].Pool != want[i].Pool || got[i].TaskID != want[i].TaskID || got[i].Priority != want[i].Priority ||
			got[i].Slots != want[i].Slots || !got[i].GrantedAt.Equal(want[i].GrantedAt) || !got[i].ExpiresAt.Equal(want[i].ExpiresAt) || got[i].TTL != want[i].TTL || got[i].Owner != want[i].Owner {
			t.Errorf("LoadLeases[%d] = %+v; want %+v", i, got[i], want[i])
		}
	}
}

// testGrantStore: records round-trip byte for byte, a put replaces, deletes
// are idempotent, and grants and pool leases never see each other's records.
func testGrantStore(t *testing.T, h *Harness) {
	c := ctx(t)
	if err := h.Grants.PutGrant(c, "", []byte("x")); err == nil {
		t.Error("PutGrant with an empty ID succeeded")
	}
	want := map[string][]byte{
		"permit/scanner~a1-1": []byte(`{"kind":"permit","budget":"scanner","scan_ring_bytes":1024}`),
		"claim/fleet/0001":    []byte(`{"kind":"claim"}`),
		"binary":              {0, 1, 2, 255},
	}
	for id, body := range want {
		if err := h.Grants.PutGrant(c, id, []byte("old")); err != nil {
			t.Fatal(err)
		}
		if err := h.Grants.PutGrant(c, id, body); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Grants.PutGrant(c, "gone", []byte("x")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := h.Grants.DeleteGrant(c, "gone"); err != nil {
			t.Fatalf("DeleteGrant (again): %v", err)
		}
	}
	lease := pools.LeaseRecord{LeaseID: "p/a-1", Pool: "p", TaskID: "t", Slots: 1, GrantedAt: h.Now(), ExpiresAt: h.Now().Add(time.Minute), TTL: time.Minute}
	if err := h.Pools.PutLease(c, lease); err != nil {
		t.Fatal(err)
	}
	got, err := h.Grants.LoadGrants(c)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("LoadGrants = %q, want %q", got, want)
	}
	leases, err := h.Pools.LoadLeases(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(leases) != 1 || leases[0].LeaseID != lease.LeaseID {
		t.Fatalf("LoadLeases = %+v, want only %s (grants must not appear as pool leases)", leases, lease.LeaseID)
	}
}
