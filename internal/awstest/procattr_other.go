//go:build !linux

package awstest

import "syscall"

// procAttr puts the emulator in its own process group, so Cleanup can kill
// node and anything it spawned.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
