//go:build !unix

package control

import "os/exec"

// startLowPriority starts cmd; this system gets no lower priority for it
// (see lowprio_linux.go for why it helps).
func startLowPriority(cmd *exec.Cmd) (release func(), err error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return func() {}, nil
}
