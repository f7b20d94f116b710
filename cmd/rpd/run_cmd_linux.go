package main

import "syscall"

// dieWithRPDRun makes the kernel kill the command if rpd run dies first
// (kill -9, OOM): the command runs in a process group of its own, which a
// signal to rpd run's group no longer reaches, and it must not go on
// running after its lease's holder is gone.
func dieWithRPDRun(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
