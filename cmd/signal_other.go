//go:build !unix

package cmd

import "os"

// flushSignal is empty where SIGUSR1 does not exist: maintain then flushes
// only on its --flush-every schedule and at exit.
var flushSignal []os.Signal
