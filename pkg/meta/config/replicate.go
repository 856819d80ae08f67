package config

import (
	"fmt"
	"path/filepath"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/streamcast/streamcast/pkg/logstore/replica"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
)

// Replicate is the replicate: section: where `streamcast replicate`, which
// serve runs as a child over the logs of the streams with replicate: true,
// ships their WAL, and how often. A zero field means the default.
type Replicate struct {
	// Destination is where the replicas go, as published: is read:
	// s3://bucket/path, file:///dir or a directory (a relative one is
	// resolved against the working directory, as root is). The replica of
	// log L of stream S lives at <destination>/S/L/. It must lie outside
	// the root: the replica exists to outlive it. Empty keeps the replicas
	// beside the published tables, at <published>/S/_wal/L/, which is
	// allowed only while published: lies outside the root.
	Destination string `yaml:"destination"`
	// SyncInterval is how often the WAL is shipped. A lost machine loses
	// at most about this much of what is acknowledged and not yet
	// published: the RPO with replication (replica.DefaultSyncInterval, 500ms).
	SyncInterval time.Duration `yaml:"sync_interval"`
	// SnapshotInterval is how often a full snapshot of each buffer.db is
	// written, bounding what a restore replays (1h).
	SnapshotInterval time.Duration `yaml:"snapshot_interval"`
	// SnapshotRetention is how long snapshots, and the WAL after them, are
	// kept in the replica (24h).
	SnapshotRetention time.Duration `yaml:"snapshot_retention"`
}

// DefaultReplicate is replica's defaults.
func DefaultReplicate() Replicate {
	a := replica.DefaultArgs()
	return Replicate{SyncInterval: a.SyncInterval, SnapshotInterval: a.SnapshotInterval, SnapshotRetention: a.SnapshotRetention}
}

// UnmarshalYAML reads the destination and the durations (such as 1s or
// 1h; 0 or null means the default), on top of the defaults.
func (r *Replicate) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: replicate is a mapping of destination, sync_interval, snapshot_interval and snapshot_retention", n.Line)
	}
	*r = DefaultReplicate()
	def := DefaultReplicate()
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, v := n.Content[i].Value, n.Content[i+1]
		var field, fallback *time.Duration
		switch key {
		case "destination":
			if v.Kind != yaml.ScalarNode || (v.ShortTag() != "!!str" && v.ShortTag() != "!!null") {
				return fmt.Errorf("line %d: replicate.destination: give a place such as s3://my-bucket/streamcast-replica or /backup/streamcast-replica", v.Line)
			}
			if v.ShortTag() == "!!str" {
				r.Destination = v.Value
			}
			continue
		case "sync_interval":
			field, fallback = &r.SyncInterval, &def.SyncInterval
		case "snapshot_interval":
			field, fallback = &r.SnapshotInterval, &def.SnapshotInterval
		case "snapshot_retention":
			field, fallback = &r.SnapshotRetention, &def.SnapshotRetention
		default:
			continue // conf refuses unknown keys, naming them
		}
		d, err := parseInterval(v)
		if err != nil {
			return fmt.Errorf("line %d: replicate.%s: %w", v.Line, key, err)
		}
		if d == 0 {
			d = *fallback
		}
		*field = d
	}
	return nil
}

// Args is the replicate child's command line for logs, reporting on
// readyFD, with the cadence of the replicate: section; ReplicaArgs adds
// the destination.
func (r Replicate) Args(logs []string, readyFD int) replica.Args {
	return replica.Args{Logs: logs, SyncInterval: r.SyncInterval, SnapshotInterval: r.SnapshotInterval, SnapshotRetention: r.SnapshotRetention, ReadyFD: readyFD}
}

// ReplicaArgs is serve's command line for its replicate child: the
// cadence, and the destination resolved to an absolute directory or
// s3:// URL with the s3: section that reaches it. It carries no
// credentials: the child inherits the AWS environment. The logs and the
// ready descriptor are the supervisor's to fill in.
func (c *Config) ReplicaArgs() (replica.Args, error) {
	a := c.Replicate.Args(nil, 0)
	dest, err := c.ReplicaDestination()
	if err != nil {
		return replica.Args{}, err
	}
	a.Destination, a.S3 = dest.Location.String(), dest.S3
	return a, nil
}

// ReplicaDestination is replicate.destination parsed: the zero Destination
// when it is not set (the replicas go beside the published tables). An
// s3:// destination is reached with the s3: section.
func (c *Config) ReplicaDestination() (replica.Destination, error) {
	loc, err := warehouse.Parse(c.Replicate.Destination, "")
	if err != nil {
		return replica.Destination{}, keyError("replicate.destination", fmt.Errorf("replicate.destination: %w", err))
	}
	d := replica.Destination{Location: loc}
	if loc.S3 != "" {
		d.S3 = c.S3
	}
	return d, nil
}

// replicaExample is the way out every refusal of a replica's place shows.
const replicaExample = "such as replicate: {destination: s3://my-bucket/streamcast-replica} or /backup/streamcast-replica"

// validateReplicate refuses intervals replicate would refuse, and a
// replica that would not outlive the root: a destination inside it, or, for
// a stream (or a control: profile) with replicate: true, a published prefix
// inside its root (restore reads the stream's metadata and tables there,
// and without a destination the replica sits there too). Paths are made
// absolute and clean and their symlinks resolved before they are compared.
func (c *Config) validateReplicate() error {
	r := c.Replicate
	a := r.Args([]string{"-"}, 0)
	if err := a.Validate(); err != nil {
		return keyErrorf("replicate", "replicate: %v (the keys are destination, sync_interval, snapshot_interval and snapshot_retention)", err)
	}
	dest, err := c.ReplicaDestination()
	if err != nil {
		return err
	}
	root, err := filepath.Abs(c.Root)
	if err != nil {
		return keyErrorf("root", "find root %q: %v", c.Root, err)
	}
	if d := dest.Location.Dir; d != "" && replica.Inside(root, d) {
		return keyErrorf("replicate.destination", "replicate.destination %s is inside root %s, so losing the root loses the replica too; "+
			"set replicate.destination to a place outside the root, %s", d, root, replicaExample)
	}
	for i, s := range c.Streams {
		if !s.Replicate || !s.Durable || s.Upstream != "" {
			continue // refused with the stream's other keys
		}
		if d := dest.Location.Dir; d != "" && replica.Inside(filepath.Join(d, s.Name), root) {
			return keyErrorf("replicate.destination", "replicate.destination %s would put stream %q's replicas at %s, which holds root %s; "+
				"set replicate.destination to a place outside the root, %s", d, s.Name, filepath.Join(d, s.Name), root, replicaExample)
		}
		label := fmt.Sprintf("stream %q (streams[%d])", s.Name, i)
		if err := c.checkReplicated(fmt.Sprintf("streams[%d].replicate", i), label, dest); err != nil {
			return err
		}
	}
	for _, name := range c.Control.ProfileNames() {
		if !c.Control.Profiles[name].Replicate {
			continue
		}
		pc, err := c.ProfileConfig(name)
		if err != nil {
			return err
		}
		key := "control.profiles." + name + ".replicate"
		proot, err := filepath.Abs(pc.Root)
		if err != nil {
			return keyErrorf(key, "find control.profiles.%s.root %q: %v", name, pc.Root, err)
		}
		if d := dest.Location.Dir; d != "" && replica.Inside(proot, d) {
			return keyErrorf(key, "control.profiles.%s has replicate: true, but replicate.destination %s is inside its root %s, so losing that root loses the replicas too; "+
				"set replicate.destination to a place outside it, %s", name, d, proot, replicaExample)
		}
		if err := pc.checkReplicated(key, fmt.Sprintf("control.profiles.%s", name), dest); err != nil {
			return err
		}
	}
	return nil
}

// checkReplicated refuses a replicated stream's published prefix inside
// c's root; label names the stream (or profile) in the message.
func (c *Config) checkReplicated(key, label string, dest replica.Destination) error {
	lay, err := c.layout()
	if err != nil {
		return nil // validateStorage says what is wrong with published:
	}
	root, err := filepath.Abs(c.Root)
	if err != nil {
		return nil
	}
	pub := lay.Published().Dir
	if pub == "" || !replica.Inside(root, pub) {
		return nil
	}
	where := describePublished(lay.Published(), lay.DefaultPublished())
	if dest.Location.IsZero() {
		return keyErrorf(key, "%s has replicate: true, but its replica would go beside its tables under published %s, inside root %s, so losing the root loses the replica too; "+
			"set replicate.destination and published: to places outside the root, such as replicate: {destination: /backup/streamcast-replica} and published: /backup/streamcast-published (or s3:// URLs)",
			label, where, root)
	}
	return keyErrorf(key, "%s has replicate: true, but published is %s, inside root %s, and restore rebuilds a lost root from the published metadata and tables as well as the replica; "+
		"set published: to a place outside the root, such as /backup/streamcast-published or s3://my-bucket/streamcast",
		label, where, root)
}
