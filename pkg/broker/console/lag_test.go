//go:build linux

package console_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/internal/testkit/brokertest"
	"github.com/streamcast/streamcast/pkg/broker"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta/config"
)

// lagSpeed is how much faster than the wall clock the broker's clock runs
// in TestConsoleFlagsGrowingPublishLag: the page judges a lag growing over
// a minute of the server's time (served_at), which this makes seconds.
const lagSpeed = 8

// TestConsoleFlagsGrowingPublishLag serves a durable stream that nothing
// publishes (no maintenance children) while rows arrive, on a clock
// running lagSpeed times the wall's, and checks that the streams view
// flags the publish lag cell and the row once the lag has grown for a
// minute of server time; then serves it again with its seal and publish
// children, and checks the flag clears once the rows are published.
func TestConsoleFlagsGrowingPublishLag(t *testing.T) {
	if testing.Short() {
		t.Skip("builds streamcast and starts child processes")
	}
	if !testkit.SoakFull() {
		// About 18 s of waiting for the lag to grow, to keep the README's
		// test run short; CI runs it every time.
		t.Skip("the growing-lag flag runs under " + testkit.SoakEnv + "=full")
	}
	// The children's command builds while the lag grows.
	type built struct {
		path string
		err  error
	}
	exe := make(chan built, 1)
	dir := t.TempDir()
	go func() {
		p, err := testkit.BuildStreamcast(dir)
		exe <- built{p, err}
	}()
	t.Cleanup(func() { <-exe })
	ctx, errs := startBrowser(t)
	origin := time.Now()
	clock := logstore.Clock(func() time.Time {
		return origin.Add(time.Since(origin) * lagSpeed)
	})
	addr := freeAddr(t)
	cfg := tradesConfig(addr, t.TempDir())
	_, stop := brokertest.Serve(t, cfg, broker.Options{Clock: clock})
	stopLoad := load(t, "ws://"+addr, "trades", 200, 0)
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+addr+"/")); err != nil {
		t.Fatal(err)
	}
	lagCell := `document.querySelector('tr[data-stream="trades"] td:nth-child(10)')`
	row := `document.querySelector('tr[data-stream="trades"]')`
	waitJS(t, ctx, 5*time.Second, "the stream's row with a publish lag", lagCell+` !== null && `+lagCell+`.textContent.includes("rows")`, `document.querySelector("#streams-view").innerText`)
	if cls, _ := chromedp.Run(ctx, chromedp.Evaluate[string](lagCell+`.className`)); cls != "num " && cls != "num" {
		t.Fatalf("a young publish lag is flagged at once: class %q", cls)
	}
	// Past 120 s of lag that grew for 50 s of server time: 120/lagSpeed
	// wall seconds at the least; the cap leaves room for a loaded box.
	waitJS(t, ctx, 60*time.Second, "the growing publish lag flagged", lagCell+`.classList.contains("bad") && `+row+`.className === "bad"`,
		lagCell+`.className + " " + `+lagCell+`.textContent`)
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](lagCell+`.textContent`))
	t.Logf("flagged lag cell: %s", text)
	screenshot(t, ctx, "console-publish-lag.png")

	// Publishing resumes: the same stream served with its children,
	// which seal and publish what is buffered.
	n := stopLoad()
	stop()
	cfg.Maintain = config.Maintain{Enabled: true, FlushEvery: time.Second, SealEvery: 100 * time.Millisecond, PublishEvery: 200 * time.Millisecond, CleanEvery: 500 * time.Millisecond}
	b := <-exe
	exe <- b // for the cleanup
	if b.err != nil {
		t.Fatal(b.err)
	}
	srv, _ := brokertest.Serve(t, cfg, broker.Options{Clock: clock, Executable: b.path})
	after := float64(clock.Now().UnixMicro()) / 1e6
	waitJS(t, ctx, 30*time.Second, "stats from the publishing server", fmt.Sprintf(`Number(document.querySelector("#streams").dataset.servedAt) > %f`, after), `document.querySelector("#streams").dataset.servedAt`)
	// The children publish every row first; the page then clears the
	// flag on its next poll. (The flag may clear earlier, once what is
	// left is too young to flag: that is the page's rule, not a fault.)
	published := func() string {
		for _, s := range srv.Stats().Streams {
			if s.Name == "trades" && s.PublishedThrough != nil {
				if *s.PublishedThrough >= n {
					return ""
				}
				return fmt.Sprintf("published through %d of %d rows", *s.PublishedThrough, n)
			}
		}
		return fmt.Sprintf("nothing published yet of %d rows", n)
	}
	for deadline := time.Now().Add(60 * time.Second); published() != ""; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the children did not publish every row: %s", published())
		}
	}
	waitJS(t, ctx, 30*time.Second, "the publish lag flag cleared", `!`+lagCell+`.classList.contains("bad") && !`+lagCell+`.classList.contains("warn") && `+row+`.className === ""`,
		lagCell+`.className + " " + `+lagCell+`.textContent + " " + document.querySelector("#streams-view").innerText`)
	// A restart leaves fetch errors (the page says so in its banner).
	if e := errs.List("Failed to fetch", "ERR_CONNECTION_REFUSED", "/stats"); len(e) > 0 {
		t.Fatalf("the page logged errors: %q", e)
	}
}
