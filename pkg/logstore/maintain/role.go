package maintain

import "slices"

// Role names a maintenance step that `streamcast maintain` runs in a loop
// over one or more logs, beside the serving writer.
type Role string

// The roles Run runs.
const (
	// RoleSeal seals full targets every pass, and everything buffered once
	// per FlushEvery.
	RoleSeal Role = "seal"
	// RoleCompact merges small local files into larger ones.
	RoleCompact Role = "compact"
	// RolePublish pushes finished files into the published table every
	// pass, and every file once per FlushEvery.
	RolePublish Role = "publish"
	// RoleClean evicts buffered rows that files hold, takes published
	// local files out past retention and drains the local delete queue.
	RoleClean Role = "clean"
	// RoleCleanPublished expires old snapshots of the published table and
	// deletes what nothing references any more, after the grace.
	RoleCleanPublished Role = "clean-published"
	// RoleRetain runs a stream's retention pass (publish the floor, then
	// delete below it after the grace). The pass is the stream's, not the
	// log's: it reads the stream's metadata, which this package must not
	// import (pkg/meta sits above it), so the caller supplies it
	// (Options.Retain).
	RoleRetain Role = "retain"
)

// Roles returns the roles Run accepts, in the order serve starts them.
func Roles() []Role {
	return []Role{RoleSeal, RoleCompact, RolePublish, RoleClean, RoleCleanPublished, RoleRetain}
}

// RoleNames returns Roles as strings, for usage texts and completions.
func RoleNames() []string {
	roles := Roles()
	names := make([]string, len(roles))
	for i, r := range roles {
		names[i] = string(r)
	}
	return names
}

// CacheRole reports whether role runs over a log kept as a cache of
// another server's stream (a relay's): the roles that keep a cache (seal,
// compact, clean), not those that publish it or serve the published
// table's retention.
func CacheRole(role Role) bool {
	return role == RoleSeal || role == RoleCompact || role == RoleClean
}

func knownRole(r Role) bool { return slices.Contains(Roles(), r) }

// passVerb is what a log line says a pass of role did.
func passVerb(role Role) string {
	switch role {
	case RoleSeal:
		return "sealed"
	case RoleCompact:
		return "compacted"
	case RolePublish:
		return "published"
	case RoleRetain:
		return "retained"
	}
	return "evicted"
}
