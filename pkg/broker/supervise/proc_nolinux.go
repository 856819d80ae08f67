//go:build unix && !linux

package supervise

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ChildProcAttr puts a child in a process group of its own, so a
// terminal's Ctrl-C reaches serve alone. Only Linux has a parent-death
// signal: elsewhere a SIGKILL of serve leaves its children running until
// their next pass finds the logs' writer gone (a migration worker, until
// its one migration ends), and only an orderly stop ends them.
func ChildProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// lowestPriority is the nice value a low-priority Forker's children get.
const lowestPriority = 19

// lowerForkingThread does nothing here: setpriority lowers the whole
// process, serve included, not one thread (lowerChild instead).
func lowerForkingThread() {}

// lowerChild lowers a child just started to the lowest priority; its
// package initialisers may have begun at serve's. A failure leaves it
// there.
func lowerChild(pid int) { _ = unix.Setpriority(unix.PRIO_PROCESS, pid, lowestPriority) }

// ProcessCPU: only Linux's /proc tells a process's run-queue wait.
func ProcessCPU(pid int) (ran, waited time.Duration, ok bool) { return 0, 0, false }
