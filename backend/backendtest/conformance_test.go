package backendtest_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"

	"testing"
	"time"

	"github.com/rpdhq/rpd/backend/aws"
	"github.com/rpdhq/rpd/backend/backendtest"
	"github.com/rpdhq/rpd/backend/local"
	"github.com/rpdhq/rpd/internal/awstest"
	"github.com/rpdhq/rpd/runtime/pickup"
	"github.com/rpdhq/rpd/runtime/pools"
)

// TestConformance runs the one suite against both backends: "local" on a
// fresh SQLite file per subtest with a fake clock, "aws" on the emulators
// with real time. The two run in parallel, aws first, so that the local
// suite runs while aws's Retention subtest waits out its minute.
func TestConformance(t *testing.T) {
	t.Run("aws", func(t *testing.T) {
		t.Parallel()
		e := awstest.Start(t)
		backendtest.Run(t, awsFactory(e))
	})
	t.Run("local", func(t *testing.T) {
		t.Parallel()
		backendtest.Run(t, localFactory)
	})
}

func localFactory(t *testing.T) *backendtest.Harness {
	clock := backendtest.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	stack := "s" + strings.ToLower(backendtest.RandomName(""))
	path := filepath.Join(t.TempDir(), ".rpd", "state.db")
	b, err := local.Open(context.Background(), path, local.Options{Stack: stack, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return &backendtest.Harness{
		Admin: b, State: b, Locker: b,
		Queue:        func(name string) pickup.Queue { return b.Queue(name) },
		Instances:    b.Instances(),
		Pools:        b.PoolStore(),
		Grants:       b.GrantStore(),
		Leader:       b,
		FencedPools:  func(epoch int64) pools.Store { return b.PoolStore().Fence(epoch) },
		FencedGrants: func(epoch int64) backendtest.GrantStore { return b.GrantStore().Fence(epoch) },
		Prefix:       stack,
		Now:          clock.Now,
		Advance:      clock.Advance,
		Broken: func(t *testing.T) (pickup.InstanceTable, pickup.Queue) {
			closed, err := local.Open(context.Background(), filepath.Join(t.TempDir(), "closed.db"), local.Options{Stack: stack})
			if err != nil {
				t.Fatal(err)
			}
			closed.Close()
			return closed.Instances(), closed.Queue(stack + "-q")
		},
	}
}

func awsFactory(e awstest.Endpoints) backendtest.Factory {
	return func(t *testing.T) *backendtest.Harness {
		stack := "s" + backendtest.RandomName("")
		b, err := aws.Open(context.Background(), e.Options(stack, "t"+stack))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.EnsureTables(context.Background()); err != nil {
			t.Fatal(err)
		}
		return &backendtest.Harness{
			Admin: b, State: b, Locker: b,
			Queue:        func(name string) pickup.Queue { return b.Queue(name) },
			Instances:    b.Instances(),
			Pools:        b.PoolStore(),
			Grants:       b.GrantStore(),
			Leader:       b,
			FencedPools:  func(epoch int64) pools.Store { return b.PoolStore().Fence(epoch) },
			FencedGrants: func(epoch int64) backendtest.GrantStore { return b.GrantStore().Fence(epoch) },
			Prefix:       stack,
			Now:          time.Now,
			Advance:      time.Sleep,
			Deviations:   backendtest.Deviations{StaleHandlesAccepted: true, ChangeVisibilityCountsAsReceive: true},
			Broken: func(t *testing.T) (pickup.InstanceTable, pickup.Queue) {
				// A port nothing listens on: every call fails to connect.
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				dead := fmt.Sprintf("http://%s", l.Addr())
				l.Close()
				opts := e.Options(stack, "t"+stack)
				opts.SQSEndpoint, opts.DynamoDBEndpoint, opts.MaxAttempts = dead, dead, 1
				broken, err := aws.Open(context.Background(), opts)
				if err != nil {
					t.Fatal(err)
				}
				return broken.Instances(), broken.Queue(stack + "-q")
			},
		}
	}
}
