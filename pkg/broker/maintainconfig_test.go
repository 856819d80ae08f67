package broker

import (
	"strings"
	"testing"

	"github.com/streamcast/streamcast/pkg/meta/config"
)

func TestNewRefusesChildrenWithoutAnExecutable(t *testing.T) {
	cfg := testConfig(t)
	cfg.Maintain = config.DefaultMaintain()
	if _, err := New(cfg, Options{}); err == nil || !strings.Contains(err.Error(), "Options.Executable") || !strings.Contains(err.Error(), "maintain: false") {
		t.Fatalf("got %v", err)
	}
	cfg.Streams = cfg.Streams[1:] // live-only streams: nothing to maintain
	if _, err := New(cfg, Options{}); err != nil {
		t.Fatal(err)
	}
}
