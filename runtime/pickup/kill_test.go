package pickup_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/aws"
	"github.com/rpdhq/rpd/internal/awstest"
	"github.com/rpdhq/rpd/runtime/pickup"
)

// The child process of TestKill9LosesNothing reads these.
const (
	envKill9     = "RPD_PICKUP_KILL9" // "local" or "aws"
	envKill9DB   = "RPD_PICKUP_KILL9_DB"
	envKill9SQS  = "RPD_PICKUP_KILL9_SQS"
	envKill9DDB  = "RPD_PICKUP_KILL9_DDB"
	envKill9Name = "RPD_PICKUP_KILL9_CLASS"
)

// kill9Config is the lease-mode configuration parent and child share:
// short visibility and delay, so that the recount need not wait long.
func kill9Config(class string, delay time.Duration) pickup.Config {
	return pickup.Config{
		Class: class, CPU: 2, Mem: 4 << 30, InstanceTypes: []string{"c6i.*", "m6i.*"},
		Mode: pickup.ModeLease, RequeueDelay: delay, Visibility: time.Second,
		EmptyConfirmWait: pickup.ShortPollConfirm, LocalExhaustion: 1000,
	}
}

// TestKill9LosesNothing runs pickups in a child process, kills it with
// SIGKILL in the middle, and recounts: every instance is claimed (by the
// child) or idle with a message that reappears; none is idle without one.
func TestKill9LosesNothing(t *testing.T) {
	if os.Getenv(envKill9) != "" {
		t.Skip("in the child")
	}
	t.Run("local", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "state.db")
		e, _ := openLocal(t, db, time.Now)
		e.clock, e.realTime, e.visibility, e.delay = wall{}, true, time.Second, 100*time.Millisecond
		kill9(t, e, []string{envKill9 + "=local", envKill9DB + "=" + db, envKill9Name + "=" + e.class})
	})
	t.Run("aws", func(t *testing.T) {
		eps, b := openAWS(t, "test", "k9")
		ctx := context.Background()
		class := nextClass()
		if err := b.CreateQueue(ctx, "rp-"+class, backend.QueueAttributes{VisibilityTimeout: 30 * time.Second}); err != nil {
			t.Fatal(err)
		}
		e := &env{backend: "aws", class: class, q: b.Queue("rp-" + class), t: b.Instances(), clock: wall{}, realTime: true, delay: time.Second, visibility: time.Second}
		kill9(t, e, []string{envKill9 + "=aws", envKill9SQS + "=" + eps.SQS, envKill9DDB + "=" + eps.DynamoDB, envKill9Name + "=" + class})
	})
}

func kill9(t *testing.T, e *env, childEnv []string) {
	ctx := ctxT(t)
	setup, err := pickup.NewManager(kill9Config(e.class, e.delay), e.q, e.t, pickup.Options{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 40 {
		usage := pickup.UsageSpot
		if i%4 == 0 {
			usage = pickup.UsageOnDemand
		}
		in := e.inst(fmt.Sprint(usage, i), usage, "c6i.large")
		ids = append(ids, in.ID)
		e.offer(t, setup, in)
	}

	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestKill9Child$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	var wg sync.WaitGroup
	wg.Go(func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
	})
	decided := 0
	deadline := time.After(30 * time.Second)
wait:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the child exited before it was killed")
			}
			if strings.HasPrefix(l, "decided") {
				if decided++; decided == 20 {
					break wait
				}
			}
		case <-deadline:
			t.Fatal("the child made no decisions within 30s")
		}
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	cmd.Wait()
	wg.Wait()

	seen, _ := e.drain(t)
	var reachable, claimed, lost int
	for _, id := range ids {
		rec := e.get(t, id)
		switch {
		case rec.State == pickup.StateIdle && seen[id] > 0:
			reachable++
		case rec.State == pickup.StateIdle:
			lost++
			t.Errorf("instance %s is idle but has no message: lost", id)
		case rec.State == pickup.StateClaimed:
			claimed++
		}
	}
	t.Logf("%s: after kill -9: %d idle and reachable, %d claimed by the child, %d lost (of %d)", e.backend, reachable, claimed, lost, len(ids))
	if reachable+claimed != len(ids) {
		t.Fatalf("accounted for %d of %d instances", reachable+claimed+lost, len(ids))
	}
}

// TestKill9Child is the child of TestKill9LosesNothing: it picks up until
// it is killed (or 60s pass), printing a line per round of decisions.
func TestKill9Child(t *testing.T) {
	kind := os.Getenv(envKill9)
	if kind == "" {
		t.Skip("only runs as the child of TestKill9LosesNothing")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	class := os.Getenv(envKill9Name)
	var q pickup.Queue
	var tbl pickup.InstanceTable
	delay := 100 * time.Millisecond
	switch kind {
	case "local":
		e, _ := openLocal(t, os.Getenv(envKill9DB), time.Now)
		q, tbl = e.q, e.t
	case "aws":
		eps := awstest.Endpoints{SQS: os.Getenv(envKill9SQS), DynamoDB: os.Getenv(envKill9DDB)}
		b, err := aws.Open(ctx, eps.Options("test", "k9"))
		if err != nil {
			t.Fatal(err)
		}
		q, tbl = b.Queue("rp-"+class), b.Instances()
		delay = time.Second
	}
	m, err := pickup.NewManager(kill9Config(class, delay), q, tbl, pickup.Options{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	reqs := []pickup.Requirements{
		{UsageClass: pickup.UsageOnDemand},
		{UsageClass: pickup.UsageSpot, InstanceTypes: []string{"m6i.*"}}, // never fits: only re-queues
	}
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				m.Pickup(ctx, reqs[w%2], fmt.Sprintf("child-%d-%d", w, i))
				fmt.Println("decided", m.Decisions())
			}
		})
	}
	wg.Wait()
}
