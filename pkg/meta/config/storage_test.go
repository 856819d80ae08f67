package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
)

func TestStorageSectionsParseIntoTheLogConfig(t *testing.T) {
	cfg, err := Parse([]byte(`
published: s3://bucket/some/path/
s3: {endpoint: "http://127.0.0.1:7070", region: eu-west-1, path_style: true}
tiers:
  target_seal_bytes: 64KiB
  target_file_bytes: 1MB
  staging_retention: 2h
  staging_max_bytes: 1073741824
  published_snapshot_retention: 30m
  delete_grace: null
  local_delete_grace: 5s
streams: [{name: a, schema: {type: object, properties: {x: {type: integer}}, required: [x]}, sort_by: [x]}]
`), "")
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		t.Fatal(err)
	}
	lc, err := cfg.LogSettings(cfg.Streams[0], "a-v2")
	if err != nil {
		t.Fatal(err)
	}
	if lc.Stream != "a" || lc.Log != "a-v2" {
		t.Fatalf("the log config names stream %q, log %q; want a, a-v2", lc.Stream, lc.Log)
	}
	want := logstore.Config{
		SortBy:                     []string{"x"},
		TargetSealBytes:            64 << 10,
		Published:                  "s3://bucket/some/path",
		S3:                         warehouse.S3{Endpoint: "http://127.0.0.1:7070", Region: "eu-west-1", PathStyle: true},
		TargetFileBytes:            1_000_000,
		StagingRetention:           2 * time.Hour,
		StagingMaxBytes:            1 << 30,
		PublishedSnapshotRetention: 30 * time.Minute,
		LocalDeleteGrace:           5 * time.Second,
	}
	if lc.Published != want.Published || lc.S3 != want.S3 || lc.TargetSealBytes != want.TargetSealBytes || lc.TargetFileBytes != want.TargetFileBytes ||
		lc.StagingRetention != want.StagingRetention || lc.StagingMaxBytes != want.StagingMaxBytes ||
		lc.PublishedSnapshotRetention != want.PublishedSnapshotRetention || lc.DeleteGrace != 0 || lc.LocalDeleteGrace != want.LocalDeleteGrace ||
		strings.Join(lc.SortBy, ",") != "x" {
		t.Fatalf("log config\n%+v, want\n%+v", lc, want)
	}

	// Local prefixes: a file:// URL and a directory are stored as the
	// absolute directory; a relative one is resolved like root, against
	// the working directory; none stores the default <root>/published
	// relative to the log's directory, so a root moved whole keeps its
	// tables beside it.
	wd, _ := os.Getwd()
	for _, tc := range []struct{ published, stored string }{
		{"", "../../published"},
		{"file:///srv/pub/", "/srv/pub"},
		{"file://localhost/srv/pub", "/srv/pub"},
		{"/srv/pub", "/srv/pub"},
		{"pub/tables", filepath.Join(wd, "pub", "tables")},
	} {
		cfg, err := Parse([]byte("published: "+tc.published+"\nstreams: [{name: a}]"), "")
		if err == nil {
			err = cfg.Validate()
		}
		if err != nil {
			t.Fatalf("published %q: %v", tc.published, err)
		}
		lc, err := cfg.LogSettings(cfg.Streams[0], "a")
		if err != nil || lc.Published != tc.stored || lc.S3 != (warehouse.S3{}) {
			t.Fatalf("published %q: stored %+v (%v), want %q", tc.published, lc, err, tc.stored)
		}
	}
}

func TestStorageSectionErrorsNameTheKey(t *testing.T) {
	const secret = "wJalrXUtnFEMI-K7MDENG"
	cases := []struct{ name, yaml, want string }{
		{"unknown s3 key", "s3: {endpont: x}", "unknown key s3.endpont (known here: endpoint, region, path_style)"},
		{"secret in s3", "published: s3://b/p\ns3: {secret_access_key: " + secret + "}", "key s3.secret_access_key: credentials are never config"},
		{"access key in s3", "published: s3://b/p\ns3: {access_key: AKIA}", "AWS_ACCESS_KEY_ID"},
		{"secret at the top", "aws_secret_access_key: " + secret, "key aws_secret_access_key: credentials are never config"},
		{"credentials in the prefix", "published: s3://AKIA:" + secret + "@bucket/p", "published names credentials in its URL"},
		{"credentials in the endpoint", "published: s3://b/p\ns3: {endpoint: 'http://AKIA:" + secret + "@127.0.0.1:7070'}", "s3.endpoint names credentials"},
		{"unknown tiers key", "tiers: {staging_retension: 1h}", "unknown key tiers.staging_retension"},
		{"another scheme", "published: gs://bucket/p", "has scheme gs://, which streamcast cannot publish to"},
		{"no bucket", "published: s3:///p", "names no bucket"},
		{"relative file URL", "published: file://pub", "is not a file:// URL of an absolute directory"},
		{"root directory", "published: /", "is the root directory"},
		{"tilde", "published: ~/pub", "starts with ~"},
		{"s3 without an s3 prefix", "s3: {region: eu-west-1}", "s3: is set, but neither published (the default <root>/published"},
		{"endpoint not a URL", "published: s3://b/p\ns3: {endpoint: localhost:7070}", `s3.endpoint "localhost:7070" is not an http:// or https:// URL`},
		{"size without meaning", "tiers: {target_file_bytes: lots}", `tiers.target_file_bytes: "lots" is not a size`},
		{"size with an unknown unit", "tiers: {target_file_bytes: 5PB}", `tiers.target_file_bytes: "5PB" is not a size`},
		{"size too large", "tiers: {staging_max_bytes: 9000000TiB}", "is too large"},
		{"negative size", "tiers: {staging_max_bytes: -1}", "tiers.staging_max_bytes is negative"},
		{"duration without unit", "tiers: {delete_grace: 60}", "tiers.delete_grace: 60 has no unit"},
		{"negative duration", "tiers: {staging_retention: -1h}", "tiers.staging_retention is negative"},
		{"tiers not a mapping", "tiers: big", "tiers is a mapping of target_seal_bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.yaml+"\nstreams: [{name: a}]\n"), "")
			if err == nil {
				err = cfg.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the error repeats the secret: %v", err)
			}
		})
	}
}
