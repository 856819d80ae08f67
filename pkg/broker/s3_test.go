//go:build linux

package broker

import (
	"testing"

	"github.com/streamcast/streamcast/internal/testkit"
)

const (
	testBucket = testkit.Bucket
	testRegion = testkit.Region
)

// startS3 starts versitygw (testkit.StartS3) with testBucket, stopped when
// the test ends.
func startS3(t *testing.T) *testkit.S3Server { return testkit.StartS3(t, helperForker.Start) }
