package console_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/streamcast/streamcast/internal/testkit/brokertest"
	"github.com/streamcast/streamcast/pkg/broker"
	"github.com/streamcast/streamcast/pkg/wire"
)

// TestEventSourceResumesAcrossARestartWithNoGap opens the browser's own
// EventSource on a stream served as Server-Sent Events, from a page of the
// server's origin (the console's), restarts the server on the same
// address and root, and checks that the EventSource reconnects by itself,
// sends the last id it saw as Last-Event-ID, and receives every row once,
// in offset order, with each event's lastEventId its offset.
func TestEventSourceResumesAcrossARestartWithNoGap(t *testing.T) {
	ctx, _ := startBrowser(t)
	addr := freeAddr(t)
	cfg := tradesConfig(addr, t.TempDir())
	_, stop := brokertest.Serve(t, cfg, broker.Options{})
	publish(t, "ws://"+addr+"/trades", 0, 5)
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+addr+"/")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		window.got = []; window.greetings = []; window.closes = [];
		const es = new EventSource("/trades?offset=1");
		es.addEventListener("greeting", e => greetings.push(e.lastEventId));
		es.addEventListener("close", e => closes.push(JSON.parse(e.data).code));
		es.onmessage = e => got.push([e.lastEventId, JSON.parse(e.data)[0]]);
		window.es = es;
		return true;
	})()`)); err != nil {
		t.Fatal(err)
	}
	describe := `JSON.stringify({got, greetings, closes, state: es.readyState})`
	waitJS(t, ctx, 10*time.Second, "the 5 rows replayed", `got.length === 5`, describe)

	stop()
	waitJS(t, ctx, 10*time.Second, "the close event of the server's stop", `closes.includes(1001)`, describe)
	_, stop = brokertest.Serve(t, cfg, broker.Options{})
	defer stop()
	publish(t, "ws://"+addr+"/trades", 5, 3)
	waitJS(t, ctx, 20*time.Second, "the EventSource reconnected and resumed", `got.length >= 8 && greetings.length === 2`, describe)
	if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`got.length === 8 && got.every(([id, off], i) => off === i + 1 && id === String(off)) && greetings[1] === "5"`)); err != nil || !ok {
		seen, _ := chromedp.Run(ctx, chromedp.Evaluate[string](describe))
		t.Fatalf("across the restart the EventSource saw %s; want offsets 1 to 8 once each, ids their offsets, and the second greeting at id 5 (resumed after the last row)", seen)
	}
}

// publish publishes n trades numbered from first to url and waits for
// their acknowledgement.
func publish(t *testing.T, url string, first, n int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pub, err := wire.Publish(ctx, url, wire.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	rows := make([][]byte, n)
	for i := range rows {
		rows[i] = trade(first + int64(i))
	}
	a, err := pub.SubmitBatch(ctx, rows)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}
