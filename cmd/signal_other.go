//go:build !unix

package cmd

import "os"

// flushSignal is empty where SIGUSR1 does not exist: maintain then flushes
// only on its --flush-every schedule and at exit.
var flushSignal []os.Signal

// heapSignal is empty where SIGUSR2 does not exist: maintain then writes
// no heap profile.
var heapSignal []os.Signal

// reloadSignal is empty where SIGHUP does not exist: serve then applies a
// changed config at its next start.
var reloadSignal []os.Signal
