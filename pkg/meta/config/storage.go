package config

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/meta"
)

// This file holds how durable streams' logs are stored: the published:
// prefix, the s3: section and the tiers: section of the config, what of
// them each log stores when serve creates it, and the check that an
// existing log agrees with them when serve opens it.

// Tiers is the tiers: section: the sizes, retention and grace periods
// of the logs' tiers. A zero field means logstore's default. Each log
// stores these when serve creates it and keeps them for its life; see
// CheckStored for what serve does when the config later differs.
type Tiers struct {
	// TargetSealBytes is the Arrow size of the rows a seal cuts into one
	// Parquet file (logstore.DefaultTargetSealBytes).
	TargetSealBytes int64 `yaml:"target_seal_bytes"`
	// TargetFileBytes is the on-disk size compaction merges files up to
	// (logstore.DefaultTargetFileBytes).
	TargetFileBytes int64 `yaml:"target_file_bytes"`
	// StagingRetention keeps published local files this long, for fast
	// replays (logstore.DefaultStagingRetention).
	StagingRetention time.Duration `yaml:"staging_retention"`
	// StagingMaxBytes bounds a log's local files: past it the oldest
	// published ones go whatever their age (logstore.DefaultStagingMaxBytes).
	StagingMaxBytes int64 `yaml:"staging_max_bytes"`
	// PublishedSnapshotRetention is how long old snapshots of the published
	// table stay readable (logstore.DefaultPublishedSnapshotRetention).
	PublishedSnapshotRetention time.Duration `yaml:"published_snapshot_retention"`
	// DeleteGrace delays deleting a published object no kept snapshot
	// references (logstore.DefaultDeleteGrace).
	DeleteGrace time.Duration `yaml:"delete_grace"`
	// LocalDeleteGrace delays deleting a local file taken out of the log
	// (logstore.DefaultLocalDeleteGrace).
	LocalDeleteGrace time.Duration `yaml:"local_delete_grace"`
	// RetentionGrace is how long the retention pass (maintain.retain_every)
	// waits after publishing a stream's new floor before it deletes the
	// rows below it, so readers that resolved the stream before the floor
	// moved can finish (logstore.DefaultRetentionGrace). The window itself
	// is the stream's, set with `streamcast retain`.
	RetentionGrace time.Duration `yaml:"retention_grace"`
}

// tierSetting ties a tiers: key to its field in Tiers and in
// logstore.Config. Exactly one of the pointer pairs is set.
type tierSetting struct {
	key            string
	bytes, stored  *int64
	dur, storedDur *time.Duration
}

// settings lists t's fields beside those of the log config lc (nil: none).
func (t *Tiers) settings(lc *logstore.Config) []tierSetting {
	if lc == nil {
		lc = &logstore.Config{}
	}
	return []tierSetting{
		{key: "target_seal_bytes", bytes: &t.TargetSealBytes, stored: &lc.TargetSealBytes},
		{key: "target_file_bytes", bytes: &t.TargetFileBytes, stored: &lc.TargetFileBytes},
		{key: "staging_retention", dur: &t.StagingRetention, storedDur: &lc.StagingRetention},
		{key: "staging_max_bytes", bytes: &t.StagingMaxBytes, stored: &lc.StagingMaxBytes},
		{key: "published_snapshot_retention", dur: &t.PublishedSnapshotRetention, storedDur: &lc.PublishedSnapshotRetention},
		{key: "delete_grace", dur: &t.DeleteGrace, storedDur: &lc.DeleteGrace},
		{key: "local_delete_grace", dur: &t.LocalDeleteGrace, storedDur: &lc.LocalDeleteGrace},
		{key: "retention_grace", dur: &t.RetentionGrace, storedDur: &lc.RetentionGrace},
	}
}

// tierKeys are the keys tiers: may hold.
var tierKeys = func() []string {
	var t Tiers
	var out []string
	for _, s := range t.settings(nil) {
		out = append(out, s.key)
	}
	return out
}()

// UnmarshalYAML reads the sizes (a number of bytes, or a string with a unit
// such as 8MiB or 512MB) and durations (such as 1h or 30s, like the
// maintain: section) of the tiers: section; 0 or null means the default.
func (t *Tiers) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: tiers is a mapping of %s", n.Line, strings.Join(tierKeys, ", "))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, v := n.Content[i].Value, n.Content[i+1]
		for _, s := range t.settings(nil) {
			if s.key != key {
				continue
			}
			var err error
			if s.bytes != nil {
				*s.bytes, err = parseSize(v)
			} else {
				*s.dur, err = parseInterval(v)
			}
			if err != nil {
				return fmt.Errorf("line %d: tiers.%s: %w", v.Line, key, err)
			}
		}
	}
	return nil
}

var sizeRE = regexp.MustCompile(`^([0-9]+)\s*([KMGT]i?B|B)?$`)

// parseSize reads a byte count: an integer, or a string of digits and a
// unit (B, KB, MB, GB, TB in powers of 1000; KiB, MiB, GiB, TiB in powers
// of 1024); null is 0.
func parseSize(v *yaml.Node) (int64, error) {
	const want = "give a number of bytes, or one with a unit such as 64MiB or 1GB, or 0 for the default"
	if v.Kind != yaml.ScalarNode {
		return 0, errors.New(want)
	}
	switch v.ShortTag() {
	case "!!null":
		return 0, nil
	case "!!int":
		n, err := strconv.ParseInt(v.Value, 0, 64)
		if err != nil {
			return 0, fmt.Errorf("%s is not a number of bytes; %s", v.Value, want)
		}
		return n, nil
	}
	m := sizeRE.FindStringSubmatch(strings.TrimSpace(v.Value))
	if m == nil {
		return 0, fmt.Errorf("%q is not a size; %s", v.Value, want)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is too large", v.Value)
	}
	unit := map[string]int64{
		"": 1, "B": 1,
		"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
	}[m[2]]
	if n > math.MaxInt64/unit {
		return 0, fmt.Errorf("%q is too large", v.Value)
	}
	return n * unit, nil
}

// credentialWords mark a config key that looks like it holds a secret.
var credentialWords = []string{"secret", "access_key", "accesskey", "key_id", "token", "password", "credential"}

// credentialKey reports whether a key looks like a credential, which no
// part of the config ever holds.
func credentialKey(k string) bool {
	k = strings.ToLower(k)
	return slices.ContainsFunc(credentialWords, func(w string) bool { return strings.Contains(k, w) })
}

// credentialsNote is the way out for a credential found in the config.
const credentialsNote = "credentials are never config: give serve the standard AWS environment " +
	"(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN) or a profile (AWS_PROFILE); " +
	"its maintenance children inherit it"

// layout is the layout of c's root and published prefix (pkg/meta owns
// it: every path of a stream or log, and the default <root>/published).
func (c *Config) layout() (meta.Layout, error) {
	lay, err := meta.NewLayout(c.Root, c.Published)
	if err != nil {
		return meta.Layout{}, PublishedError(err)
	}
	return lay, nil
}

// PublishedError words an error of warehouse.Parse (through
// meta.NewLayout) about published:, for a person.
func PublishedError(err error) error {
	if errors.Is(err, warehouse.ErrCredentials) {
		return errors.New("published names credentials in its URL; " + credentialsNote)
	}
	return fmt.Errorf("published: %w, or leave it out for <root>/published", err)
}

// describePublished names the prefix p for an error message: the default
// spelled as such, with where it is.
func describePublished(p warehouse.Location, isDefault bool) string {
	if isDefault {
		return "the default <root>/published (" + p.String() + ")"
	}
	return p.String()
}

// validateStorage checks published:, s3: and tiers:. The s3: section
// reaches an s3:// published prefix and an s3:// replicate.destination alike.
func (c *Config) validateStorage() error {
	lay, err := c.layout()
	if err != nil {
		return err
	}
	// A destination that does not parse is validateReplicate's to refuse.
	dest, err := warehouse.Parse(c.Replicate.Destination, "")
	if c.S3 != (warehouse.S3{}) && lay.Published().S3 == "" && err == nil && dest.S3 == "" {
		return fmt.Errorf("s3: is set, but neither published (%s) nor replicate.destination is an s3:// URL; set published: s3://bucket/path, or remove the s3: section",
			describePublished(lay.Published(), lay.DefaultPublished()))
	}
	if e := c.S3.Endpoint; e != "" {
		u, err := url.Parse(e)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			return fmt.Errorf("s3.endpoint %q is not an http:// or https:// URL of an S3 service (such as https://s3.eu-west-1.amazonaws.com)", e)
		case u.User != nil:
			return errors.New("s3.endpoint names credentials in its URL; " + credentialsNote)
		}
	}
	for _, s := range c.Tiers.settings(nil) {
		if (s.bytes != nil && *s.bytes < 0) || (s.dur != nil && *s.dur < 0) {
			return fmt.Errorf("tiers.%s is negative; give a positive value, or 0 for the default", s.key)
		}
	}
	return nil
}

// LogSettings is what serve stores in the log named log it creates for st:
// the stream and log names (they name its published table for its life),
// and where and how it publishes.
func (c *Config) LogSettings(st Stream, log string) (logstore.Config, error) {
	lay, err := c.layout()
	if err != nil {
		return logstore.Config{}, err
	}
	lc := logstore.Config{Stream: st.Name, Log: log, SortBy: st.SortBy, Published: lay.StoredPublished(st.Name, log)}
	if lay.Published().S3 != "" {
		lc.S3 = c.S3
	}
	t := c.Tiers
	for _, s := range t.settings(&lc) {
		if s.bytes != nil {
			*s.stored = *s.bytes
		} else {
			*s.storedDur = *s.dur
		}
	}
	return lc, nil
}

// CheckStored compares what an existing log stores with the config. Where
// the table is published is the log's identity (I8): a published: or s3:
// that differs refuses start-up, naming both values, for serve would
// otherwise publish a log's rows to a second table, or read its history
// from a place it is not. The sizes, retention, graces and sort_by stay as
// the log stored them; one the config sets to another value is returned as
// a warning (key, the log's value, the config's).
func (c *Config) CheckStored(st Stream, dir string, got logstore.Config) ([]string, error) {
	lay, err := c.layout()
	if err != nil {
		return nil, err
	}
	def, err := meta.NewLayout(c.Root, "")
	if err != nil {
		return nil, err
	}
	want := lay.Published()
	have, err := got.PublishedPrefix(dir)
	if err != nil {
		return nil, fmt.Errorf("the log at %s stores a published prefix streamcast cannot read: %w", dir, err)
	}
	if have != want {
		haveDefault := have == def.Published()
		back := fmt.Sprintf("set published: back to %q", have.String())
		if haveDefault {
			back = "leave published: out (or set it to " + have.String() + ")"
		}
		return nil, fmt.Errorf("the log at %s publishes to %s, but the config's published: is %s; "+
			"a log's published table never moves (its history is there), so %s",
			dir, describePublished(have, haveDefault), describePublished(want, lay.DefaultPublished()), back)
	}
	if have.S3 != "" {
		norm := func(s warehouse.S3) warehouse.S3 {
			s.Endpoint = strings.TrimRight(s.Endpoint, "/")
			s.PathStyle = s.PathStyle || s.Endpoint != ""
			return s
		}
		if h, w := norm(got.S3), norm(c.S3); h != w {
			return nil, fmt.Errorf("the log at %s reaches its table %s with s3: {endpoint: %q, region: %q, path_style: %t}, "+
				"but the config's s3: is {endpoint: %q, region: %q, path_style: %t}; a log keeps the S3 settings it was created with, "+
				"so set s3: back to them (a `streamcast maintain` run by hand may override them with --s3-endpoint and --s3-region)",
				dir, have.S3, h.Endpoint, h.Region, h.PathStyle, w.Endpoint, w.Region, w.PathStyle)
		}
	}
	var warns []string
	if got.Stream != st.Name {
		// The names are the table's identity, kept where the log moves;
		// serving it under another stream name is allowed, and said.
		warns = append(warns, fmt.Sprintf("names: the log belongs to stream %q as log %q and keeps publishing to the table %s, the config serves it as stream %q",
			got.Stream, got.Log, have.Join(got.Stream, got.Log), st.Name))
	}
	t := c.Tiers
	for _, s := range t.settings(&got) {
		switch {
		case s.bytes != nil && *s.bytes != 0 && *s.bytes != *s.stored:
			warns = append(warns, fmt.Sprintf("tiers.%s: the log keeps %d, the config says %d", s.key, *s.stored, *s.bytes))
		case s.dur != nil && *s.dur != 0 && *s.dur != *s.storedDur:
			warns = append(warns, fmt.Sprintf("tiers.%s: the log keeps %s, the config says %s", s.key, *s.storedDur, *s.dur))
		}
	}
	if !slices.Equal(got.SortBy, st.SortBy) && (len(got.SortBy) > 0 || len(st.SortBy) > 0) {
		warns = append(warns, fmt.Sprintf("sort_by: the log keeps %q, the config says %q", got.SortBy, st.SortBy))
	}
	return warns, nil
}

// MaintainOverrides returns the retention and grace settings of tiers: as
// the policy overrides of serve's maintenance children. A log keeps the
// settings it was created with, so without these a changed config would
// reach new logs only; sizes are not passed, since a log's files were cut
// to its own. Zero fields keep the log's setting.
func (t Tiers) MaintainOverrides() logstore.Override {
	return logstore.Override{
		StagingRetention:           t.StagingRetention,
		StagingMaxBytes:            t.StagingMaxBytes,
		PublishedSnapshotRetention: t.PublishedSnapshotRetention,
		DeleteGrace:                t.DeleteGrace,
		LocalDeleteGrace:           t.LocalDeleteGrace,
		RetentionGrace:             t.RetentionGrace,
	}
}
