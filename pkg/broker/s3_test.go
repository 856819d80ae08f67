//go:build linux

package broker

import (
	"os/exec"
	"runtime"
	"testing"

	"github.com/streamcast/streamcast/internal/s3test"
)

const (
	testBucket = s3test.Bucket
	testRegion = s3test.Region
)

// helperForker starts the tests' helper servers from one locked thread that
// lives as long as the test binary. Pdeathsig fires when the forking thread
// ends, not the process: forked from an ordinary goroutine, versitygw would
// die whenever a Server's own forker, locked to that same thread, exits at
// Close.
var helperForker *forker // made and closed by TestMain

// startS3 starts versitygw (internal/s3test) with testBucket, stopped when
// the test ends.
func startS3(t *testing.T) *s3test.Server { return s3test.Start(t, helperForker.start) }

// forker runs exec.Cmd.Start on one goroutine locked to its OS thread, as
// supervise's own forker does for the maintenance children.
type forker struct {
	reqs chan forkReq
	done chan struct{}
}

type forkReq struct {
	cmd *exec.Cmd
	err chan error
}

func newForker() *forker {
	f := &forker{reqs: make(chan forkReq), done: make(chan struct{})}
	go f.loop()
	return f
}

func (f *forker) loop() {
	defer close(f.done)
	// Never unlocked: the thread ends with the goroutine.
	runtime.LockOSThread()
	for r := range f.reqs {
		r.err <- r.cmd.Start()
	}
}

func (f *forker) start(cmd *exec.Cmd) error {
	r := forkReq{cmd: cmd, err: make(chan error, 1)}
	f.reqs <- r
	return <-r.err
}

func (f *forker) close() {
	close(f.reqs)
	<-f.done
}
