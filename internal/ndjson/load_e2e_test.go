package ndjson

// End-to-end tests of Load and Tail (the engines of `streamcast publish` and
// `streamcast tail`) against the real broker on 127.0.0.1.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/schema"
	"github.com/streamcast/streamcast/pkg/wire"
)

// canonical returns the demo schema's canonical encoding of each row.
func canonical(t *testing.T, rows ...[]byte) string {
	t.Helper()
	sch, err := schema.Compile([]byte(config.DemoSchema))
	if err != nil {
		t.Fatal(err)
	}
	var b []byte
	for _, r := range rows {
		if b, err = sch.AppendCanonical(b, r); err != nil {
			t.Fatal(err)
		}
		b = append(b, '\n')
	}
	return string(b)
}

// everyRow tails the stream from the earliest row to the frontier, rows only.
func everyRow(t *testing.T, url string) string {
	t.Helper()
	var out bytes.Buffer
	if _, err := Tail(ctxT(t), url, &out, tailDefaults(TailOptions{Offset: wire.At(0), UntilCaughtUp: true, Rows: true})); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadPublishesEveryLineOfItsInputsInOrder(t *testing.T) {
	for _, batch := range []int{1, 7} {
		t.Run(fmt.Sprint("batch ", batch), func(t *testing.T) {
			url := serve(t, nil) + "/trades"
			var rows [][]byte
			var a, b strings.Builder
			for i := range 30 {
				rows = append(rows, trade(i))
				w := &a
				if i >= 20 {
					w = &b
				}
				w.Write(trade(i))
				if i%5 == 0 {
					w.WriteString("\r\n\n") // CRLF, then a blank line
				} else {
					w.WriteString("\n")
				}
			}
			first := writeFile(t, "a.ndjson", a.String())
			second := writeFile(t, "b.ndjson", strings.TrimSuffix(b.String(), "\n")) // no final newline
			sum, err := Load(ctxT(t), url, loadDefaults(LoadOptions{Inputs: []string{first, second}, BatchSize: batch}))
			if err != nil {
				t.Fatal(err)
			}
			if sum.RowsPublished != 30 || sum.BlankLines != 6 || sum.LinesRead != 36 || sum.FirstOffset == wire.Null || sum.LastOffset-sum.FirstOffset != 29 {
				t.Errorf("summary %+v", sum)
			}
			if got, want := everyRow(t, url), canonical(t, rows...); got != want {
				t.Errorf("stream holds\n%s\nwant\n%s", got, want)
			}
		})
	}
}

func TestLoadStopsAtTheFirstRefusedLineAfterPublishingWhatCameBefore(t *testing.T) {
	url := serve(t, nil) + "/trades"
	input := string(trade(0)) + "\n" + string(trade(1)) + "\n" + `{"event_ts":"soon"}` + "\n" + string(trade(3)) + "\n"
	path := writeFile(t, "in.ndjson", input)
	sum, err := Load(ctxT(t), url, loadDefaults(LoadOptions{Inputs: []string{path}, BatchSize: 10}))
	var re *schema.RowError
	if !errors.As(err, &re) {
		t.Fatalf("err %T %v, want a *schema.RowError cause", err, err)
	}
	for _, w := range []string{path + ":3", `column "event_ts"`, "--quarantine"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q lacks %q", err, w)
		}
	}
	if sum.RowsPublished != 2 {
		t.Errorf("summary %+v, want the 2 rows before the refused line published", sum)
	}
	if got, want := everyRow(t, url), canonical(t, trade(0), trade(1)); got != want {
		t.Errorf("stream holds\n%s\nwant\n%s", got, want)
	}
}

func TestLoadWindowSendsAPartialBatchWhileTheInputIsQuiet(t *testing.T) {
	url := serve(t, nil) + "/trades"
	ctx := ctxT(t)
	live, err := wire.Subscribe(ctx, url, wire.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := Load(ctx, url, loadDefaults(LoadOptions{Stdin: pr, BatchSize: 100, Window: 20 * time.Millisecond}))
		done <- err
	}()
	for i := range 3 {
		fmt.Fprintf(pw, "%s\n", trade(i))
	}
	for i := range 3 { // arrive although the batch is not full and stdin is open
		if _, err := live.Recv(ctx); err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
	}
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestLoadFollowPublishesLinesAppendedToTheFileUntilStopped(t *testing.T) {
	url := serve(t, nil) + "/trades"
	path := writeFile(t, "grow.ndjson", string(trade(0))+"\n"+string(trade(1))+"\n")
	ctx, stop := context.WithCancel(ctxT(t))
	defer stop()
	live, err := wire.Subscribe(ctx, url, wire.SubscribeOptions{Offset: wire.At(0)})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	type result struct {
		sum LoadSummary
		err error
	}
	done := make(chan result, 1)
	go func() {
		// Batches of 100 never fill: the end of the file sends what waits.
		sum, err := Load(ctx, url, loadDefaults(LoadOptions{Inputs: []string{path}, Follow: true, BatchSize: 100, PollEvery: 10 * time.Millisecond}))
		done <- result{sum, err}
	}()
	recv := func(n int) {
		for range n {
			if _, err := live.Recv(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	recv(2)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "%s\n%s", trade(2), trade(3)[:10]) // the second line is still being written
	recv(1)
	fmt.Fprintf(f, "%s\n", trade(3)[10:])
	f.Close()
	recv(1)
	stop()
	r := <-done
	if r.err != nil {
		t.Fatalf("a followed load stopped by its context: %v, want nil", r.err)
	}
	if r.sum.RowsPublished != 4 || !r.sum.Complete {
		t.Errorf("summary %+v", r.sum)
	}
}

func TestLoadExactlyOnceResumesFromTheMark(t *testing.T) {
	url := serve(t, func(c *config.Config) { c.Streams[0].ExactlyOnce = true }) + "/trades"
	var rows [][]byte
	var in strings.Builder
	for i := range 50 {
		rows = append(rows, trade(i))
		fmt.Fprintf(&in, "%s\n", trade(i))
	}
	path := writeFile(t, "in.ndjson", in.String())
	// A first run that loads only the first 20 lines (as if it died there).
	head := writeFile(t, "head.ndjson", strings.Join(strings.SplitAfter(in.String(), "\n")[:20], ""))
	_, err := Load(ctxT(t), url, loadDefaults(LoadOptions{Inputs: []string{head}, Publisher: "loader", BatchSize: 7}))
	if err != nil {
		// The broker publishes exactly once: a 4412 here (why=broker or
		// any other) is a regression, not a reason to skip.
		t.Fatalf("an exactly-once load to a stream declared exactly_once: %v", err)
	}
	sum, err := Load(ctxT(t), url, loadDefaults(LoadOptions{Inputs: []string{path}, Publisher: "loader", BatchSize: 7}))
	if err != nil {
		t.Fatal(err)
	}
	if sum.ResumedFrom != 20 || sum.DuplicatesSkipped != 20 || sum.RowsPublished != 30 {
		t.Errorf("summary %+v", sum)
	}
	sum, err = Load(ctxT(t), url, loadDefaults(LoadOptions{Inputs: []string{path}, Publisher: "loader"}))
	if err != nil || sum.RowsPublished != 0 || sum.DuplicatesSkipped != 50 {
		t.Errorf("a rerun of a finished load: %+v, %v; want every row skipped", sum, err)
	}
	if got, want := everyRow(t, url), canonical(t, rows...); got != want {
		t.Errorf("stream holds\n%s\nwant each input row once\n%s", got, want)
	}
}

func TestTailReadsBackWhatLoadPublished(t *testing.T) {
	url := serve(t, nil) + "/trades"
	var in strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&in, "%s\n", trade(i))
	}
	sum, err := Load(ctxT(t), url, loadDefaults(LoadOptions{Stdin: strings.NewReader(in.String()), BatchSize: 100}))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res, err := Tail(ctxT(t), url, &out, tailDefaults(TailOptions{Offset: wire.At(sum.FirstOffset + 10), Count: 5}))
	if err != nil {
		t.Fatal(err)
	}
	if res.First != sum.FirstOffset+10 || res.Last != sum.FirstOffset+14 || strings.Count(out.String(), "\n") != 5 {
		t.Errorf("result %+v, output %q", res, out.String())
	}
	if !strings.HasPrefix(out.String(), fmt.Sprintf("[%d,", sum.FirstOffset+10)) {
		t.Errorf("output %q does not start with the frame of offset %d", out.String(), sum.FirstOffset+10)
	}
}

func TestLoadSendsTheFramesOfOneReadInOneSocketWrite(t *testing.T) {
	// 200 single-row frames in one read of the input, all of them inside
	// the window, each allowed to wait an hour for company: the loader
	// sends them once the read is handled, in one write, before the input
	// has more (docs/shell-tools.md, publish). A write per frame made the server read
	// and wake for each.
	url := serve(t, nil) + "/trades"
	var lines strings.Builder
	for i := range 200 {
		lines.Write(trade(i))
		lines.WriteString("\n")
	}
	pr, pw := io.Pipe()
	var writes atomic.Int64
	opts := loadDefaults(LoadOptions{Stdin: pr, MaxInFlight: 1000, Coalesce: time.Hour})
	opts.DialOptions.Dialer = testkit.CountingDialer(&writes)
	done := loadInBackground(url, opts, 200)
	if _, err := pw.Write([]byte(lines.String())); err != nil {
		t.Fatal(err)
	}
	// The server has all 200 while the input is still open, well before
	// anything else would flush them (the server's ping, whose pong
	// sends what is held first, comes after 20 s).
	tailCtx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	var out bytes.Buffer
	_, err := Tail(tailCtx, url, &out, tailDefaults(TailOptions{Offset: wire.At(0), Count: 200, Rows: true}))
	if n := strings.Count(out.String(), "\n"); n != 200 {
		t.Fatalf("the server had %d of the 200 rows after 5 s while publish waited for more input (%v): the frames waited for the next read", n, err)
	}
	if got := writes.Load(); got != 2 {
		t.Errorf("the handshake and 200 frames of one read took %d socket writes; want 2", got)
	}
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestLoadSendsItsLastFrameAtTheInputsEnd(t *testing.T) {
	// A last line without a newline becomes a frame only at the end of
	// the input, after its read was handled: it must not wait out the
	// coalescing delay (here an hour).
	url := serve(t, nil) + "/trades"
	in := string(trade(0)) + "\n" + string(trade(1))
	opts := loadDefaults(LoadOptions{Stdin: strings.NewReader(in), Coalesce: time.Hour})
	done := loadInBackground(url, opts, 2)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Load did not return in 10 s: it waited on the last frame, which it held")
	}
}

// loadInBackground runs Load and sends its error, or a mismatch with the
// rows it should have published, once it returns.
func loadInBackground(url string, opts LoadOptions, rows int64) <-chan error {
	done := make(chan error, 1)
	go func() {
		sum, err := Load(context.Background(), url, opts)
		if err == nil && sum.RowsPublished != rows {
			err = fmt.Errorf("published %d rows, want %d", sum.RowsPublished, rows)
		}
		done <- err
	}()
	return done
}
