package logstore_test

import (
	"context"
	"slices"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/maintain"
	"github.com/streamcast/streamcast/pkg/logstore/maintain/maintainargs"
)

// The crash, S3-failure and freshness tests of this package run the real
// maintenance runner; see logstore.RunRole.
func init() {
	// The log's own roles: retain's step is the stream's retention pass,
	// which lives in pkg/meta, above this package.
	logstore.RoleNames = slices.DeleteFunc(maintainargs.RoleNames(), func(r string) bool { return r == string(maintain.RoleRetain) })
	logstore.RunRole = func(ctx context.Context, role string, dirs []string, o logstore.RoleRun) error {
		return maintain.Run(ctx, maintain.Role(role), dirs, maintain.Options{
			Every: o.Every, FlushEvery: o.FlushEvery, RepeatEvery: o.RepeatEvery, Logger: o.Logger, Ready: o.Ready,
		})
	}
}
