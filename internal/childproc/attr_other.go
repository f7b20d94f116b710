//go:build !linux

package childproc

import "syscall"

// Attr puts an emulator (node, moto) in its own process group, so
// that Cleanup can kill it and anything it spawned.
func Attr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
