package supervise

import "syscall"

// childProcAttr puts a child in a process group of its own (a terminal's
// Ctrl-C reaches serve alone) and has the kernel SIGKILL it when serve
// dies, however it dies (see Forker for the thread caveat).
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
