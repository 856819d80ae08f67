package config

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/streamcast/streamcast/pkg/logstore/replica"
)

// Replicate is the replicate: section: how `streamcast replicate`, which
// serve runs as a child over the logs of the streams with replicate: true,
// ships their WAL. A zero field means the default.
type Replicate struct {
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

// UnmarshalYAML reads the durations (such as 1s or 1h; 0 or null means the
// default), on top of the defaults.
func (r *Replicate) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: replicate is a mapping of sync_interval, snapshot_interval and snapshot_retention", n.Line)
	}
	*r = DefaultReplicate()
	def := DefaultReplicate()
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, v := n.Content[i].Value, n.Content[i+1]
		var field, fallback *time.Duration
		switch key {
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
// readyFD.
func (r Replicate) Args(logs []string, readyFD int) replica.Args {
	return replica.Args{Logs: logs, SyncInterval: r.SyncInterval, SnapshotInterval: r.SnapshotInterval, SnapshotRetention: r.SnapshotRetention, ReadyFD: readyFD}
}

// validate refuses intervals replicate would refuse, naming the key.
func (r Replicate) validate() error {
	a := r.Args([]string{"-"}, 0)
	if err := a.Validate(); err != nil {
		return keyErrorf("replicate", "replicate: %v (the keys are sync_interval, snapshot_interval and snapshot_retention)", err)
	}
	return nil
}
