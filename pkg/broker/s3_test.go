//go:build linux

package broker

import (
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
