//go:build !linux

package local

import "log/slog"

// syncPriority raises the thread of a synced append on Linux only (see
// syncprio_linux.go); elsewhere appends run at the normal priority.
type syncPriority struct{}

func newSyncPriority(*slog.Logger, bool) *syncPriority { return nil }

func (*syncPriority) raise() bool { return false }
func (*syncPriority) lower(bool)  {}
