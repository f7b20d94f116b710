package ledger

import "context"

// Run polls src every PollInterval (read afresh each time, so Reconfigure
// applies on the next tick) until ctx ends, and returns ctx.Err(). It polls
// once at start. A failed poll is counted, kept as LastError in Status, and
// retried on the next tick; the ledger goes stale if failures outlast
// StaleAfter. Run at most one loop per ledger.
func (l *Ledger) Run(ctx context.Context, src UsageSource) error {
	tick := make(chan struct{}, 1)
	for {
		l.Poll(ctx, src)
		t := l.clock.AfterFunc(l.Config().PollInterval, func() {
			select {
			case tick <- struct{}{}:
			default:
			}
		})
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-tick:
		}
	}
}

// Poll asks src once and feeds the result to the ledger: a figure through
// ObserveUsage, a failure into the SourceErrors counter and Status.LastError.
// Run calls it on every tick; it is exported for callers that schedule polls
// themselves.
func (l *Ledger) Poll(ctx context.Context, src UsageSource) {
	asked := l.clock.Now()
	r, err := src.Usage(ctx)
	if err == nil {
		if r.At.IsZero() {
			r.At = asked
		}
		err = l.ObserveUsage(r.Active, r.At)
	}
	if err != nil {
		if ctx.Err() != nil {
			return // shutting down, not a source fault
		}
		l.recordSourceError(err)
		l.log.Warn("ledger: usage poll failed; retrying next tick", "err", err)
	}
}
