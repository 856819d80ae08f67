package maintain

import (
	"slices"

	"github.com/streamcast/streamcast/pkg/logstore/maintain/maintainargs"
)

// Role names a maintenance step that `streamcast maintain` runs in a loop
// over one or more logs, beside the serving writer. The roles are the
// command line's (package maintainargs, which must import nothing of the
// module); these aliases keep the name every caller of Run uses.
type Role = maintainargs.Role

// The roles Run runs (maintainargs has what each does).
const (
	RoleSeal           = maintainargs.RoleSeal
	RoleCompact        = maintainargs.RoleCompact
	RolePublish        = maintainargs.RolePublish
	RoleClean          = maintainargs.RoleClean
	RoleCleanPublished = maintainargs.RoleCleanPublished
	RoleRetain         = maintainargs.RoleRetain
)

func knownRole(r Role) bool { return slices.Contains(maintainargs.Roles(), r) }

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
