package broker

import (
	"strings"
	"testing"

	"github.com/streamcast/streamcast/pkg/meta/config"
)

func TestServerRefusesAnotherSchemaOverAnExistingLog(t *testing.T) {
	cfg := testConfig(t)
	cfg.Streams = cfg.Streams[:1]
	srv := startServer(t, cfg)
	_ = srv.Close()
	cfg.Streams[0].Schema = config.RawJSON(`{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}`)
	s2, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = s2.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "another schema") ||
		!strings.Contains(err.Error(), "stop the server and run streamcast migrate trades") {
		// The way on is migrate, with the server stopped.
		t.Fatalf("got %v", err)
	}
}
