package reconcile

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rpdhq/rpd/backend"
)

// fakeTables is a TableAdmin whose tables exist once EnsureTables ran; it
// logs calls into the fake backend's call list to check their order.
type fakeTables struct {
	f      *fakeBackend
	exists bool
	fail   error
}

func (t *fakeTables) Tables(context.Context) ([]backend.TableInfo, error) {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.f.calls = append(t.f.calls, "Tables")
	return []backend.TableInfo{{Resource: "instances", Name: "rpd-ci-instances", Exists: t.exists}, {Resource: "state", Name: "rpd-ci-state", Exists: t.exists}}, nil
}

func (t *fakeTables) EnsureTables(context.Context) error {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.f.calls = append(t.f.calls, "EnsureTables")
	if t.fail != nil {
		return t.fail
	}
	t.exists = true
	return nil
}

// stateless is a StateStore whose table does not exist yet.
type stateless struct{ *fakeBackend }

func (s stateless) ReadState(ctx context.Context) ([]byte, int64, error) {
	return nil, 0, errors.New("ResourceNotFoundException: table rpd-ci-state does not exist")
}

func TestTablesBootstrapBeforeLock(t *testing.T) {
	ctx := context.Background()
	f := newFakeBackend()
	tables := &fakeTables{f: f}
	live := Live{Queues: f, State: stateless{f}, Lock: f, Tables: tables}
	p := mustPlan(t, testConfig("ci"), live, PlanOptions{})
	if got := changed(p)[:2]; !slices.Equal(got, []string{"+ table.instances", "+ table.state"}) {
		t.Fatalf("changes = %q", changed(p))
	}
	if slices.Contains(f.calls, "EnsureTables") {
		t.Fatal("plan created the tables")
	}
	f.calls = nil
	live.State = f
	res, err := Apply(ctx, p, live, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if i, j := slices.Index(f.calls, "EnsureTables"), slices.Index(f.calls, "Lock"); i < 0 || j < 0 || i > j {
		t.Fatalf("calls %q: want EnsureTables before Lock", f.calls)
	}
	if res.Done.Add != 11 {
		t.Errorf("done = %+v", res.Done)
	}
	if p2 := mustPlan(t, testConfig("ci"), live, PlanOptions{}); p2.HasChanges() {
		t.Fatalf("not converged: %q", changed(p2))
	}

	// A failing bootstrap changes nothing else.
	f2 := newFakeBackend()
	live2 := Live{Queues: f2, State: stateless{f2}, Lock: f2, Tables: &fakeTables{f: f2, fail: errors.New("AccessDenied")}}
	p = mustPlan(t, testConfig("ci"), live2, PlanOptions{})
	_, err = Apply(ctx, p, live2, ApplyOptions{})
	if err == nil || !strings.Contains(err.Error(), "create the stack's tables: AccessDenied") || len(f2.queueNames()) != 0 || slices.Contains(f2.calls, "Lock") {
		t.Fatalf("err = %v, calls %q", err, f2.calls)
	}
}

func TestLostLockStopsApply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeBackend()
		block := make(chan struct{})
		f.fail = func(call string) error {
			switch call {
			case "Renew":
				return errors.New("lock taken over")
			case "CreateQueue ci-rp-medium":
				f.mu.Unlock()
				<-block
				f.mu.Lock()
			}
			return nil
		}
		p := mustPlan(t, testConfig("ci"), f.live(), PlanOptions{})
		done := make(chan error, 1)
		var res *ApplyResult
		go func() {
			var err error
			res, err = Apply(context.Background(), p, f.live(), ApplyOptions{Parallelism: 1, LockTTL: 30 * time.Second})
			done <- err
		}()
		// The renewal, due after 10s, fails while the first queue is being created.
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if !slices.Contains(callsOf(f), "Renew") {
			t.Fatal("no renewal after a third of the lease")
		}
		close(block)
		if err := <-done; err == nil || !strings.Contains(err.Error(), "lost the state lock") {
			t.Fatalf("err = %v", err)
		}
		for _, r := range res.Results {
			if r.Address.String() != "queue.medium" && r.Status != Skipped {
				t.Errorf("%s: %s after the lock was lost", r.Address, r.Status)
			}
		}
	})
}

func callsOf(f *fakeBackend) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}
