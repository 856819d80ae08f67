//go:build !unix

package testkit

import "os/exec"

type credential struct{}

func unprivileged() (*credential, error) { return nil, nil }

func (c *credential) own(string) error { return nil }

func (c *credential) apply(*exec.Cmd) {}
