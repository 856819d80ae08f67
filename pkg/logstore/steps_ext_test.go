package logstore_test

import (
	"context"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/tier"
)

// This package's tests run the maintenance steps of pkg/logstore/tier,
// which imports this package; see logstore.Steps.
func init() {
	s := &logstore.Steps
	s.Seal, s.Compact, s.Publish = tier.Seal, tier.Compact, tier.Publish
	s.Evict, s.PublishAll = tier.Evict, tier.PublishAll
	s.Clean = func(ctx context.Context, l *logstore.Log) (logstore.Cleaned, error) {
		c, err := tier.Clean(ctx, l)
		return logstore.Cleaned(c), err
	}
	s.CleanPublished = func(ctx context.Context, l *logstore.Log) (logstore.Cleaned, error) {
		c, err := tier.CleanPublished(ctx, l)
		return logstore.Cleaned(c), err
	}
	s.DeleteBelow = func(ctx context.Context, l *logstore.Log, floor int64) (logstore.Deleted, error) {
		d, err := tier.DeleteBelow(ctx, l, floor)
		return logstore.Deleted(d), err
	}
}
