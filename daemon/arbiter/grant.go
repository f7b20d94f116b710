package arbiter

import (
	"context"
	"errors"
	"time"

	"github.com/rpdhq/rpd/daemon/internal/httpapi"
	"github.com/rpdhq/rpd/daemon/internal/security"
)

// This file is the one grant pipeline: pool leases, budget permits and
// VM-ceiling claims are kinds (a grantKind each, in pools.go, budgets.go
// and ceilings.go) that say how to find, take, record and give back one of
// their grants; grant does the rest, the same for all.

// grantKind is one request for a grant of some kind G.
type grantKind[G any] struct {
	// existing finds the grant already made for the request_id, with the
	// principal that took it and its name for a refusal ("lease x").
	existing func() (g G, owner, what string, ok bool)
	// wait is how long the request may wait; 0 answers at once.
	wait time.Duration
	// take grants, waiting up to wait when it is not 0 (ctx carries that
	// deadline); fail translates its error (nil: as it is).
	take func(ctx context.Context) (G, error)
	fail func(err error) error
	// record writes the grant's fenced record and returns the grant as
	// recorded; nil when take wrote it (pool leases go through the pools
	// package's Store).
	record func(ctx context.Context, g G) (G, error)
	// giveBack returns a grant whose record could not be written; nil when
	// record gave it back itself.
	giveBack func(g G)
}

// grant runs k: the request_id latch (a retry waits for its original and
// then finds its grant instead of taking a second), wait-or-try, the fenced
// record, and the give-back when the record fails (a grant a new leader
// would not know of could over-commit). latch is the request_id latch key
// ("pool/db/<id>"), "" when the request carries no request_id; it is not
// one of k's fields so that k's functions, which the latch does not keep,
// stay on the caller's stack.
func grant[G any](ctx context.Context, a *Arbiter, latch string, k grantKind[G]) (G, error) {
	var zero G
	if latch != "" {
		held, err := a.requests.Lock(ctx, latch)
		if err != nil {
			return zero, err
		}
		defer held.Unlock()
		if g, owner, what, ok := k.existing(); ok {
			if err := security.HolderOnly(ctx, what, owner); err != nil {
				return zero, err
			}
			return g, nil
		}
	}
	tctx := ctx
	if k.wait > 0 {
		var cancel context.CancelFunc
		tctx, cancel = context.WithTimeout(ctx, k.wait)
		defer cancel()
	}
	g, err := k.take(tctx)
	if err != nil {
		if k.fail != nil {
			err = k.fail(err)
		}
		var answer *httpapi.Error
		if a.stopping.Load() && ctx.Err() != nil && !errors.As(err, &answer) {
			err = httpapi.ErrShuttingDown // woken by the shutdown, not by the client
		}
		return zero, err
	}
	if k.record != nil {
		rec, err := k.record(ctx, g)
		if err != nil {
			if k.giveBack != nil {
				k.giveBack(g)
			}
			return zero, err
		}
		g = rec
	}
	return g, nil
}

// latchKey is the request_id latch key of a grant of kind in component, ""
// without a request_id; a request_id that is not valid fails.
func latchKey(kind, component, requestID string) (string, error) {
	if requestID == "" {
		return "", nil
	}
	if err := httpapi.CheckRequestID(requestID); err != nil {
		return "", err
	}
	return kind + "/" + component + "/" + requestID, nil
}
