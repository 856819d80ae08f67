//go:build !linux

package control_test

import "errors"

// pinProcess: only Linux's affinity calls hold a process to one CPU (the
// starvation test runs on Linux only).
func pinProcess(string) error { return errors.New("holding a process to one CPU needs Linux") }
