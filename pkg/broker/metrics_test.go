package broker

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/streamcast/streamcast/pkg/wire"
)

// scrape reads /metrics over raw HTTP and parses it with Prometheus's own
// text parser.
func scrape(t testing.TB, srv *Server) map[string]*dto.MetricFamily {
	t.Helper()
	status, body := httpGet(t, "http://"+srv.Addr().String()+"/metrics")
	if status != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", status, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse as the Prometheus text format: %v\n%s", err, body)
	}
	return fams
}

func httpGet(t testing.TB, url string) (int, string) {
	t.Helper()
	// No keep-alive: no idle connection outlives the request (the
	// servers' leak checks would see it).
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// metricValue returns the value of the series of family name whose labels
// are exactly labels (name, value pairs): a counter's or gauge's value, a
// histogram's sample count. It fails the test when there is no such series.
func metricValue(t testing.TB, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	v, ok := lookupMetric(fams, name, labels...)
	if !ok {
		t.Fatalf("/metrics has no series %s%v", name, labels)
	}
	return v
}

func lookupMetric(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
next:
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, lp := range m.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		if len(got) != len(want) {
			continue
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue(), true
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue(), true
		case dto.MetricType_HISTOGRAM:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// TestMetricsAgreeWithAKnownLoad scrapes /metrics after a load whose every
// figure the test counted itself: three publishers of one-row frames and
// five-row batches, two live subscribers, a replay from the first offset,
// refusals of three kinds, a subscriber dropped with 4429 and a live-only
// stream's rows. Each value the scrape reports must equal the test's count.
func TestMetricsAgreeWithAKnownLoad(t *testing.T) {
	const maxBacklog = 200
	cfg := testConfig(t)
	cfg.Limits.MaxBacklog = maxBacklog
	srv := startServer(t, cfg)

	// Two live subscribers, attached before any row.
	var subs []*websocket.Conn
	for range 2 {
		ws, _ := mustDial(t, wsURL(srv, "/trades"))
		subs = append(subs, ws)
	}
	// Three publishers, 20 frames each: ten of one row, ten of five.
	const publishers, framesEach = 3, 20
	rowsEach := 0
	for i := range framesEach {
		rowsEach += 1 + 4*(i%2)
	}
	total := publishers * rowsEach
	var wg sync.WaitGroup
	var pubs []*pubConn
	for range publishers {
		pubs = append(pubs, dialPublisher(t, srv, "trades"))
	}
	for k, p := range pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range framesEach {
				msg := trade(k*1000 + i)
				if i%2 == 1 {
					msg = batch(k*1000+i, 5)
				}
				if err := p.send(msg); err != nil {
					t.Errorf("publisher %d: send: %v", k, err)
					return
				}
				if r, err := p.reply(); err != nil || r.Error != "" {
					t.Errorf("publisher %d: reply %+v, %v", k, r, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, s := range subs {
		for n := range total {
			if _, err := readFrame(t, s); err != nil {
				t.Fatalf("live subscriber %d: frame %d of %d: %v", i, n+1, total, err)
			}
		}
	}
	// A replay of every row: all of them still in the buffer (no
	// maintenance runs in this test).
	rws, g := mustDial(t, wsURL(srv, "/trades?offset=1"))
	if g.Replay == nil || g.Replay.End-g.Replay.Start != int64(total) {
		t.Fatalf("replay window %+v, want %d rows", g.Replay, total)
	}
	for n := range total {
		if _, err := readFrame(t, rws); err != nil {
			t.Fatalf("replay: frame %d of %d: %v", n+1, total, err)
		}
	}
	// Refusals: an unknown stream (no stream takes it), an offset ahead
	// of the frontier and a bad offset on trades.
	for _, path := range []string{"/nope", "/trades?offset=999999", "/trades?offset=x"} {
		if _, _, err := dial(t, wsURL(srv, path)); err == nil {
			t.Fatalf("%s was served, want a refusal", path)
		}
	}
	// Five rows on the live-only stream, in one frame each.
	lp := dialPublisher(t, srv, "live")
	for i := range 5 {
		if r := lp.roundTrip(trade(i)); r.Error != "" {
			t.Fatalf("live publish: %+v", r)
		}
	}
	srv.RecordAuthFailure(http.StatusUnauthorized)
	srv.RecordAuthFailure(http.StatusUnauthorized)
	srv.RecordAuthFailure(http.StatusForbidden)
	srv.RecordAuthFailure(http.StatusTeapot) // not an auth failure: not counted

	// A frame is counted once its write returns, which may be just after
	// its reader got it, and a replay's tiers once its scan ends: scrape
	// until every figure agrees, or report those that never did.
	var fams map[string]*dto.MetricFamily
	var groups float64
	var wrong []string
	for deadline := time.Now().Add(10 * time.Second); ; {
		fams = scrape(t, srv)
		tr := func(name string, labels ...string) float64 {
			return metricValue(t, fams, name, append([]string{"stream", "trades"}, labels...)...)
		}
		groups = tr("streamcast_commit_groups_total")
		wrong = wrong[:0]
		for _, c := range []struct {
			what      string
			got, want float64
		}{
			{"rows committed", tr("streamcast_rows_committed_total"), float64(total)},
			{"commit latency observations (one per group)", tr("streamcast_commit_seconds"), groups},
			{"ack latency observations (one per frame)", tr("streamcast_ack_seconds"), publishers * framesEach},
			{"frames delivered (two live subscribers and one replay)", tr("streamcast_frames_delivered_total"), float64(3 * total)},
			{"rows replayed from the buffer", tr("streamcast_rows_replayed_total", "tier", "buffer"), float64(total)},
			{"rows replayed from local files", tr("streamcast_rows_replayed_total", "tier", "local"), 0},
			{"rows replayed from the published table", tr("streamcast_rows_replayed_total", "tier", "published"), 0},
			{"subscribers", tr("streamcast_subscribers"), 3},
			{"publishers", tr("streamcast_publishers"), publishers},
			{"end offset", tr("streamcast_end_offset"), float64(total + 1)},
			{"buffered rows", tr("streamcast_buffered_rows"), float64(total)},
			{"local files", tr("streamcast_local_files"), 0},
			{"published through", tr("streamcast_published_through"), 0},
			{"publish lag in rows", tr("streamcast_publish_lag_rows"), float64(total)},
			{"4416 refusals", tr("streamcast_refusals_total", "code", "4416"), 1},
			{"4400 refusals", tr("streamcast_refusals_total", "code", "4400"), 1},
			{"4404 refusals of trades", tr("streamcast_refusals_total", "code", "4404"), 0},
			{"4404 refusals no stream took", metricValue(t, fams, "streamcast_refusals_total", "stream", "", "code", "4404"), 1},
			{"4429 drops", tr("streamcast_slow_subscriber_drops_total"), 0},
			{"live rows", metricValue(t, fams, "streamcast_rows_committed_total", "stream", "live"), 5},
			{"live commit groups (a live stream commits nothing)", metricValue(t, fams, "streamcast_commit_groups_total", "stream", "live"), 0},
			{"live ack latency observations", metricValue(t, fams, "streamcast_ack_seconds", "stream", "live"), 5},
			{"401s", metricValue(t, fams, "streamcast_auth_failures_total", "reason", "unauthenticated"), 2},
			{"403s", metricValue(t, fams, "streamcast_auth_failures_total", "reason", "forbidden"), 1},
		} {
			if c.got != c.want {
				wrong = append(wrong, fmt.Sprintf("%s: /metrics says %v, the load counted %v", c.what, c.got, c.want))
			}
		}
		if len(wrong) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, w := range wrong {
		t.Error(w)
	}
	tr := func(name string, labels ...string) float64 {
		return metricValue(t, fams, name, append([]string{"stream", "trades"}, labels...)...)
	}
	if groups < 1 || groups > publishers*framesEach {
		t.Errorf("commit groups %v: want between 1 and one per frame (%d)", groups, publishers*framesEach)
	}
	if b, want := tr("streamcast_bytes_sent_total"), float64(streamStats(srv, "trades").BytesSent); b <= 0 || b > want {
		t.Errorf("bytes sent %v: want positive and at most /stats's later reading %v", b, want)
	}
	if h := fams["streamcast_commit_seconds"]; h.GetType() != dto.MetricType_HISTOGRAM {
		t.Errorf("streamcast_commit_seconds is a %v, want a histogram", h.GetType())
	}

	// A subscriber offered more than max_backlog frames at once is dropped
	// with 4429: counted once. The three subscribers above leave first, and
	// the server must have seen them go: one it still held would be
	// offered the same frames and dropped as well.
	for _, s := range subs {
		s.Close()
	}
	rws.Close()
	waitFor(t, "the closed subscribers to leave", 10*time.Second, func() bool { return streamStats(srv, "trades").Subscribers == 0 })
	dws, _ := mustDial(t, wsURL(srv, "/trades"))
	if r := pubs[0].roundTrip(batch(0, maxBacklog+1)); r.Error != "" {
		t.Fatalf("publish: %+v", r)
	}
	for {
		if _, err := readFrame(t, dws); err != nil {
			if code, _ := closeOf(err); code != wire.CloseTooSlow {
				t.Fatalf("the overflowing subscriber ended with %v, want 4429", err)
			}
			break
		}
	}
	fams = scrape(t, srv)
	if got := tr("streamcast_slow_subscriber_drops_total"); got != 1 {
		t.Errorf("4429 drops: /metrics says %v, want 1", got)
	}
}

// TestMetricsDisabledAnswer404AndStillServe: metrics.enabled: false takes
// /metrics away (404, and the 404 for unknown paths stops naming it) and
// the streams serve as ever.
func TestMetricsDisabledAnswer404AndStillServe(t *testing.T) {
	cfg := testConfig(t)
	cfg.Metrics.Enabled = false
	srv := startServer(t, cfg)
	p := dialPublisher(t, srv, "trades")
	if r := p.roundTrip(batch(0, 3)); r.Error != "" {
		t.Fatalf("publish: %+v", r)
	}
	ws, _ := mustDial(t, wsURL(srv, "/trades?offset=1"))
	for n := range 3 {
		if _, err := readFrame(t, ws); err != nil {
			t.Fatalf("replay frame %d: %v", n+1, err)
		}
	}
	if _, _, err := dial(t, wsURL(srv, "/nope")); err == nil {
		t.Fatal("an unknown stream was served")
	}
	srv.RecordAuthFailure(http.StatusUnauthorized) // a no-op, not a crash
	status, body := httpGet(t, "http://"+srv.Addr().String()+"/metrics")
	if status != http.StatusNotFound {
		t.Fatalf("GET /metrics with metrics disabled: %d %s, want 404", status, body)
	}
	if strings.Contains(body, "/metrics") {
		t.Errorf("the 404 names /metrics, which this server does not serve: %s", body)
	}
	if status, body := httpGet(t, "http://"+srv.Addr().String()+"/elsewhere"); status != http.StatusNotFound || strings.Contains(body, "/metrics") {
		t.Errorf("GET /elsewhere: %d %q, want a 404 that does not name /metrics", status, body)
	}
}

// TestTwoServersInOneProcessEachReportTheirOwn: each server registers its
// metrics with a registry of its own, never Prometheus's global one, so
// two run side by side and each reports only its own rows.
func TestTwoServersInOneProcessEachReportTheirOwn(t *testing.T) {
	a := startServer(t, testConfig(t))
	p := dialPublisher(t, a, "trades")
	if r := p.roundTrip(batch(0, 3)); r.Error != "" {
		t.Fatalf("publish: %+v", r)
	}
	// The second server in a subtest: its leak check, at the subtest's
	// end, must not see the first server's connections as its own.
	t.Run("second", func(t *testing.T) {
		b := startServer(t, testConfig(t))
		p := dialPublisher(t, b, "trades")
		if r := p.roundTrip(batch(0, 1)); r.Error != "" {
			t.Fatalf("publish: %+v", r)
		}
		for srv, want := range map[*Server]float64{a: 3, b: 1} {
			if got := metricValue(t, scrape(t, srv), "streamcast_rows_committed_total", "stream", "trades"); got != want {
				t.Errorf("server at %s reports %v rows committed, want its own %v", srv.Addr(), got, want)
			}
		}
	})
}

// TestAPeersOwnCloseIsNoRefusal: the server echoes a peer's close with
// the peer's code; a client that closes with 4416 itself was refused
// nothing, and is not counted.
func TestAPeersOwnCloseIsNoRefusal(t *testing.T) {
	srv := startServer(t, testConfig(t))
	ws, _ := mustDial(t, wsURL(srv, "/trades"))
	msg := websocket.FormatCloseMessage(wire.CloseNotReplayable, "")
	if err := ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, _, err := ws.ReadMessage(); err == nil {
		t.Fatal("the server did not answer the close")
	}
	waitFor(t, "the subscriber to leave", 10*time.Second, func() bool { return streamStats(srv, "trades").Subscribers == 0 })
	if got := metricValue(t, scrape(t, srv), "streamcast_refusals_total", "stream", "trades", "code", "4416"); got != 0 {
		t.Errorf("4416 refusals %v after the peer itself closed with 4416, want 0", got)
	}
}
