package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/rpdhq/rpd/backend"
)

// firstElection is New's attempt at the leader lease, so that a daemon
// alone on its stack starts as the leader, as before replicas existed. In
// watch mode a missing aws table is created first (the leader record lives
// in it, and it is the leader that applies the configuration).
func (d *Daemon) firstElection(ctx context.Context) (bool, error) {
	d.elector.Observe(ctx)
	won, err := d.elector.Attempt(ctx)
	if errors.Is(err, backend.ErrTableMissing) && d.opts.Mode == ModeWatch && d.backend.Tables != nil {
		if err := d.backend.Tables.EnsureTables(ctx); err != nil {
			return false, err
		}
		won, err = d.elector.Attempt(ctx)
	}
	return won, err
}

// takeOver makes this daemon, which just took the lease, the arbiter of
// the stack: in watch mode it applies the configuration to the backend,
// then it restores every grant the stack's records hold (under their IDs:
// their holders heartbeat and release as before) and starts answering
// arbitrated requests. At start-up a failure fails New; later it steps the
// daemon down.
func (d *Daemon) takeOver(ctx context.Context, startup bool) error {
	l := d.elector.View()
	d.log.Info("leading the stack", "epoch", l.Epoch, "holder", l.Holder, "address", l.Address)
	if p := d.backend.PrepareWrites; p != nil {
		if err := p(ctx, l.Epoch); err != nil {
			d.log.Warn("taking over: could not prepare the backend's grant writes; the first grant does it", "err", err)
		}
	}
	if d.opts.Mode == ModeWatch {
		// On the reloader's owner: no reload runs while the new leader
		// applies the active configuration.
		var err error
		if !d.reloader.do(ctx, func() {
			if cfg := d.reloader.state().cfg; cfg != nil {
				err = d.reconcileApply(ctx, cfg)
			}
		}) {
			err = errors.New("the daemon is stopping, or its takeover was cancelled")
		}
		if err != nil {
			if startup {
				return fmt.Errorf("start-up configuration rejected:\napply: %w", err)
			}
			d.log.Error("taking over: could not apply the configuration to the backend; the components run it, the next change or reload retries", "err", err)
		}
	}
	if err := d.arb.Restore(ctx, d.elector.RestoreOptions()); err != nil {
		return err
	}
	d.serving.Store(true)
	return nil
}

// defaultAdvertise is the advertise URL of a daemon bound to addr: the
// host name replaces an unspecified address (0.0.0.0, ::), which other
// hosts cannot dial.
func defaultAdvertise(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil && h != "" {
			host = h
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}
