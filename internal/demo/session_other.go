//go:build !unix

package demo

import "syscall"

// newSessionAttr: without Unix sessions the daemon starts as any child does.
func newSessionAttr() *syscall.SysProcAttr { return nil }
