//go:build unix && !linux

package supervise

import "syscall"

// childProcAttr puts a child in a process group of its own, so a
// terminal's Ctrl-C reaches serve alone. Only Linux has a parent-death
// signal: elsewhere a SIGKILL of serve leaves its children running until
// their next pass finds the logs' writer gone, and only an orderly stop
// ends them.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
