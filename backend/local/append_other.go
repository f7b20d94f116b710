//go:build !linux

package local

import (
	"errors"
	"os"
)

// directAppender is Linux only: elsewhere segments are appended buffered,
// then fdatasync'ed (see append_linux.go).
type directAppender struct{}

func openDirect(string, *os.File, int64, *syncPriority) (*directAppender, error) {
	return nil, errors.New("direct appends are implemented on Linux only")
}

var errDirectRefused = errors.New("the file system refused a direct write")

func (*directAppender) append([]byte, int64, bool) (bool, error) { return false, errors.ErrUnsupported }
func (*directAppender) close() error                             { return nil }
