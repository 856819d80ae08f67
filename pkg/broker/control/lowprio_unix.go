//go:build unix && !linux

package control

import (
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// lowestPriority is the nice value a migration child runs at.
const lowestPriority = 19

// startLowPriority starts cmd in a process group of its own and then
// lowers its CPU priority to the lowest (a process's, here). There is no
// parent-death signal: a SIGKILL of serve leaves the child to finish its
// one migration, and a serve restarted meanwhile is refused the log's
// writer lock, naming the child's pid, until it has.
func startLowPriority(cmd *exec.Cmd) (release func(), err error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	// A failure leaves the child at serve's priority, as it ran before.
	_ = unix.Setpriority(unix.PRIO_PROCESS, cmd.Process.Pid, lowestPriority)
	return func() {}, nil
}
