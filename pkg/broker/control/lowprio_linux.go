package control

import (
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// lowestPriority is the nice value a migration child runs at.
const lowestPriority = 19

// startLowPriority starts cmd at the lowest CPU priority, killed when the
// server dies and in a process group of its own (a terminal's Ctrl-C
// reaches serve alone).
//
// On Linux a nice value belongs to a thread, and a process inherits the
// value of the thread that forked it, so the child is forked from a
// thread of its own, niced first: every thread the child's runtime makes
// descends from its first, so all of them run niced, its package
// initialisers included. That thread is never given back to the runtime
// (it could not be un-niced without privilege), and it must outlive the
// child: Linux sends the parent-death signal when the forking thread
// ends, not the process. release lets it end once the child has.
func startLowPriority(cmd *exec.Cmd) (release func(), err error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		// A failure leaves the child at serve's priority, which is how
		// it ran before; it is no reason to fail the migration.
		_ = unix.Setpriority(unix.PRIO_PROCESS, 0, lowestPriority)
		err := cmd.Start()
		started <- err
		if err == nil {
			<-done
		}
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return func() { close(done) }, nil
}
