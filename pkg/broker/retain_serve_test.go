//go:build linux

package broker

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/meta/config"
)

// TestARunningServerPicksUpRetainWithoutARestart runs `streamcast serve`
// as a process with its children, then `streamcast retain` beside it: the
// retain child reads the new window at its next pass, publishes the floor
// (the metadata first, then the log), and the server, never restarted,
// refuses a subscribe below it with 4416 evicted (earliest = the floor)
// and starts offset=0 there.
func TestARunningServerPicksUpRetainWithoutARestart(t *testing.T) {
	exe := streamcastExe(t)
	dir := t.TempDir()
	pub, root := filepath.Join(dir, "pub"), filepath.Join(dir, "data")
	if err := os.WriteFile(filepath.Join(dir, "trades.json"), []byte(config.DemoSchema), 0o644); err != nil {
		t.Fatal(err)
	}
	configFile := filepath.Join(dir, "streamcast.yaml")
	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
root: %s
published: file://%s
tiers: {retention_grace: 1h}
streams:
  - name: trades
    schema_file: trades.json
maintain: {seal_every: 100ms, compact_every: 1h, publish_every: 200ms, clean_every: 1h, clean_published_every: 1h, retain_every: 100ms, flush_every: 1s}
`, root, pub)
	if err := os.WriteFile(configFile, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, stderr, addr := startServeProcess(t, exe, configFile, filepath.Join(dir, "addr"))

	ws, g := mustDial(t, "ws://"+addr+"/trades?publish")
	p := &pubConn{t: t, ws: ws, g: g}
	const per, frames = 10, 5
	for i := range frames {
		if r := p.roundTrip(batch(i*per, per)); r.Error != "" || len(r.OK) != per {
			t.Fatalf("publish: %+v", r)
		}
	}
	end := int64(per*frames + 1)
	if _, g := mustDial(t, "ws://"+addr+"/trades?offset=1"); g.Replay == nil || g.Replay.Start != 1 {
		t.Fatalf("before retain, offset=1 replays %+v; want from 1", g.Replay)
	}

	out, err := exec.Command(exe, "retain", "--config", configFile, "trades", "--max-age", "2s").CombinedOutput()
	if err != nil {
		t.Fatalf("streamcast retain: %v\n%s", err, out)
	}
	// Every row is older than the window soon; the floor is then the end.
	var reason string
	waitFor(t, "a subscribe below the floor to be refused as evicted", 30*time.Second, func() bool {
		_, _, err := dial(t, "ws://"+addr+"/trades?offset=1")
		var code int
		code, reason = closeOf(err)
		return code == 4416 && strings.Contains(reason, fmt.Sprintf(`"earliest":%d`, end))
	})
	if !strings.Contains(reason, `"why":"evicted"`) {
		t.Fatalf("refusal %s; want why evicted", reason)
	}
	b, err := os.ReadFile(filepath.Join(pub, "trades", "trades.metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Retention struct {
			MaxAge *string `json:"max_age"`
			Floor  *int64  `json:"floor"`
		} `json:"retention"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.Retention.Floor == nil || *m.Retention.Floor != end {
		t.Fatalf("the published metadata names floor %v; want %d, published before any log refused below it", m.Retention.Floor, end)
	}

	// offset=0 starts at the floor: a row published now is newer than the
	// window (for two seconds) and is the first one replayed.
	if r := p.roundTrip(batch(per*frames, 1)); r.Error != "" || len(r.OK) != 1 || r.OK[0] != end {
		t.Fatalf("publish after the floor: %+v", r)
	}
	sub, g := mustDial(t, "ws://"+addr+"/trades?offset=0")
	if g.Replay == nil || g.Replay.Start != end {
		t.Fatalf("offset=0 replays %+v; want from the floor %d", g.Replay, end)
	}
	f, err := readFrame(t, sub)
	if err != nil || f.Offset != end {
		t.Fatalf("the subscriber from offset=0 got %+v, %v; want offset %d", f, err, end)
	}
	if !strings.Contains(stderr.String(), "published the retention floor") {
		t.Fatalf("serve's log does not show the retain child's pass:\n%s", stderr)
	}
}
