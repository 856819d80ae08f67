package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/chromedp"

	"github.com/streamcast/streamcast/internal/testkit/brokertest"
)

// scriptSeconds reads the tab's JavaScript and total main-thread task
// time so far (Chromium's Performance metrics ScriptDuration and
// TaskDuration, in seconds).
func scriptSeconds(b *testing.B, ctx context.Context) (script, task float64) {
	b.Helper()
	m, err := chromedp.Call(ctx, performance.GetMetrics, cdp.Empty{})
	if err != nil {
		b.Fatal(err)
	}
	for _, x := range m.Metrics {
		switch x.Name {
		case "ScriptDuration":
			script = x.Value
		case "TaskDuration":
			task = x.Value
		}
	}
	return script, task
}

// BenchmarkConsoleTail20kRowsPerSecond measures what the console's stream
// view costs the browser while it tails a stream published at about
// 20,000 rows/s: JavaScript time and main-thread time per second of wall
// clock (from Chromium's performance metrics), the rows it received per
// second, and how long the page takes to answer an evaluation meanwhile
// (its responsiveness). Each iteration is one second of tail.
func BenchmarkConsoleTail20kRowsPerSecond(b *testing.B) {
	ctx, errs := startBrowser(b)
	base := brokertest.Start(b, tradesConfig("127.0.0.1:0", b.TempDir()))
	httpBase := "http://" + strings.TrimPrefix(base, "ws://")
	if _, err := chromedp.Call(ctx, performance.Enable, performance.EnableParams{}); err != nil {
		b.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(httpBase+"/#/s/trades")); err != nil {
		b.Fatal(err)
	}
	waitJS(b, ctx, 5*time.Second, "the greeting", `document.querySelectorAll("#schema tbody tr").length === 6`, `document.body.innerText`)
	load(b, base, "trades", 20000, 0)
	received := func() int64 {
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int64](`Number(document.querySelector("#tail").dataset.received)`))
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	waitJS(b, ctx, 10*time.Second, "the tail under load", `Number(document.querySelector("#tail").dataset.received) >= 20000`, `document.querySelector("#tail-status").textContent`)

	s0, t0 := scriptSeconds(b, ctx)
	r0, e0 := received(), endOffset(b, httpBase, "trades")
	var evalMax time.Duration
	start := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		until := time.Now().Add(time.Second)
		for time.Now().Before(until) {
			e := time.Now()
			if _, err := chromedp.Run(ctx, chromedp.Evaluate[int](`1`)); err != nil {
				b.Fatal(err)
			}
			evalMax = max(evalMax, time.Since(e))
			time.Sleep(100 * time.Millisecond)
		}
	}
	b.StopTimer()
	wall := time.Since(start).Seconds()
	s1, t1 := scriptSeconds(b, ctx)
	r1, e1 := received(), endOffset(b, httpBase, "trades")
	b.ReportMetric((s1-s0)/wall, "js-s/s")
	b.ReportMetric((t1-t0)/wall, "main-thread-s/s")
	b.ReportMetric(float64(r1-r0)/wall, "rows/s")
	b.ReportMetric(float64(e1-e0)/wall, "published-rows/s")
	b.ReportMetric(float64(evalMax.Microseconds())/1000, "max-eval-ms")
	if e := errs.List(); len(e) > 0 {
		b.Fatalf("the page logged errors: %q", e)
	}
}
