//go:build !unix

package supervise

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// ChildProcAttr: no process groups or parent-death signal here.
func ChildProcAttr() *syscall.SysProcAttr { return nil }

// lowerForkingThread and lowerChild: no lower priority for children here.
func lowerForkingThread() {}
func lowerChild(int)      {}

// signalFlush: there is no SIGUSR1 here; serve flushes the logs itself.
func signalFlush(*os.Process) error { return errors.New("no flush signal on this system") }

// signalStop kills: there is no SIGTERM to send here.
func signalStop(p *os.Process) error { return p.Kill() }

func killProcess(p *proc) { _ = p.cmd.Process.Kill() }

// ProcessCPU: only Linux's /proc tells a process's run-queue wait.
func ProcessCPU(pid int) (ran, waited time.Duration, ok bool) { return 0, 0, false }
