package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/backend/local"
	"github.com/rpdhq/rpd/client"
	"github.com/rpdhq/rpd/runtime/pickup"
)

// kill -9 in the middle of pickups: 40 idle runners, 8 workers picking
// with unique worker_ids (each confirms what it gets, except one worker
// that never does), the daemon killed after a dozen hand-outs and started
// again on the same address; every request the kill cut is retried with
// its worker_id. In the end every runner is claimed by exactly one worker
// that received it (and confirmed), or idle and pickable again; the claims
// nobody confirmed are idle again after claim_ttl.
func TestDaemonE2EKill9PickupRetries(t *testing.T) {
	const (
		runners  = 40
		workers  = 8
		lazy     = workers - 1 // the worker that never confirms
		claimTTL = 4 * time.Second
	)
	conf, cwd := t.TempDir(), t.TempDir()
	writeConf(t, filepath.Join(conf, "main.hcl"), e2eRPD+fmt.Sprintf(`
runner_class "medium" {
  cpu            = 2
  mem            = "4GiB"
  instance_types = ["c6i.*", "m6i.*"]
  queue { visibility_timeout = "3s" }
  pickup {
    requeue_delay = "1s"
    claim_ttl     = "%s"
  }
}
`, claimTTL))
	addr := freeAddr(t)
	argv := []string{"watch", "-listen", addr, conf}
	ld := launchRPD(t, cwd, nil, addr, argv...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	threshold := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	for i := range runners {
		usage, typ := "on-demand", "c6i.large"
		if i%2 == 1 {
			usage, typ = "spot", "m6i.large"
		}
		if _, err := ld.c.Offer(ctx, "medium", api.Instance{InstanceID: fmt.Sprintf("i-%02d", i), UsageClass: usage, InstanceType: typ, CPU: 2, Mem: 4096, ResourceClass: "medium", Threshold: threshold}); err != nil {
			t.Fatal(err)
		}
	}

	// received: worker_id -> the instance its pickup answered, and
	// confirmed: worker_ids whose confirmation was answered 200.
	var mu sync.Mutex
	received := map[string]string{}
	confirmed := map[string]bool{}
	var handedOut, retried atomic.Int64
	killed := make(chan struct{})
	// call retries a call the kill cut (a transport error) with the same
	// arguments until the restarted daemon answers, bounded in time.
	call := func(f func() error) error {
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := f()
			var ae *api.Error
			if err == nil || errors.As(err, &ae) || time.Now().After(deadline) || ctx.Err() != nil {
				return err
			}
			retried.Add(1)
			time.Sleep(100 * time.Millisecond)
		}
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			usage := "on-demand"
			if w%2 == 1 {
				usage = "spot"
			}
			for n := 0; ; n++ {
				id := fmt.Sprintf("w%d-job%d", w, n)
				var inst api.Instance
				err := call(func() error {
					var err error
					inst, err = ld.c.Pickup(ctx, "medium", api.PickupRequest{WorkerID: id, UsageClass: usage})
					return err
				})
				if client.IsCode(err, api.CodeExhausted) {
					return
				}
				if err != nil {
					t.Errorf("%s: pickup: %v", id, err)
					return
				}
				mu.Lock()
				if prev, ok := received[id]; ok && prev != inst.InstanceID {
					t.Errorf("%s received two instances: %s and %s", id, prev, inst.InstanceID)
				}
				received[id] = inst.InstanceID
				mu.Unlock()
				if handedOut.Add(1) == 12 {
					close(killed)
				}
				if w == lazy {
					continue
				}
				err = call(func() error {
					_, err := ld.c.ConfirmInstance(ctx, inst.InstanceID, id)
					return err
				})
				if err != nil {
					t.Errorf("%s: confirm %s: %v", id, inst.InstanceID, err)
					return
				}
				mu.Lock()
				confirmed[id] = true
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	select {
	case <-killed:
	case <-ctx.Done():
		t.Fatal("fewer than 12 runners handed out")
	}
	if code := ld.stop(syscall.SIGKILL); code != -9 {
		t.Fatalf("kill -9: exit %d", code)
	}
	ld = launchRPD(t, cwd, nil, addr, argv...)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// After claim_ttl (plus a maintenance pass, plus the visibility
	// timeout of what the killed daemon held), nothing unconfirmed is left.
	b, err := local.Open(ctx, filepath.Join(cwd, ".rpd", "state.db"), local.Options{Stack: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var recs []pickup.Instance
	for deadline := time.Now().Add(claimTTL + 15*time.Second); ; {
		recs, err = b.Instances().List(ctx, "medium", "")
		if err != nil {
			t.Fatal(err)
		}
		unconfirmed := 0
		for _, r := range recs {
			if r.State == pickup.StateClaimed && !r.ClaimExpires.IsZero() {
				unconfirmed++
			}
		}
		if unconfirmed == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d claims still unconfirmed %v after claim_ttl: %+v", unconfirmed, claimTTL, recs)
		}
		time.Sleep(200 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	receivers := map[string][]string{} // instance -> worker_ids that received it
	for id, inst := range received {
		receivers[inst] = append(receivers[inst], id)
	}
	idle := 0
	for _, r := range recs {
		switch r.State {
		case pickup.StateClaimed:
			if received[r.Owner] != r.ID || !confirmed[r.Owner] {
				t.Errorf("%s is claimed by %q, which did not receive and confirm it (received: %v)", r.ID, r.Owner, receivers[r.ID])
			}
		case pickup.StateIdle:
			idle++
		default:
			t.Errorf("%s ended %s", r.ID, r.State)
		}
	}
	for id := range confirmed {
		if inst := received[id]; !claimedBy(recs, inst, id) {
			t.Errorf("%s confirmed %s, which is no longer its claim", id, inst)
		}
	}
	// Every idle runner is pickable again: a last worker gets each once
	// (and confirms it, or it would lapse and come round again).
	got := map[string]bool{}
	for n := 0; n <= idle; n++ {
		inst, err := ld.c.PickupAndConfirm(ctx, "medium", api.PickupRequest{WorkerID: fmt.Sprintf("sweeper-%d", n), WaitSeconds: 5})
		if client.IsCode(err, api.CodeExhausted) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if got[inst.InstanceID] {
			t.Fatalf("%s handed out twice", inst.InstanceID)
		}
		got[inst.InstanceID] = true
	}
	if len(got) != idle {
		t.Fatalf("picked up %d of the %d idle runners afterwards; want all", len(got), idle)
	}
	t.Logf("%d hand-outs, %d calls retried after the kill, %d confirmed, %d idle at the end", len(received), retried.Load(), len(confirmed), idle)
}

func claimedBy(recs []pickup.Instance, id, owner string) bool {
	for _, r := range recs {
		if r.ID == id {
			return r.State == pickup.StateClaimed && r.Owner == owner
		}
	}
	return false
}
