//go:build !linux

package main

import "syscall"

// dieWithRPDRun does nothing where the kernel has no parent-death signal:
// the command outlives an rpd run killed with SIGKILL, without its lease.
func dieWithRPDRun(*syscall.SysProcAttr) {}
