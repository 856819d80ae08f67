package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/internal/testkit/brokertest"
	"github.com/streamcast/streamcast/pkg/wire"
)

// publishRows publishes trade(i) for i in [from, to), a batch of 10 at a
// time, and waits for every ack.
func publishRows(t *testing.T, base string, from, to int64) {
	t.Helper()
	ctx := context.Background()
	pub, err := wire.Publish(ctx, base+"/trades", wire.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	for i := from; i < to; i += 10 {
		var rows [][]byte
		for j := i; j < min(i+10, to); j++ {
			rows = append(rows, trade(j))
		}
		a, err := pub.SubmitBatch(ctx, rows)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// plainRows reads n data frames of path with gorilla, which negotiates no
// compression: what every compressing subscriber must decode.
func plainRows(t *testing.T, base, path string, n int) []string {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	_ = ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	var out []string
	for len(out) < n+1 {
		_, m, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("%s: %v after %d frames", path, err, len(out))
		}
		out = append(out, string(m))
	}
	return out[1:] // the greeting differs by its end offset
}

// TestChromiumDecodesCompressedFramesAsPlainOnes has Chromium's own
// WebSocket, which offers permessage-deflate with context takeover, read
// the stream beside gorilla's plain one: a replay from offset 1, a live
// subscriber there from the start, one that joins while rows flow, and a
// filtered one each decode exactly the rows the plain reader gets.
func TestChromiumDecodesCompressedFramesAsPlainOnes(t *testing.T) {
	ctx, errs := startBrowser(t)
	base := brokertest.Start(t, tradesConfig("127.0.0.1:0", t.TempDir()))
	httpBase := "http://" + strings.TrimPrefix(base, "ws://")
	publishRows(t, base, 0, 200)
	if err := chromedp.Do(ctx, chromedp.Navigate(httpBase+"/")); err != nil {
		t.Fatal(err)
	}
	open := func(name, path string) {
		js := fmt.Sprintf(`(() => { window.subs = window.subs || {};
  const s = {rows: [], ext: "", open: false, closed: ""};
  window.subs[%q] = s;
  const ws = new WebSocket(%q);
  ws.onopen = () => { s.ext = ws.extensions; };
  ws.onmessage = (e) => { if (s.open) s.rows.push(e.data); else s.open = true; };
  ws.onclose = (e) => { s.closed = e.code + " " + e.reason; };
  return true; })()`, name, base+path)
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err != nil {
			t.Fatal(err)
		}
		waitJS(t, ctx, 5*time.Second, name+" greeted", fmt.Sprintf(`window.subs[%q].open`, name), `JSON.stringify(window.subs)`)
	}
	where := "where=" + `%7B%22symbol%22%3A%22ETH-USD%22%7D`
	open("replay", "/trades?offset=1")
	open("live", "/trades")
	open("where", "/trades?offset=1&"+where)
	publishRows(t, base, 200, 500)
	open("late", "/trades")
	publishRows(t, base, 500, 800)

	all := plainRows(t, base, "/trades?offset=1", 800)
	eth := plainRows(t, base, "/trades?offset=1&"+where, 267) // i%3 == 1 for 267 of 0..799
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"replay", all},
		{"live", all[200:]},
		{"where", eth},
		{"late", all[500:]},
	} {
		waitJS(t, ctx, 10*time.Second, fmt.Sprintf("%d rows in %s", len(tc.want), tc.name),
			fmt.Sprintf(`window.subs[%q].rows.length >= %d`, tc.name, len(tc.want)),
			fmt.Sprintf(`window.subs[%q].rows.length + " " + window.subs[%q].closed`, tc.name, tc.name))
		var got struct {
			Rows []string `json:"rows"`
			Ext  string   `json:"ext"`
		}
		js := fmt.Sprintf(`JSON.stringify(window.subs[%q])`, tc.name)
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(s), &got); err != nil {
			t.Fatal(err)
		}
		if got.Ext != "permessage-deflate; client_no_context_takeover" {
			t.Errorf("%s negotiated %q", tc.name, got.Ext)
		}
		if len(got.Rows) != len(tc.want) {
			t.Errorf("%s: %d rows, want %d", tc.name, len(got.Rows), len(tc.want))
			continue
		}
		for i := range got.Rows {
			if got.Rows[i] != tc.want[i] {
				t.Fatalf("%s row %d: %s, want %s", tc.name, i, got.Rows[i], tc.want[i])
			}
		}
	}
	if e := errs.List(); len(e) > 0 {
		t.Fatalf("the page logged errors: %q", e)
	}
}
