package ndjson

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/pkg/wire"

	"github.com/streamcast/streamcast/internal/testkit"
)

const sideSchema = `{"type":"object","properties":{"side":{"type":"integer"}},"required":["side"]}`

// markServer is an exactly-once publish endpoint whose publisher mark is
// lastSeq; it records each frame and acks it (duplicate when dup says so).
func markServer(t *testing.T, lastSeq int64, reply func(frame string) string) (url string, frames func() []string) {
	var mu sync.Mutex
	var got []string
	url = testkit.FakeServer(t, func(t *testing.T, c *websocket.Conn, r *http.Request) {
		g := wire.Greeting{Stream: "t", EndOffset: 100, Durable: true, Schema: []byte(sideSchema)}
		if id := r.URL.Query().Get("publisher"); id != "" {
			g.Publisher = &wire.PublisherMark{ID: id, LastSeq: lastSeq, LastOffset: 99}
		}
		testkit.SendText(t, c, string(g.AppendJSON(nil)))
		for {
			_, data, err := c.ReadMessage()
			if err != nil {
				return
			}
			mu.Lock()
			got = append(got, string(data))
			mu.Unlock()
			testkit.SendText(t, c, reply(string(data)))
		}
	})
	return url, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// okFor acks an exactly-once frame [seq, row] or [seq, [rows…]] with
// offsets 1000+seq….
func okFor(frame string) string {
	var f []json.RawMessage
	if json.Unmarshal([]byte(frame), &f) != nil || len(f) != 2 {
		return `{"error":"bad_frame","detail":"not [seq,rows]"}`
	}
	var seq int64
	json.Unmarshal(f[0], &seq)
	n := 1
	if f[1][0] == '[' {
		n = rowsIn(f[1])
	}
	return string(wire.AppendOK(nil, 1000+seq, n))
}

// rowsIn counts the rows of a batch frame [row, …] (0 when it is not one).
func rowsIn(batch []byte) int {
	var rows []json.RawMessage
	if json.Unmarshal(batch, &rows) != nil {
		return 0
	}
	return len(rows)
}

func TestLoadNumbersAcceptedRowsByOrdinalAndSkipsWhatLanded(t *testing.T) {
	url, frames := markServer(t, 3, okFor)
	// Seven lines: a blank one and a refused one take no seq, so the
	// accepted rows are side 1..6 with seqs 1..6; the mark says 1..3 landed.
	input := "{\"side\":1}\n{\"side\":2}\n\n{\"side\":\"x\"}\n{\"side\":3}\n{\"side\":4}\n{\"side\":5}\n{\"side\":6}"
	var q strings.Builder
	sum, err := Load(ctxT(t), url+"/t", loadDefaults(LoadOptions{Stdin: strings.NewReader(input), Publisher: "loader", BatchSize: 2, Quarantine: &q}))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`[4,[{"side":4},{"side":5}]]`, `[6,[{"side":6}]]`}
	if got := frames(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("frames %v, want %v", got, want)
	}
	if sum.LinesRead != 8 || sum.BlankLines != 1 || sum.Quarantined != 1 || sum.DuplicatesSkipped != 3 || sum.RowsPublished != 3 {
		t.Errorf("summary %+v", sum)
	}
	if sum.ResumedFrom != 3 || sum.ResumedOffset != 99 || sum.FirstOffset != 1004 || sum.LastOffset != 1006 || !sum.Complete {
		t.Errorf("summary %+v", sum)
	}
	if !strings.Contains(q.String(), `"file":"-","line":4`) {
		t.Errorf("quarantine %q lacks line 4", q.String())
	}
}

func TestLoadCountsDuplicateAcksAsSkipped(t *testing.T) {
	url, _ := markServer(t, 0, func(frame string) string {
		if strings.HasPrefix(frame, "[1,") {
			return `{"ok":[null],"duplicate":true}`
		}
		return okFor(frame)
	})
	sum, err := Load(ctxT(t), url+"/t", loadDefaults(LoadOptions{Stdin: strings.NewReader("{\"side\":1}\n{\"side\":2}\n"), Publisher: "p"}))
	if err != nil {
		t.Fatal(err)
	}
	if sum.DuplicatesSkipped != 1 || sum.RowsPublished != 1 || sum.FirstOffset != 1002 {
		t.Errorf("summary %+v", sum)
	}
}

func TestLoadStopsWhenTheServerRefusesARowTheClientAccepted(t *testing.T) {
	url, _ := markServer(t, 0, func(frame string) string {
		if strings.Contains(frame, `"side":2`) {
			return `{"error":"rejected","detail":"column \"side\": must be odd"}`
		}
		return `{"ok":[7]}`
	})
	sum, err := Load(ctxT(t), url+"/t", loadDefaults(LoadOptions{Stdin: strings.NewReader("{\"side\":1}\n{\"side\":2}\n{\"side\":3}\n")}))
	var rj *wire.Rejected
	if !errors.As(err, &rj) {
		t.Fatalf("err %T %v, want a *wire.Rejected cause", err, err)
	}
	for _, w := range []string{"-:2", "disagree", "must be odd"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q lacks %q", err, w)
		}
	}
	if sum.Complete || sum.Error == "" {
		t.Errorf("summary %+v: want it marked incomplete with the error", sum)
	}
}

func TestLoadRefusesARowTooBigForAFrameAndCutsBatchesToFit(t *testing.T) {
	url, frames := markServer(t, 0, func(frame string) string {
		n := rowsIn([]byte(frame))
		return string(wire.AppendOK(nil, 1, n))
	})
	// {"side":1} is 10 bytes and fits a 50-byte frame with its overhead;
	// {"side":1000000000000} (22 bytes) does not.
	input := strings.Repeat("{\"side\":1}\n", 3) + "{\"side\":1000000000000}\n" + strings.Repeat("{\"side\":1}\n", 4)
	var q strings.Builder
	sum, err := Load(ctxT(t), url+"/t", loadDefaults(LoadOptions{Stdin: strings.NewReader(input), BatchSize: 10, MaxFrameBytes: 50, Quarantine: &q}))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Quarantined != 1 || sum.RowsPublished != 7 || !strings.Contains(q.String(), `"line":4`) || !strings.Contains(q.String(), "bytes") {
		t.Errorf("summary %+v, quarantine %q", sum, q.String())
	}
	for _, f := range frames() {
		if len(f)+frameOverhead > 50 {
			t.Errorf("frame %s is %d bytes; the limit leaves room for %d", f, len(f), 50-frameOverhead)
		}
	}
	if len(frames()) < 3 {
		t.Errorf("frames %v: 7 rows of 10 bytes cannot fit fewer than 3 frames of 18 bytes of rows", frames())
	}
}
