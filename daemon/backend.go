package daemon

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/aws"
	"github.com/rpdhq/rpd/backend/local"
	"github.com/rpdhq/rpd/runtime/pickup"
	"github.com/rpdhq/rpd/runtime/pools"
	"github.com/rpdhq/rpd/spec"
)

// backendHandle is the open backend, seen through the interfaces the
// daemon's parts declare; each backend package satisfies them.
type backendHandle struct {
	kind      string
	path      string // the local backend's file; "" otherwise
	state     backend.StateStore
	locker    backend.Locker
	admin     backend.QueueAdmin
	tables    backend.TableAdmin // aws only
	poolStore pools.Store
	grants    grantStore
	queue     func(name string) pickup.Queue
	instances pickup.InstanceTable
	close     func() error
}

// ping checks that the backend answers (for /readyz).
func (b *backendHandle) ping(ctx context.Context) error {
	_, _, err := b.state.ReadState(ctx)
	return err
}

// openBackend opens the backend cfg declares.
func openBackend(ctx context.Context, cfg *spec.Config, log *slog.Logger) (*backendHandle, error) {
	switch cfg.Backend.Type {
	case "", "local":
		lb, err := local.Open(ctx, cfg.Backend.Path, local.Options{Stack: cfg.Stack, Logger: log.With("backend", "local")})
		if err != nil {
			return nil, err
		}
		return &backendHandle{
			kind: "local", path: lb.Path(),
			state: lb, locker: lb, admin: lb,
			poolStore: lb.PoolStore(),
			grants:    lb.GrantStore(),
			queue:     func(name string) pickup.Queue { return lb.Queue(name) },
			instances: lb.Instances(),
			close:     lb.Close,
		}, nil
	case "aws":
		ab, err := aws.Open(ctx, aws.Options{Stack: cfg.Stack, Region: cfg.Backend.Region, Profile: cfg.Backend.Profile,
			TablePrefix: cfg.Backend.TablePrefix, Logger: log.With("backend", "aws")})
		if err != nil {
			return nil, err
		}
		return &backendHandle{
			kind:  "aws",
			state: ab, locker: ab, admin: ab,
			tables:    ab,
			poolStore: ab.PoolStore(),
			grants:    ab.GrantStore(),
			queue:     func(name string) pickup.Queue { return ab.Queue(name) },
			instances: ab.Instances(),
			close:     func() error { return nil },
		}, nil
	}
	return nil, fmt.Errorf("unknown backend type %q: use \"local\" or \"aws\"", cfg.Backend.Type)
}
