package childproc

import "syscall"

// Attr puts an emulator (node, moto) in its own process group, so
// that Cleanup can kill it and anything it spawned, and kills it if the
// test binary dies first.
func Attr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
