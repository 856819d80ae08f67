package ndjson

// How a stopped load says to go on: the advice after a refused line, an
// interruption or a failed frame must never lead to a duplicate or a gap.

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/wire"
)

// skipLinesIn returns the N of "--skip-lines N" in msg, or -1 when msg
// names none.
func skipLinesIn(msg string) int64 {
	m := regexp.MustCompile(`--skip-lines (\d+)`).FindStringSubmatch(msg)
	if m == nil {
		return -1
	}
	var n int64
	fmt.Sscan(m[1], &n)
	return n
}

func TestARefusedLinesAdviceResumesWithoutADuplicateOrAGap(t *testing.T) {
	// Line 7 is refused; a blank line and a CRLF line come before it, and
	// frames of 1, 2 and 4 rows cut the lines before it differently.
	lines := []string{string(trade(0)), string(trade(1)), "", string(trade(2)) + "\r", string(trade(3)), string(trade(4)), `{"event_ts":"soon"}`, string(trade(6)), "", string(trade(7))}
	const refused = 7
	for _, batch := range []int{1, 2, 4} {
		t.Run(fmt.Sprint("batch ", batch), func(t *testing.T) {
			url := serve(t, nil) + "/trades"
			path := writeFile(t, "in.ndjson", strings.Join(lines, "\n")+"\n")
			_, err := Load(ctxT(t), url, loadDefaults(LoadOptions{Inputs: []string{path}, BatchSize: batch}))
			if err == nil {
				t.Fatal("a load with a refused line succeeded")
			}
			n := skipLinesIn(err.Error())
			if n != refused-1 {
				t.Fatalf("the advice %q names --skip-lines %d, want %d (the lines before line %d)", err, n, refused-1, refused)
			}
			if want := fmt.Sprintf("the %d lines before it are published", refused-1); !strings.Contains(err.Error(), want) {
				t.Errorf("the advice %q does not say %q", err, want)
			}

			// The user fixes the line and follows the advice.
			fixed := append([]string(nil), lines...)
			fixed[refused-1] = string(trade(5))
			path = writeFile(t, "in.ndjson", strings.Join(fixed, "\n")+"\n")
			sum, err := Load(ctxT(t), url, loadDefaults(LoadOptions{Inputs: []string{path}, BatchSize: batch, SkipLines: n}))
			if err != nil {
				t.Fatal(err)
			}
			if sum.SkippedLines != n || sum.LinesRead != int64(len(lines)) || sum.RowsPublished != 3 {
				t.Errorf("the rerun's summary %+v, want %d lines skipped and 3 rows published", sum, n)
			}
			var want [][]byte
			for i := range 8 {
				want = append(want, trade(i))
			}
			if got, want := everyRow(t, url), canonical(t, want...); got != want {
				t.Errorf("stream holds\n%s\nwant each row once\n%s", got, want)
			}
		})
	}
}

func TestSkipLinesCountsTheLinesOfEveryInputAsOne(t *testing.T) {
	url := serve(t, nil) + "/trades"
	a := writeFile(t, "a.ndjson", string(trade(0))+"\n"+string(trade(1))+"\n")
	b := writeFile(t, "b.ndjson", string(trade(2))+"\n"+`{"side":1}`+"\n"+string(trade(4)))
	_, err := Load(ctxT(t), url, loadDefaults(LoadOptions{Inputs: []string{a, b}}))
	if err == nil || !strings.Contains(err.Error(), b+":2:") || skipLinesIn(err.Error()) != 3 {
		t.Fatalf("err %v, want %s:2 refused and --skip-lines 3", err, b)
	}
	b = writeFile(t, "b.ndjson", string(trade(2))+"\n"+string(trade(3))+"\n"+string(trade(4)))
	if _, err := Load(ctxT(t), url, loadDefaults(LoadOptions{Inputs: []string{a, b}, SkipLines: 3})); err != nil {
		t.Fatal(err)
	}
	if got, want := everyRow(t, url), canonical(t, trade(0), trade(1), trade(2), trade(3), trade(4)); got != want {
		t.Errorf("stream holds\n%s\nwant\n%s", got, want)
	}
}

func TestSkippedLinesAreNeitherReadNorQuarantined(t *testing.T) {
	url, frames := markServer(t, 0, func(string) string { return `{"ok":[7]}` })
	var q strings.Builder
	in := "not json\n{\"side\":\"x\"}\n{\"side\":3}\n"
	sum, err := Load(ctxT(t), url+"/t", loadDefaults(LoadOptions{Stdin: strings.NewReader(in), SkipLines: 2, Quarantine: &q}))
	if err != nil {
		t.Fatal(err)
	}
	if q.Len() != 0 || sum.Quarantined != 0 || sum.SkippedLines != 2 || sum.LinesRead != 3 {
		t.Errorf("summary %+v, quarantine %q; want 2 lines skipped unread", sum, q.String())
	}
	if got := frames(); len(got) != 1 || got[0] != `{"side":3}` {
		t.Errorf("frames %q, want only line 3's row", got)
	}
}

func TestARefusedFirstLineNeedsNoSkipLines(t *testing.T) {
	url, frames := markServer(t, 0, func(string) string { return `{"ok":[7]}` })
	_, err := Load(ctxT(t), url+"/t", loadDefaults(LoadOptions{Stdin: strings.NewReader("{\"side\":\"x\"}\n{\"side\":2}\n")}))
	if err == nil || !strings.Contains(err.Error(), "nothing was sent — fix the line and rerun") || skipLinesIn(err.Error()) != -1 {
		t.Errorf("err %v, want a plain rerun advised", err)
	}
	if len(frames()) != 0 {
		t.Errorf("sent %q", frames())
	}
}

func TestAnExactlyOnceLoadsAdviceIsAPlainRerun(t *testing.T) {
	url, _ := markServer(t, 0, okFor)
	_, err := Load(ctxT(t), url+"/t", loadDefaults(LoadOptions{Stdin: strings.NewReader("{\"side\":1}\n{\"side\":\"x\"}\n"), Publisher: "loader"}))
	if err == nil || !strings.Contains(err.Error(), "rerun with the same --publisher and input") || skipLinesIn(err.Error()) != -1 {
		t.Errorf("err %v, want a rerun with the same --publisher and no --skip-lines", err)
	}
}

func TestAnInterruptedLoadNamesTheSkipLinesOfWhatItSent(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	err = loadFromQuietInput(t, r, func(s string) { _, _ = w.WriteString(s) })
	if !errors.Is(err, ErrInterrupted) || skipLinesIn(err.Error()) != 1 {
		t.Errorf("err %v, want an interruption advising --skip-lines 1", err)
	}
}

func TestSkipLinesIsRefusedNegativeOrWithAPublisher(t *testing.T) {
	for _, tt := range []struct {
		name string
		set  func(*LoadOptions)
		want string
	}{
		{"negative", func(o *LoadOptions) { o.SkipLines = -1 }, "--skip-lines is -1; give 0 or more"},
		{"with a publisher", func(o *LoadOptions) { o.SkipLines, o.Publisher = 3, "loader" }, "--skip-lines does not go with --publisher"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultLoadOptions()
			o.Stdin = strings.NewReader("")
			tt.set(&o)
			if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate: %v, want %q", err, tt.want)
			}
		})
	}
}

// holdingServer reads `frames` publish frames before it answers any, then
// answers the i-th (from 0) with reply(i), or closes the connection when
// reply returns "". Every frame is in flight when the first answer comes.
func holdingServer(t *testing.T, frames int, reply func(i int) string) string {
	return testkit.FakeServer(t, func(t *testing.T, c *websocket.Conn, r *http.Request) {
		g := wire.Greeting{Stream: "t", EndOffset: 100, Durable: true, Schema: []byte(sideSchema)}
		testkit.SendText(t, c, string(g.AppendJSON(nil)))
		for range frames {
			if _, _, err := c.ReadMessage(); err != nil {
				return
			}
		}
		for i := range frames {
			a := reply(i)
			if a == "" {
				return
			}
			testkit.SendText(t, c, a)
		}
		for {
			if _, _, err := c.ReadMessage(); err != nil {
				return
			}
		}
	})
}

func TestAFailedFramesAdviceAccountsForTheFramesPipelinedBehindIt(t *testing.T) {
	const ok, failed = `{"ok":[7]}`, `{"error":"commit_failed","detail":"disk full"}`
	tests := []struct {
		name    string
		replies []string // per frame (one row, one line each); "" closes
		want    []string
		skip    int64
	}{
		{"nothing behind it landed", []string{ok, failed, failed, failed, failed}, []string{"the line before it is published and nothing from it on landed"}, 1},
		{"frames behind it landed", []string{ok, failed, ok, failed, ok}, []string{"no --skip-lines resumes without a duplicate or a gap", "publish only the lines that did not land (-:2, -:4)"}, 5},
		{"the last frames behind it failed", []string{ok, failed, ok, failed, failed}, []string{"publish only the lines that did not land (-:2), then rerun with --skip-lines 3"}, 3},
		{"the connection was lost behind it", []string{ok, failed, ok, ""}, []string{"whether the rows sent from it on landed is unknown"}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := holdingServer(t, 5, func(i int) string { return tt.replies[min(i, len(tt.replies)-1)] })
			in := "{\"side\":1}\n{\"side\":2}\n{\"side\":3}\n{\"side\":4}\n{\"side\":5}\n"
			_, err := Load(ctxT(t), url+"/t", loadDefaults(LoadOptions{Stdin: strings.NewReader(in)}))
			if err == nil {
				t.Fatal("a load with a failed frame succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
			if n := skipLinesIn(err.Error()); n != tt.skip {
				t.Errorf("%q names --skip-lines %d, want %d", err, n, tt.skip)
			}
		})
	}
}
