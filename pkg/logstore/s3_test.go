//go:build linux

package logstore

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
)

// The S3 tests run against a real S3 server (versitygw), through the one
// helper every package shares: testkit.StartS3.
const (
	testBucket = testkit.Bucket
	testRegion = testkit.Region
)

// startS3 starts versitygw with testBucket, stopped when the test ends.
func startS3(t testing.TB) *testkit.S3Server { return testkit.StartS3(t, nil) }

// s3LogConfig returns a log config publishing to prefix under the test bucket.
func s3LogConfig(s *testkit.S3Server, prefix string) Config {
	c := tierConfig()
	c.Published = "s3://" + testBucket + "/" + prefix
	c.S3 = warehouse.S3{Endpoint: s.Endpoint(), Region: testRegion, PathStyle: true}
	return c
}

func TestS3ServerHelperServesABucket(t *testing.T) {
	s := startS3(t)
	ctx := context.Background()
	_, err := s.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(testBucket), Key: aws.String("a/b"), Body: strings.NewReader("x")})
	if err != nil {
		t.Fatal(err)
	}
	if keys := s.Keys(t, "a/"); fmt.Sprint(keys) != "[a/b]" {
		t.Fatalf("keys = %v", keys)
	}
	// Wrong credentials are refused.
	bad := s3.New(s3.Options{BaseEndpoint: aws.String(s.Endpoint()), Region: testRegion, UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(s.Access, "wrong", "")})
	if _, err := bad.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(testBucket)}); err == nil {
		t.Fatal("versitygw accepted wrong credentials")
	}
}
