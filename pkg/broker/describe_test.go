package broker

import (
	"reflect"
	"testing"
	"time"
)

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
