package logstore

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/streamcast/streamcast/pkg/logstore/parquetfile"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/schema"
)

// Defaults of the Config fields left at zero.
const (
	// DefaultTargetSealBytes is the Arrow size a seal aims for.
	DefaultTargetSealBytes = 8 << 20
	// DefaultTargetFileBytes is the on-disk size compaction merges small
	// files up to.
	DefaultTargetFileBytes = 512 << 20
	// DefaultStagingRetention is how long a published local file is kept
	// for fast local reads before clean may delete it.
	DefaultStagingRetention = time.Hour
	// DefaultStagingMaxBytes bounds the local files of a log: past it,
	// clean deletes the oldest published ones whatever their age.
	DefaultStagingMaxBytes = 4 << 30
	// DefaultPublishedSnapshotRetention is how long clean-published keeps
	// old snapshots of the published table.
	DefaultPublishedSnapshotRetention = time.Hour
	// DefaultDeleteGrace is how long a published object nobody references
	// any more waits in the delete queue, so readers that planned a scan
	// against older metadata can finish.
	DefaultDeleteGrace = time.Hour
	// DefaultLocalDeleteGrace is the same for local files replaced by
	// compaction or evicted by clean.
	DefaultLocalDeleteGrace = time.Minute
	// DefaultRetentionGrace is how long the retention pass waits between
	// publishing a new floor and deleting below it, so readers that
	// resolved the stream before the floor moved can finish.
	DefaultRetentionGrace = time.Hour
)

// Config is a log's configuration, stored in buffer.db at Create and read
// back by Open. The shape (SortBy, Published, TargetFileBytes) never
// changes for the life of the log; the retention and grace settings are
// defaults that a maintenance process may override (logstore.RoleOptions.Override).
type Config struct {
	// Stream and Log are the names of the stream the log belongs to and
	// of the log itself. They name the published Iceberg table
	// (namespace = Stream, table = Log), wherever the log's directory
	// later sits. Create requires and stores them; they are never taken
	// from a directory. A log created before logs stored them has none
	// until an open given WithNames stores them (see Log.Names).
	Stream string `json:"stream,omitempty" yaml:"stream"`
	Log    string `json:"log,omitempty" yaml:"log"`

	// Start is the log's first offset; 0 means 1. A successor log (after a
	// migrate) starts at exactly its predecessor's end, a restored one past
	// a fence, so offsets are never reused across the logs of a stream
	// (I1). Create stores it in buffer.db for the log's life: Open reports
	// the stored value whatever a caller passes.
	Start int64 `json:"start,omitempty" yaml:"-"`

	// SortBy names declared scalar columns that order rows within a sealed
	// file and within each row group of a compacted one (then offset).
	// Empty means offset order. It is also the published table's sort order.
	SortBy []string `json:"sort_by" yaml:"sort_by"`
	// TargetSealBytes is the Arrow size of the rows one seal cuts into a
	// file; 0 means DefaultTargetSealBytes. Seals cut at commit-group
	// boundaries, so a file may be larger by up to one group.
	TargetSealBytes int64 `json:"target_seal_bytes" yaml:"target_seal_bytes"`

	// Published is the prefix the log's Iceberg table is published under,
	// as ParseLocation reads it: s3://bucket/path, file:///dir, or a
	// directory (a relative one is relative to the log's directory, so a
	// root moved as a whole keeps its tables beside it). The table lives at
	// <Published>/<Stream>/<Log>/. Empty means ../../published from the
	// log's directory (see legacyPublished).
	Published string `json:"published,omitempty" yaml:"published"`
	// S3 tells how to reach an s3:// prefix. Credentials never go here:
	// they come from the standard AWS environment variables or profile.
	S3 warehouse.S3 `json:"s3,omitzero" yaml:"s3"`
	// TargetFileBytes is the on-disk size compaction aims for; 0 means
	// DefaultTargetFileBytes.
	TargetFileBytes int64 `json:"target_file_bytes,omitempty" yaml:"target_file_bytes"`

	// StagingRetention keeps published local files this long after they
	// were written; 0 means DefaultStagingRetention.
	StagingRetention time.Duration `json:"staging_retention,omitempty" yaml:"staging_retention"`
	// StagingMaxBytes bounds the local files' total size; past it the
	// oldest published ones go whatever their age (unpublished files are
	// never deleted: they hold the only copy). 0 means
	// DefaultStagingMaxBytes.
	StagingMaxBytes int64 `json:"staging_max_bytes,omitempty" yaml:"staging_max_bytes"`
	// PublishedSnapshotRetention is how long old snapshots of the
	// published table stay readable; 0 means
	// DefaultPublishedSnapshotRetention.
	PublishedSnapshotRetention time.Duration `json:"published_snapshot_retention,omitempty" yaml:"published_snapshot_retention"`
	// DeleteGrace delays the deletion of published objects no snapshot
	// references any more; 0 means DefaultDeleteGrace.
	DeleteGrace time.Duration `json:"delete_grace,omitempty" yaml:"delete_grace"`
	// LocalDeleteGrace delays the deletion of local files that left the
	// log's records (replaced by compaction, evicted by clean); 0 means
	// DefaultLocalDeleteGrace.
	LocalDeleteGrace time.Duration `json:"local_delete_grace,omitempty" yaml:"local_delete_grace"`
	// RetentionGrace is how long rows below a newly published retention
	// floor stay before the retention pass deletes them (the stream's
	// retain window is kept in its metadata, not here); 0 means
	// DefaultRetentionGrace.
	RetentionGrace time.Duration `json:"retention_grace,omitempty" yaml:"retention_grace"`
}

// RowGroupBytes is the Arrow size of one row group of a file of the
// compaction target: an eighth of TargetFileBytes, at least 4 KiB.
// Compaction and ingest cut row groups at it.
func (c Config) RowGroupBytes() int64 { return max(c.TargetFileBytes/8, 4<<10) }

// WithDefaults fills zero fields with their defaults.
func (c Config) WithDefaults() Config {
	if c.Start == 0 {
		c.Start = 1
	}
	if c.TargetSealBytes == 0 {
		c.TargetSealBytes = DefaultTargetSealBytes
	}
	if c.SortBy == nil {
		c.SortBy = []string{}
	}
	if c.TargetFileBytes == 0 {
		c.TargetFileBytes = DefaultTargetFileBytes
	}
	for _, p := range c.policies() {
		if *p.v == 0 {
			*p.v = p.def
		}
	}
	return c
}

// Override returns c with the policy fields that o sets (non-zero) taken
// from o. The shape of the log (sort order, published prefix, file
// targets) is not a policy and is never overridden.
func (c Config) Override(o Config) Config {
	ours, theirs := c.policies(), o.policies()
	for i, p := range theirs {
		if *p.v != 0 {
			*ours[i].v = *p.v
		}
	}
	if o.S3.Endpoint != "" {
		c.S3.Endpoint = o.S3.Endpoint
	}
	if o.S3.Region != "" {
		c.S3.Region = o.S3.Region
	}
	if o.S3.PathStyle {
		c.S3.PathStyle = true
	}
	return c
}

// policy is one of a Config's retention and grace settings: where it is
// (a duration is an int64 underneath) and its default.
type policy struct {
	name string // its key in the config file
	v    *int64
	def  int64
}

// policies lists c's retention and grace settings, the ones a
// maintenance process may override, in one order for every Config: the one
// list WithDefaults, Override and Validate walk, so a new setting cannot be
// defaulted and forgotten by the override, or the other way round.
func (c *Config) policies() []policy {
	return []policy{
		{"staging_retention", (*int64)(&c.StagingRetention), int64(DefaultStagingRetention)},
		{"staging_max_bytes", &c.StagingMaxBytes, DefaultStagingMaxBytes},
		{"published_snapshot_retention", (*int64)(&c.PublishedSnapshotRetention), int64(DefaultPublishedSnapshotRetention)},
		{"delete_grace", (*int64)(&c.DeleteGrace), int64(DefaultDeleteGrace)},
		{"local_delete_grace", (*int64)(&c.LocalDeleteGrace), int64(DefaultLocalDeleteGrace)},
		{"retention_grace", (*int64)(&c.RetentionGrace), int64(DefaultRetentionGrace)},
	}
}

// Validate checks c, the config of a log in dir, against its schema.
func (c Config) Validate(dir string, sch *schema.Schema) error {
	if c.Start < 1 {
		return fmt.Errorf("start is %d; a log's first offset is 1 or more (or 0 for 1)", c.Start)
	}
	if c.TargetSealBytes < 0 {
		return fmt.Errorf("target_seal_bytes is %d; it must be positive (or 0 for the default %d)", c.TargetSealBytes, DefaultTargetSealBytes)
	}
	if c.TargetFileBytes < 0 {
		return fmt.Errorf("target_file_bytes is negative; it must be positive (or 0 for the default %d)", DefaultTargetFileBytes)
	}
	for _, p := range c.policies() {
		if *p.v < 0 {
			return fmt.Errorf("%s is negative; it must be positive (or 0 for the default)", p.name)
		}
	}
	if _, err := c.PublishedPrefix(dir); err != nil {
		return err
	}
	for _, n := range []struct{ key, v string }{{"stream", c.Stream}, {"log", c.Log}} {
		if n.v == "" {
			return fmt.Errorf("no %s name given; a log stores its stream's name and its own when it is created, and keeps them for life (they name its published table), never taking them from its directory", n.key)
		}
		if err := checkPathName(n.v); err != nil {
			return fmt.Errorf("%s name: %w", n.key, err)
		}
	}
	if c.S3.Endpoint != "" {
		u, err := url.Parse(c.S3.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("s3.endpoint %q is not an http:// or https:// URL", c.S3.Endpoint)
		}
	}
	seen := map[string]bool{}
	for _, name := range c.SortBy {
		if seen[name] {
			return fmt.Errorf("sort_by names %q twice", name)
		}
		seen[name] = true
		if sch.IsAny() {
			return fmt.Errorf("sort_by names %q, but a stream without a schema has no columns to sort by", name)
		}
		i, ok := sch.ColumnIndex(name)
		if !ok {
			return fmt.Errorf("sort_by names %q, which is not a column of the schema", name)
		}
		if !parquetfile.Sortable(sch.Columns()[i].Type) {
			return fmt.Errorf("sort_by names %q of type %s; only scalar columns (integers, numbers, booleans, strings, binary) can order a file", name, sch.Columns()[i].Type)
		}
	}
	return nil
}

// checkPathName checks a stream or log name as one element of a path and
// of an Iceberg identifier. The stream-name grammar is pkg/meta's; this is
// only what the log itself needs to place its table.
func checkPathName(n string) error {
	switch {
	case n == "" || n == "." || n == "..":
		return fmt.Errorf("%q names no directory", n)
	case strings.ContainsAny(n, "/\\\x00"):
		return fmt.Errorf("%q holds a path separator or NUL byte", n)
	case len(n) > 255:
		return fmt.Errorf("%q is longer than 255 bytes", n[:32]+"…")
	}
	return nil
}

// legacyPublished is what an empty stored published prefix means: the
// directory "published" beside the log's stream directory, resolved
// against the log's directory. Logs created before logs stored their
// prefix (and logs created by a caller that gave none) store "". The
// layout's default is defined in pkg/meta, which stores it in every log
// serve creates; meta's tests pin that the two agree.
const legacyPublished = "../../published"

// PublishedPrefix returns where the tables of the log in dir go: the
// stored Published, parsed by ParseLocation with relative directories
// resolved against dir, or for an empty one the legacy default (see
// legacyPublished).
func (c Config) PublishedPrefix(dir string) (warehouse.Location, error) {
	p := c.Published
	if p == "" {
		p = legacyPublished
	}
	return warehouse.Parse(p, dir)
}
