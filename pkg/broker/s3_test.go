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

// startS3 starts versitygw (internal/s3test) with testBucket, stopped when
// the test ends.
func startS3(t *testing.T) *s3test.Server { return s3test.Start(t, helperForker.Start) }
