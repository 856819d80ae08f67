package broker

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/wire"
)

// sseEvent is one block of an event stream: an event (its type, id and
// data lines joined) or a comment.
type sseEvent struct {
	Type, ID, Data, Comment string
	HasID                   bool
}

// readEvent reads the next block of an event stream.
func readEvent(sc *bufio.Scanner) (sseEvent, error) {
	var ev sseEvent
	var data []string
	seen := false
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if seen {
				ev.Data = strings.Join(data, "\n")
				return ev, nil
			}
			continue
		}
		seen = true
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "":
			ev.Comment = value
		case "event":
			ev.Type = value
		case "id":
			ev.ID, ev.HasID = value, true
		case "data":
			data = append(data, value)
		}
	}
	if err := sc.Err(); err != nil {
		return ev, err
	}
	return ev, io.EOF
}

// eventOffset is the offset of a data event, which its id must name too.
func eventOffset(t testing.TB, ev sseEvent) int64 {
	t.Helper()
	var parts []json.RawMessage
	if err := json.Unmarshal([]byte(ev.Data), &parts); err != nil || len(parts) != 3 {
		t.Fatalf("event data %q is not a data frame [offset,ts,row]", ev.Data)
	}
	if !ev.HasID || ev.ID != string(parts[0]) {
		t.Fatalf("event id %q (given %v), frame offset %s: they must agree", ev.ID, ev.HasID, parts[0])
	}
	n, err := strconv.ParseInt(ev.ID, 10, 64)
	if err != nil {
		t.Fatalf("event id %q: %v", ev.ID, err)
	}
	return n
}

// openEvents GETs path on srv as an EventSource does and returns the
// response; the body is closed when the test ends.
func openEvents(t testing.TB, srv *Server, path string, header http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+srv.Addr().String()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range header {
		req.Header[k] = v
	}
	// A bound on the whole response: a stream that never sends what a
	// test waits for fails it rather than hang.
	res, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// subscribeEvents opens an event stream that must start, and reads its
// greeting.
func subscribeEvents(t testing.TB, srv *Server, path string, header http.Header) (*bufio.Scanner, *wire.Greeting) {
	t.Helper()
	res := openEvents(t, srv, path, header)
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("GET %s: %d %s %s; want 200 text/event-stream", path, res.StatusCode, res.Header.Get("Content-Type"), b)
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	ev, err := readEvent(sc)
	if err != nil || ev.Type != "greeting" {
		t.Fatalf("first event %+v (%v), want the greeting", ev, err)
	}
	g, err := wire.ParseGreeting([]byte(ev.Data))
	if err != nil {
		t.Fatalf("greeting %q: %v", ev.Data, err)
	}
	return sc, g
}

// TestEventStreamServesTheSameFramesAsWebSocket: the data of each event is
// byte for byte the frame a WebSocket subscriber receives, with the
// offset as its id, replay and live alike; the stream counts as a
// subscriber in /stats; the headers keep caches and proxies from holding
// events back.
func TestEventStreamServesTheSameFramesAsWebSocket(t *testing.T) {
	srv := startServer(t, testConfig(t))
	p := dialPublisher(t, srv, "trades")
	if r := p.roundTrip(batch(0, 3)); r.Error != "" {
		t.Fatalf("publish: %+v", r)
	}
	res := openEvents(t, srv, "/trades?offset=1", nil)
	for k, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := res.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	sc := bufio.NewScanner(res.Body)
	g, err := readEvent(sc)
	if err != nil || g.Type != "greeting" || g.ID != "0" || !strings.Contains(g.Data, `"replay":[1,4]`) {
		t.Fatalf("greeting event %+v (%v); want event: greeting, id 0 (the offset before the replay) and replay [1,4]", g, err)
	}
	ws, _ := mustDial(t, wsURL(srv, "/trades?offset=1"))
	waitFor(t, "two subscribers in /stats", 10*time.Second, func() bool { return streamStats(srv, "trades").Subscribers == 2 })
	if r := p.roundTrip(trade(3)); r.Error != "" {
		t.Fatalf("publish: %+v", r)
	}
	for want := int64(1); want <= 4; want++ {
		ev, err := readEvent(sc)
		if err != nil {
			t.Fatalf("event %d: %v", want, err)
		}
		f, err := readFrame(t, ws)
		if err != nil {
			t.Fatal(err)
		}
		if got := eventOffset(t, ev); got != want || ev.Data != string(f.Raw) {
			t.Fatalf("event %d: id %d data %s; the WebSocket frame is %s", want, got, ev.Data, f.Raw)
		}
	}
}

// TestEventStreamRefusalsAreHTTPStatusesBeforeTheStream: every refusal
// before the greeting is an HTTP status with the WebSocket close's JSON
// reason as its body, and no event.
func TestEventStreamRefusalsAreHTTPStatusesBeforeTheStream(t *testing.T) {
	srv := startServer(t, testConfig(t))
	for _, tc := range []struct {
		path, lastID string
		status       int
		code         string
		body         string
	}{
		{"/nope", "", 404, "4404", `{"error":"no_such_stream","serves":["live","raw","trades"]}`},
		{"/trades?offset=x", "", 400, "4400", `"error":"bad_request"`},
		{"/trades?publish", "", 400, "4400", `publish over WebSocket`},
		{"/trades?offset=9", "", 416, "4416", `"why":"ahead"`},
		{"/trades", "9", 416, "4416", `"offset":10`},
		{"/trades", "x", 400, "4400", `Last-Event-ID`},
		{"/live?offset=1", "", 416, "4416", `"why":"not_durable"`},
		{"/trades?where=" + url.QueryEscape(`{"nope":1}`), "", 400, "4400", `nope`},
	} {
		h := http.Header{}
		if tc.lastID != "" {
			h.Set("Last-Event-ID", tc.lastID)
		}
		res := openEvents(t, srv, tc.path, h)
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != tc.status || res.Header.Get(CloseCodeHeader) != tc.code || !strings.Contains(string(b), tc.body) ||
			res.Header.Get("Content-Type") != "application/json" || strings.Contains(string(b), "event:") {
			t.Errorf("GET %s (Last-Event-ID %q): %d %s %s %q; want %d, close code %s, a JSON body with %s",
				tc.path, tc.lastID, res.StatusCode, res.Header.Get(CloseCodeHeader), res.Header.Get("Content-Type"), b, tc.status, tc.code, tc.body)
		}
	}
}

// TestEventStreamAuthRefusesBeforeAnyByteOfTheStream: without
// credentials 401 with the Basic challenge, with a user lacking the read
// grant 403, a page from another origin 403, each before the stream (no
// event); the granted user gets the stream.
func TestEventStreamAuthRefusesBeforeAnyByteOfTheStream(t *testing.T) {
	srv := startServer(t, authConfig(t))
	for _, tc := range []struct {
		name   string
		header http.Header
		status int
	}{
		{"anonymous", nil, 401},
		{"bob, who reads li* only", http.Header{"Authorization": {basic("bob", bobPW)}}, 403},
		{"a wrong password", http.Header{"Authorization": {basic("alice", "wrong")}}, 401},
		{"alice from another site", http.Header{"Authorization": {basic("alice", alicePW)}, "Origin": {"https://elsewhere.example"}}, 403},
	} {
		res := openEvents(t, srv, "/trades?offset=1", tc.header)
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != tc.status || strings.Contains(string(b), "event:") || res.Header.Get("Content-Type") == "text/event-stream" {
			t.Errorf("%s: %d %q; want %d before any event", tc.name, res.StatusCode, b, tc.status)
		}
		if tc.status == 401 && res.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without a challenge", tc.name)
		}
	}
	subscribeEvents(t, srv, "/trades", http.Header{"Authorization": {basic("alice", alicePW)}})
}

// TestEventStreamFiltersWithWhere: where= means what it means for a
// WebSocket subscriber, in the replay and live; the greeting echoes it.
func TestEventStreamFiltersWithWhere(t *testing.T) {
	srv := startServer(t, testConfig(t))
	p := dialPublisher(t, srv, "trades")
	if r := p.roundTrip(batch(0, 6)); r.Error != "" {
		t.Fatalf("publish: %+v", r)
	}
	sc, g := subscribeEvents(t, srv, "/trades?offset=1&where="+url.QueryEscape(`{"side":1}`), nil)
	if string(g.Where) != `{"side":[1]}` && string(g.Where) != `{"side":1}` {
		t.Errorf("greeting where %s", g.Where)
	}
	if r := p.roundTrip(batch(6, 4)); r.Error != "" {
		t.Fatalf("publish: %+v", r)
	}
	// trade(i) has side i%2 at offset i+1: side 1 is every even offset.
	for _, want := range []int64{2, 4, 6, 8, 10} {
		ev, err := readEvent(sc)
		if err != nil {
			t.Fatal(err)
		}
		if got := eventOffset(t, ev); got != want {
			t.Fatalf("event at offset %d, want %d: where= lets through side 1 only", got, want)
		}
	}
}

// TestEventStreamDroppedForFallingBehindEndsWithTheResumeOffset: an event
// stream is bound by max_backlog as a WebSocket subscriber is; dropped,
// it receives a contiguous prefix, then a close event 4429 whose reason
// names the offset after the last event, so a reconnect with that
// Last-Event-ID misses nothing.
func TestEventStreamDroppedForFallingBehindEndsWithTheResumeOffset(t *testing.T) {
	const maxBacklog = 16
	cfg := testConfig(t)
	cfg.Limits.MaxBacklog = maxBacklog
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	srv := startServerWith(t, cfg, Options{}, func(s *Server) {
		s.opts.writeHook = func(c *wsConn, n int, _ bool) {
			if c.events == nil {
				return
			}
			select {
			case entered <- struct{}{}:
			default:
			}
			<-release
		}
	})
	sc, g := subscribeEvents(t, srv, "/trades", nil)
	p := dialPublisher(t, srv, "trades")
	if r := p.roundTrip(trade(0)); r.Error != "" {
		t.Fatalf("publish: %+v", r)
	}
	<-entered // the stream's writer holds the first row "in write"
	for i := 1; i <= maxBacklog; i++ {
		if r := p.roundTrip(trade(i)); r.Error != "" {
			t.Fatalf("publish: %+v", r)
		}
	}
	close(release)
	next := g.EndOffset
	for {
		ev, err := readEvent(sc)
		if err != nil {
			t.Fatalf("the stream ended with %v after offset %d, without a close event", err, next-1)
		}
		if ev.Type == "close" {
			var c struct {
				Code   int
				Reason json.RawMessage
			}
			if err := json.Unmarshal([]byte(ev.Data), &c); err != nil || c.Code != wire.CloseTooSlow {
				t.Fatalf("close event %q, want code 4429", ev.Data)
			}
			ts, ok := wire.ParseClose(c.Code, string(c.Reason)).(*wire.TooSlow)
			if !ok || ts.Offset != next {
				t.Fatalf("4429 reason %s; the last event was offset %d, so it must resume at %d", c.Reason, next-1, next)
			}
			break
		}
		if got := eventOffset(t, ev); got != next {
			t.Fatalf("event %d after %d: the prefix is not contiguous", got, next-1)
		}
		next++
	}
	if got := next - g.EndOffset; got != maxBacklog {
		t.Errorf("%d events before the 4429, want max_backlog = %d", got, maxBacklog)
	}
	if _, err := readEvent(sc); err != io.EOF {
		t.Errorf("after the close event: %v, want the end of the response", err)
	}
}

// TestEventStreamKeepAliveComments: each keepalive tick sends an idle
// stream a comment, and a stream that takes them is not dropped as a
// silent peer, however many ticks pass with no row.
func TestEventStreamKeepAliveComments(t *testing.T) {
	ticks := make(chan time.Time)
	srv := startServer(t, testConfig(t), Options{keepaliveTicks: ticks})
	sc, _ := subscribeEvents(t, srv, "/trades", nil)
	waitFor(t, "the subscriber in /stats", 10*time.Second, func() bool { return streamStats(srv, "trades").Subscribers == 1 })
	for i := range 4 {
		ticks <- time.Now()
		ev, err := readEvent(sc)
		if err != nil || ev.Comment != "keepalive" || ev.Type != "" {
			t.Fatalf("after tick %d: %+v (%v), want the comment ': keepalive'", i+1, ev, err)
		}
	}
	p := dialPublisher(t, srv, "trades")
	if r := p.roundTrip(trade(0)); r.Error != "" {
		t.Fatalf("publish: %+v", r)
	}
	if ev, err := readEvent(sc); err != nil || eventOffset(t, ev) != 1 {
		t.Fatalf("after 4 idle ticks: %+v (%v), want the row at offset 1", ev, err)
	}
}

// TestEventStreamResumesWithLastEventIDAcrossARestartWithCurl: curl reads
// the stream until the server stops (a close event 1001, and curl exits
// 0); after a restart on the same address and root, curl with the last
// id as Last-Event-ID (and the first request's ?offset, as an
// EventSource sends both) gets exactly the rows after it: no gap, no
// duplicate.
func TestEventStreamResumesWithLastEventIDAcrossARestartWithCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed")
	}
	cfg := testConfig(t)
	cfg.Listen = freeLoopback(t)
	srv := startServer(t, cfg)
	p := dialPublisher(t, srv, "trades")
	if r := p.roundTrip(batch(0, 5)); r.Error != "" {
		t.Fatalf("publish: %+v", r)
	}
	url := "http://" + cfg.Listen + "/trades?offset=1"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	first := exec.CommandContext(ctx, curl, "-sSN", url)
	out, err := first.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 1<<20)
	if ev, err := readEvent(sc); err != nil || ev.Type != "greeting" {
		t.Fatalf("curl's first event %+v (%v), want the greeting", ev, err)
	}
	var got []int64
	for len(got) < 5 {
		ev, err := readEvent(sc)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, eventOffset(t, ev))
	}
	if r := p.roundTrip(batch(5, 2)); r.Error != "" {
		t.Fatalf("publish: %+v", r)
	}
	_ = p.ws.Close()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	var closing sseEvent
	for {
		ev, err := readEvent(sc)
		if err != nil {
			t.Fatalf("the stream ended (%v) without a close event", err)
		}
		if ev.Type == "close" {
			closing = ev
			break
		}
		got = append(got, eventOffset(t, ev))
	}
	if !strings.Contains(closing.Data, `"code":1001`) || !strings.Contains(closing.Data, "server_stopping") {
		t.Errorf("close event %q, want 1001 server_stopping", closing.Data)
	}
	if err := first.Wait(); err != nil {
		t.Errorf("curl: %v; a stream the server ended must end its response cleanly", err)
	}

	srv = startServer(t, cfg)
	p = dialPublisher(t, srv, "trades")
	if r := p.roundTrip(batch(7, 3)); r.Error != "" {
		t.Fatalf("publish: %+v", r)
	}
	last := got[len(got)-1]
	second := exec.CommandContext(ctx, curl, "-sSN", "-H", "Last-Event-ID: "+strconv.FormatInt(last, 10), url)
	out, err = second.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = second.Process.Kill()
		_ = second.Wait()
	}()
	sc = bufio.NewScanner(out)
	sc.Buffer(nil, 1<<20)
	if ev, err := readEvent(sc); err != nil || ev.Type != "greeting" || ev.ID != strconv.FormatInt(last, 10) {
		t.Fatalf("resumed greeting %+v (%v), want id %d", ev, err, last)
	}
	for len(got) < 10 {
		ev, err := readEvent(sc)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, eventOffset(t, ev))
	}
	for i, off := range got {
		if off != int64(i+1) {
			t.Fatalf("offsets across the restart %v: want 1 to 10, each once", got)
		}
	}
}

// freeLoopback is a loopback address free right now, for a server that
// must come back on the same address after a restart.
func freeLoopback(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestAnEventsDataNeverHoldsALineBreak: a payload with a line break (not
// canonical JSON, but the framing must not depend on it) becomes several
// data: lines, which a client joins back with \n.
func TestAnEventsDataNeverHoldsALineBreak(t *testing.T) {
	got := string(appendEvent(nil, []byte("[7,1,{\"a\":\n1}]")))
	want := "id: 7\ndata: [7,1,{\"a\":\ndata: 1}]\n\n"
	if got != want {
		t.Fatalf("event %q, want %q", got, want)
	}
	sc := bufio.NewScanner(strings.NewReader(got))
	ev, err := readEvent(sc)
	if err != nil || ev.Data != "[7,1,{\"a\":\n1}]" || ev.ID != "7" {
		t.Fatalf("read back %+v (%v)", ev, err)
	}
}

// TestEventStreamOverHTTP2: the handler serves an event stream over
// HTTP/2 (TLS) too, through net/http's own flushing: a front end that
// speaks h2 to its clients can hand the server's handler on.
func TestEventStreamOverHTTP2(t *testing.T) {
	srv := startServer(t, testConfig(t))
	h2 := httptest.NewUnstartedServer(srv)
	h2.EnableHTTP2 = true
	h2.StartTLS()
	defer h2.Close()
	req, err := http.NewRequest("GET", h2.URL+"/trades", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	client := h2.Client()
	client.Timeout = 20 * time.Second
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.ProtoMajor != 2 || res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%s %d %s; want HTTP/2 200 text/event-stream", res.Proto, res.StatusCode, res.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(res.Body)
	if ev, err := readEvent(sc); err != nil || ev.Type != "greeting" {
		t.Fatalf("first event %+v (%v), want the greeting", ev, err)
	}
	p := dialPublisher(t, srv, "trades")
	if r := p.roundTrip(trade(0)); r.Error != "" {
		t.Fatalf("publish: %+v", r)
	}
	if ev, err := readEvent(sc); err != nil || eventOffset(t, ev) != 1 {
		t.Fatalf("event %+v (%v), want the row at offset 1", ev, err)
	}
}

// TestWhichRequestsGetAnEventStream: a GET without an upgrade whose Accept
// allows text/event-stream at least as much as text/html; curl's */*
// does, a browser's address bar and a request without Accept do not.
func TestWhichRequestsGetAnEventStream(t *testing.T) {
	for _, tc := range []struct {
		method, accept string
		upgrade        bool
		want           bool
	}{
		{"GET", "text/event-stream", false, true},
		{"GET", "*/*", false, true},    // curl
		{"GET", "text/*", false, true}, // a range naming the type
		{"GET", "", false, false},      // Go's http.Get: the plain page
		{"GET", "application/json", false, false},
		{"GET", "text/event-stream;q=0, */*", false, false},
		{"GET", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", false, false}, // an address bar
		{"GET", "text/html;q=0.5, text/event-stream", false, true},
		{"POST", "*/*", false, false},
		{"GET", "*/*", true, false}, // a WebSocket upgrade
	} {
		r := httptest.NewRequest(tc.method, "/trades", nil)
		if tc.accept != "" {
			r.Header.Set("Accept", tc.accept)
		}
		if tc.upgrade {
			r.Header.Set("Connection", "Upgrade")
			r.Header.Set("Upgrade", "websocket")
		}
		if got := wantsEvents(r); got != tc.want {
			t.Errorf("%s Accept %q upgrade %v: event stream %v, want %v", tc.method, tc.accept, tc.upgrade, got, tc.want)
		}
	}
}

// TestEventStreamAnAllowedOriginMayReadIt: a page from an origin
// allowed_origins lists gets the stream with the CORS headers that let it
// read it; another origin gets 403.
func TestEventStreamAnAllowedOriginMayReadIt(t *testing.T) {
	cfg := testConfig(t)
	cfg.AllowedOrigins = []string{"https://app.example"}
	srv := startServer(t, cfg)
	res := openEvents(t, srv, "/trades", http.Header{"Origin": {"https://app.example"}})
	if res.StatusCode != 200 || res.Header.Get("Access-Control-Allow-Origin") != "https://app.example" || res.Header.Get("Access-Control-Allow-Credentials") != "true" {
		t.Fatalf("allowed origin: %d, Access-Control-Allow-Origin %q", res.StatusCode, res.Header.Get("Access-Control-Allow-Origin"))
	}
	res = openEvents(t, srv, "/trades", http.Header{"Origin": {"https://elsewhere.example"}})
	if res.StatusCode != 403 || res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("another origin: %d, Access-Control-Allow-Origin %q; want 403 without it", res.StatusCode, res.Header.Get("Access-Control-Allow-Origin"))
	}
}
