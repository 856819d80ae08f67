package loadgen

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamcast/streamcast/internal/testkit/brokertest"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/schema"
	"github.com/streamcast/streamcast/pkg/wire"
)

// readEvents returns every event of stream as [type, data] pairs, and the
// error that ended it.
func readEvents(stream string) ([][2]string, error) {
	r := newEventReader(strings.NewReader(stream))
	var out [][2]string
	for {
		ev, err := r.next()
		if err != nil {
			return out, err
		}
		out = append(out, [2]string{string(ev.typ), string(ev.data)})
	}
}

func TestEventReaderReadsTheServersEvents(t *testing.T) {
	long := strings.Repeat("x", 200<<10) // past the reader's 64 KiB buffer
	for _, tc := range []struct {
		name   string
		stream string
		want   [][2]string
		end    error
	}{
		{"a greeting, a row, a keep-alive and a close",
			"event: greeting\nid: 0\nretry: 2000\ndata: {\"streamcast\":4}\n\n" +
				"id: 1\ndata: [1,17,{\"a\":1}]\n\n: keepalive\n\n" +
				"event: close\ndata: {\"code\":1001,\"reason\":{}}\n\n",
			[][2]string{{"greeting", `{"streamcast":4}`}, {"", `[1,17,{"a":1}]`}, {"close", `{"code":1001,"reason":{}}`}}, io.EOF},
		{"data lines are joined with a line break",
			"data: [1,2,\ndata: {}]\n\n", [][2]string{{"", "[1,2,\n{}]"}}, io.EOF},
		{"CRLF line ends, no space after the colon, a field without a colon",
			"event:x\r\ndata:a\r\ndata\r\n\r\n", [][2]string{{"x", "a\n"}}, io.EOF},
		{"an event without data is dropped with its type",
			"event: greeting\nid: 3\n\ndata: b\n\n", [][2]string{{"", "b"}}, io.EOF},
		{"a line longer than the buffer",
			"data: " + long + "\n\n", [][2]string{{"", long}}, io.EOF},
		{"a stream cut in an event",
			"data: a\n\ndata: b\n", [][2]string{{"", "a"}}, io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readEvents(tc.stream)
			if !errors.Is(err, tc.end) {
				t.Errorf("ended with %v, want %v", err, tc.end)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("events %q, want %q", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("event %d is %.100q, want %.100q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// referenceEvents parses stream by the WHATWG rules, written for
// clarity and not speed, with the same two limits eventReader has: lines
// end at \n or \r\n only, and a line cut by the stream's end is ignored.
func referenceEvents(stream string) [][2]string {
	lines := strings.Split(stream, "\n")
	lines = lines[:len(lines)-1]
	var out [][2]string
	var typ, data string
	hasData := false
	for _, l := range lines {
		l = strings.TrimSuffix(l, "\r")
		switch {
		case l == "":
			if hasData {
				out = append(out, [2]string{typ, data})
			}
			typ, data, hasData = "", "", false
		case l[0] == ':':
		default:
			name, value, found := strings.Cut(l, ":")
			if found {
				value = strings.TrimPrefix(value, " ")
			}
			switch name {
			case "data":
				if hasData {
					data += "\n"
				}
				data += value
				hasData = true
			case "event":
				typ = value
			}
		}
	}
	return out
}

// FuzzEventReader checks eventReader against referenceEvents on any
// stream. Seeds live in testdata/fuzz.
func FuzzEventReader(f *testing.F) {
	f.Fuzz(func(t *testing.T, stream string) {
		got, _ := readEvents(stream)
		want := referenceEvents(stream)
		if len(got) != len(want) {
			t.Fatalf("%q: events %q, want %q", stream, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%q: event %d is %q, want %q", stream, i, got[i], want[i])
			}
		}
	})
}

func TestACloseEventOfADropNamesTheOffsetToResumeAt(t *testing.T) {
	err := eventCloseError([]byte(`{"code":4429,"reason":{"error":"too_slow","offset":1234,"behind":99}}`))
	var slow *wire.TooSlow
	if !errors.As(err, &slow) || slow.Offset != 1234 {
		t.Fatalf("%v (%T), want a drop that resumes at 1234", err, err)
	}
	err = eventCloseError([]byte(`{"code":1001,"reason":{"error":"going_away"}}`))
	if errors.As(err, &slow) || !strings.Contains(err.Error(), "1001") {
		t.Fatalf("%v, want the server's going-away named", err)
	}
}

// noUpgrades is a proxy in front of base that passes plain HTTP and
// refuses every WebSocket upgrade, as some proxies do. It counts the
// requests it passed by kind.
func noUpgrades(t *testing.T, base string) (frontURL string, posts, eventStreams *atomic.Int64) {
	t.Helper()
	target, err := url.Parse(strings.Replace(base, "ws://", "http://", 1))
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1 // pass each event on as it comes
	posts, eventStreams = new(atomic.Int64), new(atomic.Int64)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("Upgrade") != "":
			http.Error(w, "this proxy passes no upgrade", http.StatusForbidden)
			return
		case r.Method == http.MethodPost:
			posts.Add(1)
		case r.Header.Get("Accept") == "text/event-stream":
			eventStreams.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	return strings.Replace(front.URL, "http://", "ws://", 1), posts, eventStreams
}

func TestRunOverEventStreamsAndHTTPPublishNeedsNoWebSocket(t *testing.T) {
	base, posts, eventStreams := noUpgrades(t, serve(t))
	res, err := Run(ctxT(t), runConfig(base+"/trades", func(c *Config) {
		c.SSE, c.HTTPPublish = true, true
		c.Publishers, c.RowsPerFrame, c.Subscribers, c.Duration, c.Rate = 2, 10, 3, 500*time.Millisecond, 4000
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !res.SSE || !res.HTTPPublish || res.RowsPublished == 0 || res.PublishErrors != 0 || res.LastOffset != res.RowsPublished {
		t.Fatalf("result %+v", res)
	}
	if res.FramesDelivered == 0 {
		t.Errorf("no row delivered: %+v", res)
	}
	if res.Drops != 0 || res.Gaps != 0 || res.Missing != 0 || res.SubscriberErrors != 0 {
		t.Errorf("lost rows: %+v", res)
	}
	if res.AckLatency.Count == 0 || res.DeliveryLatency.Count == 0 {
		t.Errorf("latencies %+v %+v", res.AckLatency, res.DeliveryLatency)
	}
	// A greeting POST per publisher, then a POST per frame; an event
	// stream per subscriber and one for the probe.
	if want := 2 + res.RowsPublished/10; posts.Load() != want {
		t.Errorf("%d POSTs passed, want %d", posts.Load(), want)
	}
	if eventStreams.Load() != 4 {
		t.Errorf("%d event streams passed, want 4", eventStreams.Load())
	}
}

// A subscriber that reads nothing while rows pile up is dropped; the close
// event names the offset after the last row it received, and a new event
// stream from there goes on with no gap, as benchSub resumes.
func TestAnEventStreamDroppedForFallingBehindResumesWithNoGap(t *testing.T) {
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.Root = t.TempDir()
	cfg.Maintain.Enabled = false
	cfg.Limits.MaxBacklog = 16
	trades := config.DefaultStream("trades")
	trades.Schema = config.RawJSON(config.DemoSchema)
	cfg.Streams = []config.Stream{trades}
	url := brokertest.Start(t, cfg) + "/trades"
	ctx := ctxT(t)

	client := newEventsClient(wire.DialOptions{}, 2)
	t.Cleanup(client.CloseIdleConnections)
	s, err := dialSSESub(ctx, client, url, wire.DialOptions{}, wire.Null)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first := s.Resume()

	// Rows far past what the socket's buffers hold, so the queue overflows.
	p, err := wire.Publish(ctx, url, wire.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sch, err := probeSchema(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	gen, err := newRowTemplate(sch, "event_ts")
	if err != nil {
		t.Fatal(err)
	}
	const frames, rows = 200, 500
	var last *wire.Ack
	for i := 0; i < frames; i++ {
		if last, err = p.Submit(ctx, gen.frame(nil, rows, int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := last.Wait(ctx); err != nil {
		t.Fatal(err)
	}

	want := first
	var slow *wire.TooSlow
	for {
		m, err := s.Recv(ctx)
		if errors.As(err, &slow) {
			break
		}
		if err != nil {
			t.Fatalf("after offset %d: %v, want a drop", want-1, err)
		}
		if m.Offset != want {
			t.Fatalf("offset %d, want %d", m.Offset, want)
		}
		want++
	}
	if slow.Offset != want {
		t.Fatalf("the drop says resume at %d; the last row received was %d", slow.Offset, want-1)
	}
	r, err := dialSSESub(ctx, client, url, wire.DialOptions{}, slow.Offset)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m, err := r.Recv(ctx)
	if err != nil || m.Offset != slow.Offset {
		t.Fatalf("resumed at %v (%v), want %d", m, err, slow.Offset)
	}
}

func probeSchema(ctx context.Context, url string) (*schema.Schema, error) {
	_, sch, err := probeGreeting(ctx, Config{URL: url}, nil)
	return sch, err
}
