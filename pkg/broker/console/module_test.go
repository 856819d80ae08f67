package console_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/streamcast/streamcast/internal/testkit/brokertest"
)

// moduleState is what the module page recorded.
type moduleState struct {
	Got       []int64
	Errors    []string
	Resumes   []int
	Greetings int
}

const readModule = `({got: window.got || [], errors: window.errors || [], resumes: window.resumes || [], greetings: window.greetings || 0})`

// allDelivered waits until the module page delivered n rows, and fails
// unless its subscription is alive and delivered offsets 1, 2, …, n.
func allDelivered(t *testing.T, ctx context.Context, n int64) moduleState {
	t.Helper()
	waitJS(t, ctx, 15*time.Second, fmt.Sprintf("all %d rows delivered", n), fmt.Sprintf(`(window.got || []).length >= %d || (window.errors || []).length > 0`, n), `({got: window.got.length, errors: window.errors, resumes: window.resumes})`)
	st, err := chromedp.Run(ctx, chromedp.Evaluate[moduleState](readModule))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Errors) > 0 {
		t.Fatalf("the subscription ended with errors: %q", st.Errors)
	}
	got := st.Got
	for i, o := range got {
		if o != int64(i)+1 {
			t.Fatalf("row %d of %d delivered has offset %d, want %d: an offset was missed or repeated", i, len(got), o, i+1)
		}
	}
	if int64(len(got)) != n {
		t.Fatalf("delivered %d rows, want %d", len(got), n)
	}
	return st
}

// TestStreamcastJSResumesAcrossAServerRestart runs a page of another
// origin that imports /streamcast.js and reads a stream from offset 0
// while rows are published, stops the server mid-stream (1001), starts it
// again on the same address and data, publishes more, and checks the page
// delivered every offset exactly once, in order, having reconnected.
func TestStreamcastJSResumesAcrossAServerRestart(t *testing.T) {
	ctx, errs := startBrowser(t)
	addr := freeAddr(t)
	cfg := tradesConfig(addr, t.TempDir())
	base, stopServer := brokertest.Run(t, cfg)
	page := httptest.NewServer(modulePage(addr, "trades"))
	t.Cleanup(page.Close)

	if err := chromedp.Do(ctx, chromedp.Navigate(page.URL)); err != nil {
		t.Fatal(err)
	}
	stopLoad := load(t, base, "trades", 5000, 0)
	waitJS(t, ctx, 10*time.Second, "1,000 rows delivered", `(window.got || []).length >= 1000`, readModule)
	stopLoad()
	// A batch cancelled in flight may still have committed: the log's end
	// is the count.
	n := endOffset(t, "http://"+addr, "trades") - 1
	stopServer() // subscribers get 1001, then the address refuses connections
	// Restart only once the page has been refused at least once: the
	// client must come back through its backoff, not by luck of timing.
	waitJS(t, ctx, 10*time.Second, "a refused reconnect while the server is down", `(window.resumes || []).filter((c) => c !== 1001).length >= 1`, readModule)

	base, _ = brokertest.Run(t, cfg)
	stop2 := load(t, base, "trades", 5000, n)
	waitFor(t, 10*time.Second, "2,000 rows published after the restart", func() bool {
		return endOffset(t, "http://"+addr, "trades") > n+2000
	})
	stop2()
	n = endOffset(t, "http://"+addr, "trades") - 1
	st := allDelivered(t, ctx, n)
	if st.Greetings < 2 || len(st.Resumes) == 0 {
		t.Fatalf("the page saw %d greetings and resumes %v; want a reconnect after the restart", st.Greetings, st.Resumes)
	}
	t.Logf("%d rows, %d greetings, resumes %v", n, st.Greetings, st.Resumes)
	// While the server was down the browser logged its refused connection
	// attempts; nothing else may show.
	if e := errs.List("WebSocket connection to"); len(e) > 0 {
		t.Fatalf("the page logged errors: %q", e)
	}
}

// TestStreamcastJSResumesAfterTooSlow runs the module page against a
// server whose max_backlog is far below a publish batch, so live batches
// drop the browser with 4429, and checks it resumed at the offsets the
// server named and delivered every row once, in order.
func TestStreamcastJSResumesAfterTooSlow(t *testing.T) {
	ctx, errs := startBrowser(t)
	addr := freeAddr(t)
	cfg := tradesConfig(addr, t.TempDir())
	cfg.Limits.MaxBacklog = 16
	base := brokertest.Start(t, cfg)
	page := httptest.NewServer(modulePage(addr, "trades"))
	t.Cleanup(page.Close)
	if err := chromedp.Do(ctx, chromedp.Navigate(page.URL)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, 5*time.Second, "the greeting", `window.greetings >= 1`, readModule)
	stop := load(t, base, "trades", 10000, 0) // batches of 100 > max_backlog 16
	waitJS(t, ctx, 10*time.Second, "two 4429 drops and 1,000 rows", `(window.resumes || []).filter((c) => c === 4429).length >= 2 && window.got.length >= 1000`, `({got: window.got.length, resumes: window.resumes})`)
	stop()
	n := endOffset(t, "http://"+addr, "trades") - 1
	st := allDelivered(t, ctx, n)
	t.Logf("%d rows, %d greetings, %d resumes", n, st.Greetings, len(st.Resumes))
	if e := errs.List(); len(e) > 0 {
		t.Fatalf("the page logged errors: %q", e)
	}
}
