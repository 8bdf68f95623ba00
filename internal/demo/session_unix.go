//go:build unix

package demo

import "syscall"

// newSessionAttr starts a process as the leader of a session of its own.
func newSessionAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }
