//go:build !unix

package supervise

import (
	"errors"
	"os"
	"syscall"
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
