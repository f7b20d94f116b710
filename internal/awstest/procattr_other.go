//go:build !linux

package awstest

import "syscall"

// ChildProcAttr puts an emulator (node, moto) in its own process group, so
// that Cleanup can kill it and anything it spawned.
func ChildProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
