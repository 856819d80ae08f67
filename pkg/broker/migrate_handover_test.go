package broker

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamcast/streamcast/pkg/broker/control"
	"github.com/streamcast/streamcast/pkg/logstore"
)

// TestMigrateStreamClosesAHandedOverLogItRefuses: the log a migration
// hands over is the runtime's to serve or to close. One the stream's
// metadata does not name as current is refused and closed (its writer
// lock let go), and the stream, which then serves neither log, stops.
func TestMigrateStreamClosesAHandedOverLogItRefuses(t *testing.T) {
	srv := startServer(t, testConfig(t))
	st := srv.reg.Get("trades")
	st.storage = &srv.cfg // as a registered stream: the control API may migrate it
	sv := control.Serve{Stream: st.cfg, Schema: st.sch, Limits: st.limits, Storage: srv.cfg}
	dir := filepath.Join(t.TempDir(), "s", "stray")
	_, err := ctlRuntime{srv}.MigrateStream(context.Background(), sv, func(_ context.Context, _ *logstore.Log, next []logstore.Option) (*logstore.Log, error) {
		return logstore.Create(dir, st.sch, logstore.Config{Stream: "s", Log: "stray"}, next...)
	})
	if err == nil || !strings.Contains(err.Error(), "not the log "+dir) {
		t.Fatalf("MigrateStream handed a log the metadata does not name: %v; want it refused", err)
	}
	lg, err := logstore.Open(dir, logstore.Writer)
	if err != nil {
		t.Fatalf("the refused log is still open: %v", err)
	}
	lg.Close()
	if srv.reg.Get("trades") != nil {
		t.Error("the stream still serves after its new log was refused")
	}
}
