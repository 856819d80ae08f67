package config

import (
	"reflect"
	"slices"
	"strings"

	"github.com/streamcast/streamcast/pkg/schema"
)

// Change says how next differs from s, the declaration a running stream
// serves (sch and nextSch being their compiled schemas), and what to do
// about it; "" when it does not. A running stream takes no change to its
// declaration: reload keeps it serving as it was and logs this.
func (s Stream) Change(sch *schema.Schema, next Stream, nextSch *schema.Schema) string {
	schemaChanged := sch.IsAny() != nextSch.IsAny() || string(sch.JSON()) != string(nextSch.JSON())
	if schemaChanged && s.Durable && next.Durable {
		return "its schema changed, and a durable stream's log keeps the schema it was created with, so the change cannot be applied in place; " +
			"to serve rows of the new schema, stop the server and run streamcast migrate " + s.Name + " (the stream continues in a new log from its end), " +
			"or put the old schema back in the config"
	}
	var keys []string
	if schemaChanged {
		keys = append(keys, "schema")
	}
	if s.Durable != next.Durable {
		keys = append(keys, "durable")
	}
	if s.GroupCommit != next.GroupCommit {
		keys = append(keys, "group_commit")
	}
	if !reflect.DeepEqual(s.MaxReplay, next.MaxReplay) {
		keys = append(keys, "max_replay")
	}
	if s.ExactlyOnce != next.ExactlyOnce {
		keys = append(keys, "exactly_once")
	}
	if !slices.Equal(s.SortBy, next.SortBy) {
		keys = append(keys, "sort_by")
	}
	// A guard added to a running stream is checked when serve restarts:
	// its traffic was admitted already.
	if !reflect.DeepEqual(s.HistoryGuard, next.HistoryGuard) {
		keys = append(keys, "history_guard")
	}
	if s.Limits.Over(Limits{}) != next.Limits.Over(Limits{}) {
		keys = append(keys, "limits")
	}
	if s.Upstream != next.Upstream {
		keys = append(keys, "upstream")
	}
	if s.UpstreamCAFile != next.UpstreamCAFile {
		keys = append(keys, "upstream_ca_file")
	}
	if len(keys) == 0 {
		return ""
	}
	return "its declaration changed (" + strings.Join(keys, ", ") + "), which a running stream does not take; " +
		"it applies when serve restarts, or remove the stream from the config, reload, and add it back " +
		"(its clients are closed with 1001 and reconnect)"
}

// RestartOnly returns the keys of the sections that differ between c, the
// config serve runs with, and next, and that apply only when serve starts
// (every section but streams), in a fixed order.
func (c Config) RestartOnly(next Config) []string {
	var keys []string
	for _, k := range []struct {
		key      string
		was, now any
	}{
		{"listen", c.Listen, next.Listen},
		{"root", c.Root, next.Root},
		{"limits", c.Limits, next.Limits},
		{"maintain", c.Maintain, next.Maintain},
		{"published", c.Published, next.Published},
		{"s3", c.S3, next.S3},
		{"tiers", c.Tiers, next.Tiers},
		{"allowed_origins", strings.Join(c.AllowedOrigins, " "), strings.Join(next.AllowedOrigins, " ")}, // nil and [] alike
		// The files are reloaded; whether serve speaks TLS, and whether
		// it asks for client certificates, is fixed at start.
		{"tls", c.TLS.Mode(), next.TLS.Mode()},
		{"metrics.enabled", c.Metrics.Enabled, next.Metrics.Enabled},
		{"stats", c.Stats.Path(), next.Stats.Path()},
		// The registry, its profiles and bounds are the controller's,
		// made once at start; an operation in flight holds them.
		{"control", c.Control, next.Control},
	} {
		if !reflect.DeepEqual(k.was, k.now) {
			keys = append(keys, k.key)
		}
	}
	return keys
}
