package supervise

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

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

// lowerForkingThread lowers the calling thread to the lowest priority:
// nice 19 and the SCHED_IDLE policy. On Linux both belong to a thread, and
// a process inherits its forking thread's, so every child forked from it,
// and every thread its runtime makes, runs lowered from the start, package
// initialisers included.
//
// Nice alone left a child's threads on a CPU a serving thread had just
// woken on; a SCHED_IDLE task gives the CPU up as soon as an ordinary one
// wakes there, and the kernel counts its CPU as free when it places one
// (docs/neighbour-tail.md). The price is that on a server whose CPUs never
// idle the child gets almost nothing: a caller that must not wait on it
// forever watches it with ProcessCPU, so SCHED_IDLE is taken only where
// ProcessCPU can read a process's figures (a kernel without schedstats
// gets nice 19 alone). Either call failing (a policy a sandbox forbids)
// leaves the children at what the other gave, or at serve's priority.
func lowerForkingThread() {
	_ = unix.Setpriority(unix.PRIO_PROCESS, 0, lowestPriority)
	if _, _, ok := ProcessCPU(os.Getpid()); ok {
		_ = unix.SchedSetAttr(0, &unix.SchedAttr{Policy: unix.SCHED_IDLE, Nice: lowestPriority}, 0)
	}
}

// ProcessCPU returns how long the threads of process pid have run on a CPU
// and how long they have waited, runnable, for one: the sums of
// /proc/<pid>/task/*/schedstat. A thread that ends takes its figures
// with it, so a difference is a floor. ok is false when the files cannot
// be read (the process is gone, or the kernel keeps no schedstats).
func ProcessCPU(pid int) (ran, waited time.Duration, ok bool) {
	stats, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "schedstat"))
	for _, name := range stats {
		b, err := os.ReadFile(name)
		if err != nil {
			continue // the thread ended
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue
		}
		r, err1 := strconv.ParseInt(f[0], 10, 64)
		w, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		ran += time.Duration(r)
		waited += time.Duration(w)
		ok = true
	}
	return ran, waited, ok
}

// lowerChild: the child inherited the forking thread's priority.
func lowerChild(int) {}
