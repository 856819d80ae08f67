package supervise

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// ChildProcAttr puts a child in a process group of its own (a terminal's
// Ctrl-C reaches serve alone) and has the kernel SIGKILL it when serve
// dies, however it dies (see Forker for the thread caveat).
func ChildProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// lowestPriority is the nice value a low-priority Forker's children get.
const lowestPriority = 19

// lowerForkingThread lowers the calling thread to the lowest priority. On
// Linux a nice value belongs to a thread and a process inherits its
// forking thread's, so every child forked from it, and every thread its
// runtime makes, runs niced from the start, package initialisers
// included. A failure leaves the children at serve's priority.
func lowerForkingThread() { _ = unix.Setpriority(unix.PRIO_PROCESS, 0, lowestPriority) }

// lowerChild: the child inherited the forking thread's priority.
func lowerChild(int) {}
