package broker

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/wire"
)

// TestRelayWritesNothingUnderPublished: a relay does not publish, so with
// a published: prefix configured it leaves nothing there (no stream
// metadata copy, no table), however many rows it mirrors.
func TestRelayWritesNothingUnderPublished(t *testing.T) {
	origin := startNode(t, originConfig(t))
	up := wsURL(origin, "/trades")
	rcfg := relayConfig(t, up, true)
	pub := t.TempDir()
	rcfg.Published = pub
	relay := startRelay(t, rcfg)
	sub := collect(t, wsURL(relay, "/trades?offset=0"))
	publishRows(t, up, 0, 200)
	sub.waitLen(t, "the relay's subscriber", 200)
	var found []string
	err := filepath.WalkDir(pub, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != pub {
			found = append(found, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Fatalf("the relay wrote under its published: prefix %s: %v", pub, found)
	}
}

// closeOnceMirrored waits until relay has mirrored n rows, then shuts it
// down (its log and the record of its upstream stay, for a restart).
func closeOnceMirrored(t *testing.T, relay *Server, n int64) {
	t.Helper()
	waitFor(t, "the relay to mirror "+itoa(n)+" rows", 20*time.Second, func() bool {
		return streamStats(relay, "trades").Relay.RowsMirrored == n
	})
	if err := relay.Close(); err != nil {
		t.Fatal(err)
	}
}

// windowedOrigin starts an origin whose "trades" stream replays at most
// 10 rows back (max_replay) and returns the stream's URL.
func windowedOrigin(t *testing.T) string {
	ocfg := originConfig(t)
	ten := int64(10)
	ocfg.Streams[0].MaxReplay = &ten
	return wsURL(startNode(t, ocfg), "/trades")
}

// TestNewRelayStartsAtTheUpstreamsEarliestReplayableOffset: a relay with
// an empty log, of an upstream whose max_replay window no longer reaches
// offset 1, starts at the oldest offset that window holds; its log starts
// there, its frames are the upstream's from there on, and it goes on
// mirroring what is published next.
func TestNewRelayStartsAtTheUpstreamsEarliestReplayableOffset(t *testing.T) {
	up := windowedOrigin(t)
	ref := collect(t, up)
	publishRows(t, up, 0, 100)
	ref.waitLen(t, "the origin's subscriber", 100)

	relay := startRelay(t, relayConfig(t, up, true))
	if r := streamStats(relay, "trades").Relay; r.State != relayMirroring {
		t.Fatalf("a new relay of a stream whose window has moved past 1: %+v", r)
	}
	sub := collect(t, wsURL(relay, "/trades?offset=0"))
	publishRows(t, up, 100, 20)
	ref.waitLen(t, "the origin's subscriber", 120)
	sub.waitLen(t, "the relay's subscriber", 30)
	// The origin's window held [91, 101) when the relay started.
	sameFrames(t, "the relay's subscriber", sub.snapshot(), ref.snapshot()[90:])
	_, g := mustDial(t, wsURL(relay, "/trades?offset=0"))
	if g.Replay == nil || g.Replay.Start != 91 || g.EndOffset != 121 {
		t.Fatalf("the relay's log holds %+v up to %d; want [91, 121)", g.Replay, g.EndOffset)
	}
	// Below its log's start the relay refuses as any server does.
	_, _, err := dial(t, wsURL(relay, "/trades?offset=5"))
	if code, _ := closeOf(err); code != wire.CloseNotReplayable {
		t.Fatalf("offset 5 on a relay whose log starts at 91: %v", err)
	}
}

// TestRelayWithAnUnusedLogStartsAfresh: a relay whose log was made but
// never given a row (serve stopped before the first arrived) starts at the
// upstream's window as it is now when it comes back, rather than being
// refused at the start it had.
func TestRelayWithAnUnusedLogStartsAfresh(t *testing.T) {
	up := windowedOrigin(t)
	rcfg := relayConfig(t, up, true)
	relay := startRelay(t, rcfg)
	if err := relay.Close(); err != nil {
		t.Fatal(err)
	}
	publishRows(t, up, 0, 100)
	relay = startRelay(t, rcfg)
	if r := streamStats(relay, "trades").Relay; r.State != relayMirroring {
		t.Fatalf("a relay with an unused log, restarted after the upstream's window moved on: %+v", r)
	}
	waitFor(t, "the relay to mirror the window's 10 rows", 20*time.Second, func() bool {
		st := streamStats(relay, "trades")
		return st.EndOffset != nil && *st.EndOffset == 101 && st.Relay.RowsMirrored == 10
	})
}

// TestRelayRestartedAgainstARecreatedStreamStops: the relay keeps its
// upstream's stream_id beside its log; restarted against a URL that now
// serves another stream (recreated there, with more rows than the relay
// holds, so resuming would go unnoticed), it serves the rows it has but
// stops mirroring, saying so in /stats with both ids and the way out.
func TestRelayRestartedAgainstARecreatedStreamStops(t *testing.T) {
	ocfg := originConfig(t)
	origin := startNode(t, ocfg)
	up := wsURL(origin, "/trades")
	ows, og := mustDial(t, up)
	// Closed now, not at the end: the origin's Close below would wait its
	// close grace (5 s) for a subscriber nobody reads.
	ows.Close()
	rcfg := relayConfig(t, up, true)
	relay := startRelay(t, rcfg)
	publishRows(t, up, 0, 10)
	closeOnceMirrored(t, relay, 10)

	// The origin again, on the same address, with a new root: a new
	// stream named trades, with a new stream_id.
	if err := origin.Close(); err != nil {
		t.Fatal(err)
	}
	ocfg.Listen = origin.Addr().String()
	ocfg.Root = t.TempDir()
	origin = startNode(t, ocfg)
	_, ng := mustDial(t, up)
	if ng.StreamID == og.StreamID {
		t.Fatalf("the recreated stream has the old stream_id %s", og.StreamID)
	}
	publishRows(t, up, 0, 50)

	relay = startRelay(t, rcfg)
	waitFor(t, "the relay to stop", 20*time.Second, func() bool {
		return streamStats(relay, "trades").Relay.State == relayStopped
	})
	st := streamStats(relay, "trades")
	for _, want := range []string{og.StreamID, ng.StreamID, "aside"} {
		if !strings.Contains(st.Relay.Error, want) {
			t.Errorf("/stats relay error %q does not name %q", st.Relay.Error, want)
		}
	}
	if st.EndOffset == nil || *st.EndOffset != 11 || st.Relay.RowsMirrored != 0 {
		t.Errorf("the relay mirrored the other stream: end %v, mirrored %d", st.EndOffset, st.Relay.RowsMirrored)
	}
	// The rows it kept are still served, under the identity they came with.
	sub := collect(t, wsURL(relay, "/trades?offset=0"))
	sub.waitLen(t, "the relay's subscriber", 10)
	if _, g := mustDial(t, wsURL(relay, "/trades")); g.StreamID != og.StreamID {
		t.Errorf("the relay greets with stream_id %s, its log's is %s", g.StreamID, og.StreamID)
	}
}

// TestRelayTrustsItsUpstreamCAFile: a relay of a wss:// origin whose
// certificate a private CA signed mirrors it with upstream_ca_file: naming
// that CA, and without it serve refuses to start, saying what to set; a
// missing file is refused when the config is validated.
func TestRelayTrustsItsUpstreamCAFile(t *testing.T) {
	ca, err := testkit.NewCA("streamcast relay test CA")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pair, err := ca.Server("streamcast relay test origin")
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, caFile := filepath.Join(dir, "origin.crt"), filepath.Join(dir, "origin.key"), filepath.Join(dir, "ca.crt")
	if err := pair.Write(certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	if err := ca.WriteCert(caFile); err != nil {
		t.Fatal(err)
	}
	ocfg := originConfig(t)
	ocfg.TLS = config.TLS{CertFile: certFile, KeyFile: keyFile}
	origin := startNode(t, ocfg)
	up := "wss://" + origin.Addr().String() + "/trades"

	with := relayConfig(t, up, true)
	with.Streams[0].UpstreamCAFile = caFile
	if err := with.Validate(); err != nil {
		t.Fatal(err)
	}
	srv, err := runUntilReady(t, with, Options{})
	if err != nil {
		t.Fatalf("a relay trusting the origin's CA: %v", err)
	}
	waitFor(t, "the relay mirroring over wss", 20*time.Second, func() bool {
		r := streamStats(srv, "trades").Relay
		return r != nil && r.State == relayMirroring
	})

	bad, err := runUntilReady(t, relayConfig(t, up, true), Options{})
	if bad != nil {
		t.Fatal("serve started a relay whose upstream's certificate it cannot verify")
	}
	if err == nil || !strings.Contains(err.Error(), "upstream_ca_file") {
		t.Fatalf("a relay without the origin's CA: %v; want an error naming upstream_ca_file", err)
	}

	missing := relayConfig(t, up, true)
	missing.Streams[0].UpstreamCAFile = filepath.Join(dir, "nope.crt")
	if err := missing.Validate(); err == nil || !strings.Contains(err.Error(), "upstream_ca_file") || !strings.Contains(err.Error(), "nope.crt") {
		t.Fatalf("Validate with a missing upstream_ca_file: %v", err)
	}
	notPEM := relayConfig(t, up, true)
	notPEM.Streams[0].UpstreamCAFile = keyFile + ".txt"
	if err := os.WriteFile(notPEM.Streams[0].UpstreamCAFile, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := notPEM.Validate(); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("Validate with an upstream_ca_file holding no certificate: %v", err)
	}
}
