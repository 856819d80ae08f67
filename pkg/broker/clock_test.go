package broker

import (
	"testing"
	"time"
)

// TestRowsAreStampedByTheServersClock: Options.Clock stamps what a durable
// stream commits and what a live-only stream relays, as subscribers see it.
func TestRowsAreStampedByTheServersClock(t *testing.T) {
	at := time.Date(2031, 5, 6, 7, 8, 9, 123456000, time.UTC)
	srv := startServer(t, testConfig(t), Options{Clock: func() time.Time { return at }})
	for _, stream := range []string{"trades", "live"} {
		sub, _ := mustDial(t, wsURL(srv, "/"+stream))
		p := dialPublisher(t, srv, stream)
		if r := p.roundTrip(trade(1)); r.Error != "" {
			t.Fatalf("%s: publish: %+v", stream, r)
		}
		_ = sub.SetReadDeadline(time.Now().Add(20 * time.Second))
		f, err := readFrame(t, sub)
		if err != nil {
			t.Fatalf("%s: %v", stream, err)
		}
		if f.TS != at.UnixMicro() {
			t.Errorf("%s: the row is stamped %d, want the clock's %d", stream, f.TS, at.UnixMicro())
		}
	}
}
