//go:build !unix

package supervise

import (
	"errors"
	"os"
	"syscall"
)

// childProcAttr: no process groups or parent-death signal here.
func childProcAttr() *syscall.SysProcAttr { return nil }

// signalFlush: there is no SIGUSR1 here; serve flushes the logs itself.
func signalFlush(*os.Process) error { return errors.New("no flush signal on this system") }

// signalStop kills: there is no SIGTERM to send here.
func signalStop(p *os.Process) error { return p.Kill() }

func killProcess(p *proc) { _ = p.cmd.Process.Kill() }
