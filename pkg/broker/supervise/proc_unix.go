//go:build unix

package supervise

import (
	"os"
	"syscall"
)

// signalFlush asks maintain for a flushing pass.
func signalFlush(p *os.Process) error { return p.Signal(syscall.SIGUSR1) }

// signalStop asks maintain to finish its pass and exit.
func signalStop(p *os.Process) error { return p.Signal(syscall.SIGTERM) }

// killProcess kills a child's whole process group, then the child itself
// (in case it left the group).
func killProcess(p *proc) {
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	_ = p.cmd.Process.Kill()
}
