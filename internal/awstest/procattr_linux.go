package awstest

import "syscall"

// procAttr puts the emulator in its own process group (so Cleanup can kill
// node and anything it spawned) and kills it if the test binary dies first.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
