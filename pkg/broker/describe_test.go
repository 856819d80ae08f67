package broker

import (
	"reflect"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/meta/config"
)

// TestServerURLReachesTheListenAddressFromThisMachine: an unspecified
// host is the loopback of its family, tls: makes it https, and port 0
// names no server.
func TestServerURLReachesTheListenAddressFromThisMachine(t *testing.T) {
	for _, c := range []struct {
		listen string
		tls    bool
		want   string
	}{
		{"127.0.0.1:8765", false, "http://127.0.0.1:8765"},
		{":8765", false, "http://127.0.0.1:8765"},
		{"0.0.0.0:9000", true, "https://127.0.0.1:9000"},
		{"[::]:8765", false, "http://[::1]:8765"},
		{"example.com:443", true, "https://example.com:443"},
		{"127.0.0.1:0", false, ""},
	} {
		cfg := config.Default()
		cfg.Listen = c.listen
		if c.tls {
			cfg.TLS.CertFile, cfg.TLS.KeyFile = "c.pem", "k.pem"
		}
		got, ok := ServerURL(cfg)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("listen %s (tls %v): %q %v, want %q", c.listen, c.tls, got, ok, c.want)
		}
	}
}

// TestStatsListTheExactlyOncePublishersMarksAndWhoIsConnected: /stats
// has, per exactly-once stream, each id's committed mark and whether a
// connection holds the id; null on the other streams.
func TestStatsListTheExactlyOncePublishersMarksAndWhoIsConnected(t *testing.T) {
	srv := startServer(t, eoConfig(t))
	if got := streamStats(srv, "trades").ExactlyOnce; got != nil {
		t.Fatalf("trades, not exactly-once, lists publishers %+v", got)
	}
	if got := streamStats(srv, "eo").ExactlyOnce; got == nil || len(got) != 0 {
		t.Fatalf("eo before any publisher: %#v, want []", got)
	}
	b := dialEO(t, srv, "b")
	if r := b.roundTrip(seqFrame("b", 1, 3)); r.Error != "" {
		t.Fatalf("publish: %+v", r)
	}
	a := dialEO(t, srv, "a")
	if r := a.roundTrip(seqFrame("a", 1, 1)); r.Error != "" {
		t.Fatalf("publish: %+v", r)
	}
	want := []PublisherStats{{ID: "a", LastSeq: 1, LastOffset: 4, Connected: true}, {ID: "b", LastSeq: 3, LastOffset: 3, Connected: true}}
	if got := streamStats(srv, "eo").ExactlyOnce; !reflect.DeepEqual(got, want) {
		t.Fatalf("eo: %+v, want %+v", got, want)
	}
	_ = b.ws.Close()
	want[1].Connected = false
	waitFor(t, "b to be shown disconnected", 10*time.Second, func() bool {
		return reflect.DeepEqual(streamStats(srv, "eo").ExactlyOnce, want)
	})
}
