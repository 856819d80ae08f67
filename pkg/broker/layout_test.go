package broker

import (
	"testing"

	"github.com/streamcast/streamcast/pkg/meta"
)

// logDirOf returns where serve keeps the current log of stream under cfg,
// as pkg/meta lays it out.
func logDirOf(t testing.TB, cfg Config, stream string) string {
	t.Helper()
	lay, err := meta.NewLayout(cfg.Root, cfg.Published)
	if err != nil {
		t.Fatal(err)
	}
	return lay.LogDir(stream, meta.LogName(stream, 1))
}
