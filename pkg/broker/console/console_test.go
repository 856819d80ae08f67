package console_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/streamcast/streamcast/internal/testkit/brokertest"
)

// TestConsoleStreamsViewShowsTheEndOffsetWithinTwoSeconds loads the
// streams view while a publisher writes about 2,000 rows/s, and checks
// that the end offset /stats reports appears in the table within 2 s,
// several times under load and once more, exactly, after the load stops.
func TestConsoleStreamsViewShowsTheEndOffsetWithinTwoSeconds(t *testing.T) {
	ctx, errs := startBrowser(t)
	base := brokertest.Start(t, tradesConfig("127.0.0.1:0", t.TempDir()))
	httpBase := "http://" + strings.TrimPrefix(base, "ws://")
	stop := load(t, base, "trades", 2000, 0)

	if err := chromedp.Do(ctx, chromedp.Navigate(httpBase+"/")); err != nil {
		t.Fatal(err)
	}
	const cell = `document.querySelector('tr[data-stream="trades"] td.end')`
	shown := `(` + cell + `||{}).textContent`
	shownNum := `Number((` + shown + `||"").replace(/,/g, ""))`
	for i := 0; i < 3; i++ {
		end := endOffset(t, httpBase, "trades")
		took := waitJS(t, ctx, 2*time.Second, fmt.Sprintf("end offset ≥ %d in the streams table", end), shownNum+` >= `+strconv.FormatInt(end, 10), shown)
		t.Logf("the table showed end offset ≥ %d after %s", end, took.Round(time.Millisecond))
		time.Sleep(300 * time.Millisecond) // let the load move the end on
	}
	stop()
	end := endOffset(t, httpBase, "trades")
	waitJS(t, ctx, 2*time.Second, fmt.Sprintf("end offset exactly %d once the load stopped", end), shownNum+` === `+strconv.FormatInt(end, 10), shown)
	// The live-only stream has no offsets: the table says so rather than 0.
	waitJS(t, ctx, 2*time.Second, "the live stream's kind", `(document.querySelector('tr[data-stream="live"] td:nth-child(2)')||{}).textContent === "live"`, `document.querySelector("#streams tbody").innerText`)
	screenshot(t, ctx, "console-streams.png")
	if e := errs.List(); len(e) > 0 {
		t.Fatalf("the page logged errors: %q", e)
	}
}

// tailState is what the tail shows: the counters it keeps on #tail and
// the offsets of the rows in the DOM.
const tailState = `(() => { const t = document.querySelector("#tail"); return {
  received: Number(t.dataset.received || 0), kept: Number(t.dataset.kept || 0),
  first: Number(t.dataset.first || 0), last: Number(t.dataset.last || 0),
  dom: [...document.querySelectorAll(".tail-rows .trow")].map((r) => Number(r.dataset.offset)),
  side: [...document.querySelectorAll(".tail-rows .trow")].map((r) => r.children[6].textContent),
  status: document.querySelector("#tail-status").textContent,
  error: document.querySelector("#tail-error").hidden ? "" : document.querySelector("#tail-error").textContent,
}; })()`

type tail struct {
	Received, Kept, First, Last int64
	DOM                         []int64
	Side                        []string
	Status, Error               string
}

// TestConsoleTailShowsEveryRowInOffsetOrder opens a stream's view under
// load and checks the live tail: the rows in the DOM are consecutive
// offsets, and between two samples the tail's last offset moved by
// exactly the number of rows it received (none missing, none twice);
// pause and resume lose nothing; a where filter narrows the rows to those
// it names; an offset past the end is refused in words with the numbers;
// a live-only stream's rows show without offsets.
func TestConsoleTailShowsEveryRowInOffsetOrder(t *testing.T) {
	ctx, errs := startBrowser(t)
	base := brokertest.Start(t, tradesConfig("127.0.0.1:0", t.TempDir()))
	httpBase := "http://" + strings.TrimPrefix(base, "ws://")
	stop := load(t, base, "trades", 2000, 0)

	if err := chromedp.Do(ctx, chromedp.Navigate(httpBase+"/#/s/trades")); err != nil {
		t.Fatal(err)
	}
	read := func() tail {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[tail](tailState))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// The schema table comes from the greeting.
	waitJS(t, ctx, 5*time.Second, "the schema table", `document.querySelectorAll("#schema tbody tr").length === 6`, `document.querySelector("#schema").innerText`)
	dense := func(what string, s tail) {
		t.Helper()
		for i := 1; i < len(s.DOM); i++ {
			if s.DOM[i] != s.DOM[i-1]+1 {
				t.Fatalf("%s: the DOM shows offset %d after %d: %v", what, s.DOM[i], s.DOM[i-1], s.DOM)
			}
		}
		if s.Kept > 0 && s.Last-s.First+1 != s.Kept {
			t.Fatalf("%s: the tail keeps %d rows but spans offsets %d–%d", what, s.Kept, s.First, s.Last)
		}
	}
	waitJS(t, ctx, 5*time.Second, "200 rows in the tail", `Number(document.querySelector("#tail").dataset.received) >= 200`, `document.querySelector("#tail-status").textContent`)
	a := read()
	dense("first sample", a)
	waitJS(t, ctx, 5*time.Second, "1,000 more rows", fmt.Sprintf(`Number(document.querySelector("#tail").dataset.received) >= %d`, a.Received+1000), `document.querySelector("#tail-status").textContent`)
	b := read()
	dense("second sample", b)
	if len(b.DOM) == 0 || b.DOM[len(b.DOM)-1] != b.Last {
		t.Fatalf("following the tail, the DOM's last row is not the last received (%d): %v", b.Last, b.DOM)
	}
	if b.Last-a.Last != b.Received-a.Received {
		t.Fatalf("between the samples the last offset moved %d→%d (%d) but %d rows arrived: rows were missed or repeated",
			a.Last, b.Last, b.Last-a.Last, b.Received-a.Received)
	}

	// Pause, let rows pass, resume: the tail picks up where it paused.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#tail-pause"))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, 2*time.Second, "paused", `document.querySelector("#tail-status").textContent.startsWith("paused")`, `document.querySelector("#tail-status").textContent`)
	p := read()
	end := endOffset(t, httpBase, "trades")
	waitFor(t, 5*time.Second, "500 rows published while paused", func() bool { return endOffset(t, httpBase, "trades") > end+500 })
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#tail-pause"))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, 5*time.Second, "the resumed tail past the rows sent while paused", fmt.Sprintf(`Number(document.querySelector("#tail").dataset.last) > %d`, end+500), `document.querySelector("#tail-status").textContent`)
	r := read()
	dense("after resume", r)
	if r.Last-p.Last != r.Received-p.Received {
		t.Fatalf("across pause and resume the last offset moved %d→%d but %d rows arrived", p.Last, r.Last, r.Received-p.Received)
	}

	// where narrows: side 1 only, which the load gives every even offset.
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS("#tail-where"), `{"side":1}`),
		chromedp.SetValue(chromedp.CSS("#tail-offset"), "1"),
		chromedp.Click(chromedp.CSS("#tail-start")),
	); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, 5*time.Second, "200 filtered rows", `Number(document.querySelector("#tail").dataset.received) >= 200 && document.querySelector("#greeting").textContent.includes("where")`, `document.querySelector("#tail-status").textContent`)
	w := read()
	if w.First != 2 || w.Last-w.First != 2*(w.Kept-1) {
		t.Fatalf("where side=1 from offset 1: kept %d rows spanning %d–%d; want every even offset from 2", w.Kept, w.First, w.Last)
	}
	for i, s := range w.Side {
		if s != "1" || w.DOM[i]%2 != 0 {
			t.Fatalf("where side=1: the DOM shows offset %d with side %q", w.DOM[i], s)
		}
	}

	screenshot(t, ctx, "console-tail.png")

	// A refusal in words, with its numbers.
	stop()
	end = endOffset(t, httpBase, "trades")
	ahead := end + 1000
	if err := chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`document.querySelector("#tail-where").value = ""`),
		chromedp.SetValue(chromedp.CSS("#tail-offset"), strconv.FormatInt(ahead, 10)),
		chromedp.Click(chromedp.CSS("#tail-start")),
	); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("4416 not replayable: offset %d is past %d, the next offset this stream will assign", ahead, end)
	waitJS(t, ctx, 5*time.Second, "the 4416 refusal", `document.querySelector("#tail-error").textContent.startsWith(`+strconv.Quote(want)+`)`, `document.querySelector("#tail-error").textContent`)

	// A live-only stream has no offsets: its rows show without one, and
	// pausing says what resuming cannot bring back.
	if err := chromedp.Do(ctx, chromedp.Navigate(httpBase+"/#/s/live")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, 5*time.Second, "the live stream's greeting", `document.querySelector("#greeting").textContent.startsWith("live-only")`, `document.querySelector("#greeting").textContent`)
	load(t, base, "live", 1000, 0)
	waitJS(t, ctx, 5*time.Second, "live rows shown without offsets", `Number(document.querySelector("#tail").dataset.received) >= 50 &&
		[...document.querySelectorAll(".tail-rows .trow .o")].every((c) => c.textContent === "–")`, `document.querySelector("#tail-status").textContent`)

	if e := errs.List(); len(e) > 0 {
		t.Fatalf("the page logged errors: %q", e)
	}
}

// waitFor polls cond every 20 ms until it holds, failing after limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// modulePage is a page of another origin that imports /streamcast.js
// from the broker and records every offset it delivers.
func modulePage(brokerAddr, stream string) http.Handler {
	page := `<!doctype html><meta charset="utf-8"><title>streamcast.js test</title>
<script type="module">
import { Subscription } from "http://` + brokerAddr + `/streamcast.js";
window.got = []; window.errors = []; window.resumes = []; window.greetings = 0;
const sub = new Subscription("ws://` + brokerAddr + `/` + stream + `", {
  offset: 0, minDelay: 50, maxDelay: 400,
  onRow: (r) => window.got.push(r.offset),
});
sub.addEventListener("greeting", () => window.greetings++);
sub.addEventListener("resume", (e) => window.resumes.push(e.detail.code));
sub.addEventListener("error", (e) => window.errors.push(e.detail.message));
window.sub = sub;
</script>`
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(page))
	})
}

var _ = httptest.NewServer
