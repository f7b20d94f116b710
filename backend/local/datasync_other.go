//go:build !linux

package local

import "os"

// datasync flushes f (fsync where fdatasync is not available).
func datasync(f *os.File) error { return f.Sync() }

// lockFile is a no-op where flock is not available.
func lockFile(f *os.File) error { return nil }
