package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/wire"
)

// httpPub posts publish requests to one server over one keep-alive
// client.
type httpPub struct {
	t    testing.TB
	base string
	c    *http.Client
}

// newHTTPPub returns a client of the server at addr; register it after the
// server, so its idle connections close before the server's leak check.
func newHTTPPub(t testing.TB, addr string) *httpPub {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &httpPub{t: t, base: "http://" + addr, c: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// post sends body to path with Content-Type ct and the header pairs hdr,
// and returns the status, the reply parsed, and the body as sent.
func (p *httpPub) post(path, ct, body string, hdr ...string) (int, wire.Reply, string) {
	p.t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.base+path, strings.NewReader(body))
	if err != nil {
		p.t.Fatal(err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := p.c.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		p.t.Fatal(err)
	}
	var r wire.Reply
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		_ = wire.ParseReply(b, &r)
	}
	return res.StatusCode, r, strings.TrimSpace(string(b))
}

func (p *httpPub) json(path, body string, hdr ...string) (int, wire.Reply, string) {
	p.t.Helper()
	return p.post(path, "application/json", body, hdr...)
}

func offsetsOf(r wire.Reply) string {
	s := make([]string, len(r.OK))
	for i, o := range r.OK {
		s[i] = strconv.FormatInt(o, 10)
		if o == wire.Null {
			s[i] = "null"
		}
	}
	return strings.Join(s, ",")
}

// streamRows replays the trades stream of the server at addr from its
// first row, by offset.
func streamRows(t *testing.T, addr string) map[int64]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := wire.Subscribe(ctx, "ws://"+addr+"/trades", wire.SubscribeOptions{FromEarliest: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out := map[int64]string{}
	for end := s.Greeting().EndOffset; int64(len(out)) < end-1; {
		m, err := s.Recv(ctx)
		if err != nil {
			t.Fatalf("read the stream back (it ends at %d): %v", end, err)
		}
		out[m.Offset] = string(m.Row)
	}
	return out
}

func TestHTTPPublishCommitsABatchAndAnswersWithItsOffsets(t *testing.T) {
	srv := startServer(t, testConfig(t))
	p := newHTTPPub(t, srv.Addr().String())
	if code, r, body := p.json("/trades", batch(1, 3)); code != 200 || offsetsOf(r) != "1,2,3" || r.Duplicate {
		t.Fatalf("JSON array: %d %s, want 200 {\"ok\":[1,2,3]}", code, body)
	}
	if code, _, body := p.json("/trades", trade(4)); code != 200 || body != `{"ok":[4]}` {
		t.Fatalf("one JSON object: %d %s", code, body)
	}
	nd := trade(5) + "\n\n" + trade(6) + "\n"
	if code, _, body := p.post("/trades", "application/x-ndjson; charset=utf-8", nd); code != 200 || body != `{"ok":[5,6]}` {
		t.Fatalf("NDJSON: %d %s", code, body)
	}
	rows := streamRows(t, srv.Addr().String())
	if len(rows) != 6 || !strings.Contains(rows[6], `"price":6.5`) || !strings.Contains(rows[1], `"price":1.5`) {
		t.Fatalf("the stream holds %v", rows)
	}
	// Counted as a WebSocket publisher's rows are: rows, and one ack
	// latency per request.
	fams := scrape(t, srv)
	if got := metricValue(t, fams, "streamcast_rows_committed_total", "stream", "trades"); got != 6 {
		t.Fatalf("streamcast_rows_committed_total %v, want 6", got)
	}
	if got := metricValue(t, fams, "streamcast_ack_seconds", "stream", "trades"); got != 3 {
		t.Fatalf("streamcast_ack_seconds counts %v acks, want 3", got)
	}
	// A live-only stream answers as it answers a WebSocket publisher.
	if code, _, body := p.json("/live", batch(1, 2)); code != 200 || body != `{"ok":[null,null]}` {
		t.Fatalf("live-only: %d %s", code, body)
	}
}

func TestHTTPPublishWithOneRefusedRowCommitsNothing(t *testing.T) {
	srv := startServer(t, testConfig(t))
	p := newHTTPPub(t, srv.Addr().String())
	bad := "[" + trade(1) + `,{"event_ts":2,"symbol":"X","price":"high","amount":1.0,"side":1},` + trade(3) + "]"
	code, r, body := p.json("/trades", bad)
	if code != http.StatusUnprocessableEntity || r.Error != wire.ReplyRejected || !strings.Contains(r.Detail, "row 1 of the batch") || !strings.Contains(r.Detail, "price") {
		t.Fatalf("a batch with a bad row: %d %s; want 422 rejected naming row 1 and price", code, body)
	}
	nd := trade(1) + "\n\n" + `{"event_ts":2,"symbol":"X","price":2.5,"amount":1.0,"side":"sell"}` + "\n"
	code, r, body = p.post("/trades", "application/x-ndjson", nd)
	if code != http.StatusUnprocessableEntity || !strings.Contains(r.Detail, "row 1 (line 3)") || !strings.Contains(r.Detail, "side") {
		t.Fatalf("NDJSON with a bad row: %d %s; want 422 naming row 1, line 3 and side", code, body)
	}
	if code, r, body = p.json("/trades", "["+trade(1)+","); code != http.StatusBadRequest || r.Error != wire.ReplyBadFrame {
		t.Fatalf("not JSON: %d %s; want 400 bad_frame", code, body)
	}
	if code, r, body = p.post("/trades", "text/plain", batch(1, 2)); code != http.StatusUnsupportedMediaType || !strings.Contains(r.Detail, "application/x-ndjson") {
		t.Fatalf("text/plain: %d %s; want 415", code, body)
	}
	if end := endOffset(srv); end != 1 {
		t.Fatalf("refused batches committed rows: the stream ends at %d", end)
	}
	if code, _, body = p.json("/trades", batch(1, 2)); code != 200 || body != `{"ok":[1,2]}` {
		t.Fatalf("after the refusals: %d %s; want offsets 1 and 2", code, body)
	}
}

func TestHTTPPublishRefusesAsAWebSocketPublisherIsRefused(t *testing.T) {
	cfg := testConfig(t)
	serveOnce(t, cfg, 0, 2)
	lay, err := meta.NewLayout(cfg.Root, cfg.Published)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := meta.NewStore(context.Background(), lay, "trades", cfg.S3)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ms.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m.Retirement = &meta.Retirement{At: 1_700_000_000_000_000, EndOffset: 3}
	m.Logs[0].State = meta.Retired
	if _, err := ms.Commit(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, cfg)
	p := newHTTPPub(t, srv.Addr().String())
	cases := []struct {
		name, path string
		hdr        []string
		code       int
		body       string
	}{
		{"retired", "/trades", nil, 410, `{"error":"retired","at":1700000000000000,"end_offset":3}`},
		{"unknown stream", "/nope", nil, 404, `{"error":"no_such_stream","serves":["live","raw","trades"]}`},
		{"exactly-once on a plain stream", "/live", []string{wire.PublisherHeader, "p1", wire.SeqHeader, "1"}, 412, `{"error":"exactly_once_unavailable","why":"stream"}`},
		{"a query", "/live?publish&offset=1", nil, 400, `"error":"bad_request"`},
		{"seq without id", "/live", []string{wire.SeqHeader, "1"}, 400, `"error":"bad_frame"`},
	}
	for _, c := range cases {
		code, _, body := p.json(c.path, trade(1), c.hdr...)
		if code != c.code || !strings.Contains(body, c.body) {
			t.Errorf("%s: %d %s; want %d with %s", c.name, code, body, c.code, c.body)
		}
	}
}

func TestHTTPPublishBeyondTheLimitsIs413(t *testing.T) {
	cfg := testConfig(t)
	cfg.Limits.MaxMessageBytes = 4096
	cfg.Limits.MaxInbound = 10
	srv := startServer(t, cfg)
	p := newHTTPPub(t, srv.Addr().String())
	big := batch(1, 60) // about 80 bytes a row: over 4096 bytes
	if len(big) <= 4096 {
		t.Fatalf("test body is %d bytes", len(big))
	}
	code, r, body := p.json("/trades", big)
	if code != http.StatusRequestEntityTooLarge || r.Error != wire.ReplyTooBig || !strings.Contains(body, `"max_message_bytes":4096`) {
		t.Fatalf("a body over max_message_bytes: %d %s; want 413 too_big", code, body)
	}
	// Without a Content-Length (chunked), the body is cut at the limit.
	req, _ := http.NewRequest(http.MethodPost, p.base+"/trades", io.MultiReader(strings.NewReader(big)))
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = -1
	res, err := p.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), `"too_big"`) {
		t.Fatalf("a chunked body over max_message_bytes: %d %s", res.StatusCode, b)
	}
	code, r, body = p.json("/trades", batch(1, 11))
	if code != http.StatusRequestEntityTooLarge || r.Error != wire.ReplyTooManyRows || !strings.Contains(body, `"max_inbound":10`) {
		t.Fatalf("11 rows over max_inbound 10: %d %s; want 413 too_many_rows", code, body)
	}
	if code, _, body = p.json("/trades", batch(1, 10)); code != 200 {
		t.Fatalf("10 rows: %d %s", code, body)
	}
	if end := endOffset(srv); end != 11 {
		t.Fatalf("the stream ends at %d, want 11: only the 10 rows of the last request", end)
	}
}

func TestHTTPPublishNeedsThePublishGrant(t *testing.T) {
	cfg := authConfig(t)
	cfg.AllowedOrigins = []string{"https://app.example"}
	srv := startServer(t, cfg)
	p := newHTTPPub(t, srv.Addr().String())
	if code, _, body := p.json("/trades", trade(1)); code != http.StatusUnauthorized {
		t.Fatalf("without credentials: %d %s; want 401", code, body)
	}
	if code, _, body := p.json("/trades", trade(1), "Authorization", basic("bob", bobPW)); code != http.StatusForbidden {
		t.Fatalf("bob (reads only): %d %s; want 403", code, body)
	}
	// A browser page from a foreign site, with alice's credentials.
	if code, _, body := p.json("/trades", trade(1), "Authorization", basic("alice", alicePW), "Origin", "https://evil.example"); code != http.StatusForbidden {
		t.Fatalf("from a foreign origin: %d %s; want 403", code, body)
	}
	if code, _, body := p.json("/trades", trade(1), "Authorization", basic("alice", alicePW), "Origin", "https://app.example"); code != 200 || body != `{"ok":[1]}` {
		t.Fatalf("alice: %d %s; want 200", code, body)
	}
	if end := endOffset(srv); end != 2 {
		t.Fatalf("the stream ends at %d, want 2: only alice's row", end)
	}
}

func exactlyOnceConfig(t testing.TB) config.Config {
	cfg := testConfig(t)
	cfg.Streams[0].ExactlyOnce = true
	return cfg
}

func TestHTTPPublishIsExactlyOnceWithAPublisherAndSeq(t *testing.T) {
	srv := startServer(t, exactlyOnceConfig(t))
	p := newHTTPPub(t, srv.Addr().String())
	as := func(seq int) []string {
		return []string{wire.PublisherHeader, "hook", wire.SeqHeader, strconv.Itoa(seq)}
	}

	if code, _, body := p.json("/trades", "", wire.PublisherHeader, "hook"); code != 200 || !strings.Contains(body, `"publisher":{"id":"hook","last_seq":0,"last_offset":null}`) {
		t.Fatalf("greeting of a fresh id: %d %s", code, body)
	}
	if code, r, body := p.json("/trades", batch(1, 2), as(1)...); code != 200 || offsetsOf(r) != "1,2" || r.Duplicate {
		t.Fatalf("seq 1: %d %s", code, body)
	}
	// The retry of a request whose answer was lost.
	if code, r, body := p.json("/trades", batch(1, 2), as(1)...); code != 200 || body != `{"ok":[1,2],"duplicate":true}` || offsetsOf(r) != "1,2" {
		t.Fatalf("seq 1 again: %d %s; want the same offsets, duplicate", code, body)
	}
	code, r, body := p.json("/trades", batch(5, 1), as(5)...)
	if code != http.StatusConflict || r.Error != wire.ReplySequenceGap || r.Expected != 3 || r.Got != 5 {
		t.Fatalf("seq 5 after 2: %d %s; want 409 sequence_gap expected 3", code, body)
	}
	if end := endOffset(srv); end != 3 {
		t.Fatalf("the stream ends at %d, want 3", end)
	}
	// Overlapping the mark: only the new row is appended.
	if code, r, body := p.json("/trades", batch(2, 2), as(2)...); code != 200 || offsetsOf(r) != "2,3" || r.Duplicate {
		t.Fatalf("seqs 2-3: %d %s", code, body)
	}
	if code, _, body := p.json("/trades", "", wire.PublisherHeader, "hook"); code != 200 || !strings.Contains(body, `"last_seq":3,"last_offset":3`) {
		t.Fatalf("greeting after seq 3: %d %s", code, body)
	}

	// A WebSocket publisher holds the id: the request is refused, and
	// commits nothing.
	ws, g := mustDial(t, wsURL(srv, "/trades?publish&publisher=hook"))
	if g.Publisher == nil || g.Publisher.LastSeq != 3 {
		t.Fatalf("WebSocket greeting: %+v", g.Publisher)
	}
	code, r, body = p.json("/trades", batch(4, 1), as(4)...)
	if code != http.StatusConflict || r.Error != wire.ReplyPublisherBusy {
		t.Fatalf("while a WebSocket holds the id: %d %s; want 409 publisher_busy", code, body)
	}
	wp := &pubConn{t: t, ws: ws, g: g}
	if r := wp.roundTrip("[4," + trade(4) + "]"); r.Error != "" || offsetsOf(r) != "4" {
		t.Fatalf("the WebSocket publisher after the refused request: %+v", r)
	}
	ws.Close()
	waitFor(t, "the WebSocket publisher to let the id go", 10*time.Second, func() bool {
		code, _, _ := p.json("/trades", batch(4, 1), as(4)...)
		return code == 200
	})
	if code, r, body := p.json("/trades", batch(5, 1), as(5)...); code != 200 || offsetsOf(r) != "5" {
		t.Fatalf("seq 5 once the WebSocket left: %d %s", code, body)
	}
}

// TestHTTPPublishAcknowledgesOnlyDurableRows is I3 over HTTP: SIGKILL the
// server right after a 200, and every row any 200 acknowledged is there
// after a restart, at its offset.
func TestHTTPPublishAcknowledgesOnlyDurableRows(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	cfg := testConfig(t)
	cfg.Streams = cfg.Streams[:1]
	cfg.Streams[0].MaxReplay = nil
	ch := startChild(t, cfg)
	p := newHTTPPub(t, ch.addr)
	acked := map[int64]string{}
	for i := 1; i <= 30; i++ {
		code, r, body := p.json("/trades", batch(10*i, 10))
		if code != 200 || len(r.OK) != 10 {
			t.Fatalf("request %d: %d %s", i, code, body)
		}
		for k, o := range r.OK {
			acked[o] = trade(10*i + k)
		}
	}
	// Killed the moment the last 200 is read: nothing of the server's
	// shutdown runs.
	if err := ch.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-ch.done

	ch2 := startChild(t, cfg)
	rows := streamRows(t, ch2.addr)
	for o, sent := range acked {
		got, ok := rows[o]
		if !ok {
			t.Fatalf("offset %d was acknowledged with a 200 but is gone after the kill (%d rows survive)", o, len(rows))
		}
		if !sameRow(t, got, sent) {
			t.Fatalf("offset %d holds %s, acknowledged as %s", o, got, sent)
		}
	}
	if _, err := net.ResolveTCPAddr("tcp", ch2.addr); err != nil {
		t.Fatal(err)
	}
}

// endOffset is the trades stream's end offset.
func endOffset(srv *Server) int64 {
	if e := streamStats(srv, "trades").EndOffset; e != nil {
		return *e
	}
	return wire.Null
}

// sameRow compares a stored row with the row sent by their event times.
func sameRow(t *testing.T, stored, sent string) bool {
	return eventTimes(t, stored)[0] == eventTimes(t, sent)[0]
}

// BenchmarkHTTPPublish is HTTP publish end to end: a real server on
// 127.0.0.1 committing (fsync) into a real buffer.db, clients POSTing
// requests of rows rows over keep-alive connections, each waiting for its
// answer before the next (as publish --http does). It reports rows/s and
// the answer latency per request (send to answer, the ack latency of a
// WebSocket publisher's frame) at p50 and p99. The websocket cases send
// the same bodies as frames, each waiting for its reply, for comparison
// (a pipelining WebSocket publisher goes much faster; see
// BenchmarkPublishOneRowFramesWire).
func BenchmarkHTTPPublish(b *testing.B) {
	for _, c := range []struct {
		ws            bool
		rows, clients int
	}{{false, 1, 1}, {false, 1, 8}, {false, 1000, 1}, {true, 1, 1}, {true, 1, 8}, {true, 1000, 1}} {
		via := "http"
		if c.ws {
			via = "websocket"
		}
		b.Run(fmt.Sprintf("%s/rows=%d/clients=%d", via, c.rows, c.clients), func(b *testing.B) {
			cfg := testConfig(b)
			cfg.Limits.MaxMessageBytes = 4 << 20
			srv := startServer(b, cfg)
			body := trade(1)
			if c.rows > 1 {
				body = batch(1, c.rows)
			}
			lat := make([][]time.Duration, c.clients)
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			began := time.Now()
			for k := range c.clients {
				p := newHTTPPub(b, srv.Addr().String())
				wg.Add(1)
				if c.ws {
					go func() {
						defer wg.Done()
						wp, err := wire.Publish(context.Background(), wsURL(srv, "/trades"), wire.PublishOptions{})
						if err != nil {
							b.Error(err)
							return
						}
						defer wp.Close()
						for next.Add(1) <= int64(b.N) {
							t0 := time.Now()
							a, err := wp.Submit(context.Background(), []byte(body))
							if err == nil {
								_, err = a.Wait(context.Background())
							}
							if err != nil {
								b.Error(err)
								return
							}
							lat[k] = append(lat[k], time.Since(t0))
						}
					}()
					continue
				}
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						t0 := time.Now()
						req, _ := http.NewRequest(http.MethodPost, p.base+"/trades", strings.NewReader(body))
						req.Header.Set("Content-Type", "application/json")
						res, err := p.c.Do(req)
						if err != nil {
							b.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, res.Body)
						res.Body.Close()
						if res.StatusCode != 200 {
							b.Errorf("status %d", res.StatusCode)
							return
						}
						lat[k] = append(lat[k], time.Since(t0))
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(began)
			b.StopTimer()
			var all []time.Duration
			for _, l := range lat {
				all = append(all, l...)
			}
			slices.Sort(all)
			if len(all) == 0 {
				return
			}
			b.ReportMetric(float64(len(all)*c.rows)/elapsed.Seconds(), "rows/s")
			b.ReportMetric(float64(all[len(all)/2].Microseconds())/1e3, "p50-ms")
			b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1e3, "p99-ms")
		})
	}
}

// TestAWebSocketTakingAnIDWaitsForTheHTTPRequestUnderIt: a WebSocket
// publisher that claims an id while an HTTP request's rows under it are
// queued does not cut the request off: the request is committed and
// answered, and the WebSocket is greeted after, its mark counting the rows.
func TestAWebSocketTakingAnIDWaitsForTheHTTPRequestUnderIt(t *testing.T) {
	hook, entered, release := holdFirstAppend(t)
	srv := startServer(t, eoConfig(t), Options{appendHook: hook})
	t.Cleanup(release)
	p := newHTTPPub(t, srv.Addr().String())
	type answer struct {
		code int
		body string
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, p.base+"/eo", strings.NewReader(seqRow("h", 1)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(wire.PublisherHeader, "h")
		req.Header.Set(wire.SeqHeader, "1")
		res, err := p.c.Do(req)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		answered <- answer{res.StatusCode, strings.TrimSpace(string(b)), err}
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the request's row never reached the log")
	}
	type greeted struct {
		pub *wire.Publisher
		err error
	}
	ws := make(chan greeted, 1)
	go func() {
		pub, err := wire.Publish(context.Background(), wsURL(srv, "/eo"), wire.PublishOptions{Publisher: "h"})
		ws <- greeted{pub, err}
	}()
	marks := srv.reg.Get("eo").marks
	waitFor(t, "the WebSocket publisher to claim the id", 10*time.Second, func() bool {
		marks.mu.Lock()
		defer marks.mu.Unlock()
		ps := marks.pubs["h"]
		return ps != nil && ps.owner != nil && ps.owner.supersede != nil
	})
	select {
	case g := <-ws:
		t.Fatalf("the WebSocket was greeted (%v) while the request's row was still uncommitted", g.err)
	default:
	}
	release()
	if a := <-answered; a.err != nil || a.code != 200 || a.body != `{"ok":[1]}` {
		t.Fatalf("the request: %d %s %v; want 200 with offset 1", a.code, a.body, a.err)
	}
	g := <-ws
	if g.err != nil {
		t.Fatal(g.err)
	}
	defer g.pub.Close()
	if m := g.pub.Greeting().Publisher; m == nil || m.LastSeq != 1 || m.LastOffset != 1 {
		t.Fatalf("the WebSocket's greeting: %+v; want last_seq 1 at offset 1", m)
	}
	if offs, err := g.pub.SendBatch(context.Background(), [][]byte{[]byte(seqRow("h", 2))}); err != nil || len(offs) != 1 || offs[0] != 2 {
		t.Fatalf("seq 2 over the WebSocket: %v %v", offs, err)
	}
}

// TestHTTPPublishToARelayNamesItsUpstream: as a WebSocket publisher is
// closed 4421, an HTTP publish to a relay is answered 421 naming the
// upstream, and the client library reads it as the same error.
func TestHTTPPublishToARelayNamesItsUpstream(t *testing.T) {
	origin := startNode(t, originConfig(t))
	up := wsURL(origin, "/trades")
	relay := startRelay(t, relayConfig(t, up, true))
	p := newHTTPPub(t, relay.Addr().String())
	if code, _, body := p.json("/trades", trade(1)); code != http.StatusMisdirectedRequest || !strings.Contains(body, `"error":"relay"`) || !strings.Contains(body, up) {
		t.Fatalf("publish to a relay: %d %s; want 421 naming %s", code, body, up)
	}
	_, err := wire.PublishHTTP(context.Background(), wsURL(relay, "/trades"), wire.PublishOptions{})
	var ro *wire.RelayOnly
	if !errors.As(err, &ro) || ro.Upstream != up {
		t.Fatalf("PublishHTTP to a relay: %v; want a *wire.RelayOnly naming %s", err, up)
	}
}

// TestAnHTTPPublishDuringTheStartWaitsForIt: a POST that arrives while
// the server is still starting (listening, its logs not all open) waits
// for the start and commits, rather than being told the server stops.
func TestAnHTTPPublishDuringTheStartWaitsForIt(t *testing.T) {
	starting, release, waiting := make(chan struct{}), make(chan struct{}), make(chan struct{})
	o := Options{
		beforeReady:   func() { close(starting); <-release },
		awaitingStart: func() { close(waiting) },
	}
	srv, err := New(testConfig(t), o)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Run(context.Background()) }()
	defer func() {
		_ = srv.Close()
		if err := <-errc; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	<-starting
	type answer struct {
		status int
		reply  wire.Reply
		body   string
	}
	answers := make(chan answer, 1)
	go func() {
		status, reply, body := newHTTPPub(t, srv.Addr().String()).json("/trades", `[`+trade(1)+`]`)
		answers <- answer{status, reply, body}
	}()
	select {
	case <-waiting:
	case a := <-answers:
		close(release)
		t.Fatalf("a POST while the server starts was answered %d %s at once; want it to wait for the start", a.status, a.body)
	case <-time.After(20 * time.Second):
		close(release)
		t.Fatal("the POST neither waited for the start nor was answered in 20 s")
	}
	close(release)
	if a := <-answers; a.status != http.StatusOK || offsetsOf(a.reply) != "1" {
		t.Fatalf("once started: %d %s; want 200 with offset 1", a.status, a.body)
	}
}
