package logstore

import (
	"slices"
)

// The roles Maintain runs (maintainargs.go has what each does).

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
