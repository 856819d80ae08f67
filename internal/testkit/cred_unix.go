//go:build unix

package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// credential is the user the server runs as; nil runs it as this process.
type credential struct{ uid, gid uint32 }

// unprivileged returns "nobody" when this process is root (postgres refuses
// to run as root), nil otherwise.
func unprivileged() (*credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("running as root, postgres needs an unprivileged user and there is no \"nobody\": %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user nobody has uid %q gid %q, not numbers", u.Uid, u.Gid)
	}
	return &credential{uid: uint32(uid), gid: uint32(gid)}, nil
}

// own hands dir (and anything already in it) to the server's user.
func (c *credential) own(dir string) error {
	if c == nil {
		return nil
	}
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(c.uid), int(c.gid))
	})
}

// apply makes cmd run as the credential's user.
func (c *credential) apply(cmd *exec.Cmd) {
	if c != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: c.uid, Gid: c.gid}}
	}
}
