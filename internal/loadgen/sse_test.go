package loadgen

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

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

func TestRunOverEventStreamsAndHTTPPublish(t *testing.T) {
	base := serve(t)
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
}
