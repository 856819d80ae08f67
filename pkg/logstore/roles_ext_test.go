package logstore_test

import (
	"context"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/maintain"
)

// The crash, S3-failure and freshness tests of this package run the real
// maintenance runner; see logstore.RunRole.
func init() {
	logstore.RoleNames = maintain.RoleNames()
	logstore.RunRole = func(ctx context.Context, role string, dirs []string, o logstore.RoleRun) error {
		return maintain.Run(ctx, maintain.Role(role), dirs, maintain.Options{
			Every: o.Every, FlushEvery: o.FlushEvery, RepeatEvery: o.RepeatEvery, Logger: o.Logger, Ready: o.Ready,
		})
	}
}
