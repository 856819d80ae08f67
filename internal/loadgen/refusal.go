package loadgen

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// HoldsRows is Run's refusal to publish into a durable stream that already
// holds rows when Config.IntoExisting is not set. Its message names the
// stream, its rows, the rows bench would add and the two ways out.
type HoldsRows struct {
	Stream    string
	EndOffset int64         // the stream's frontier: its rows sit at offsets below it
	Rate      float64       // Config.Rate; 0 = as fast as the server acknowledges
	Duration  time.Duration // Config.Duration
	Sample    string        // one row as bench would publish it
}

// restoreJump is the least offset jump a restore may record (docs/restore.md):
// past it, EndOffset-1 no longer counts the stream's rows.
const restoreJump = 1 << 40

// maxSample is how much of the sample row the message quotes.
const maxSample = 200

func (e *HoldsRows) Error() string {
	held := fmt.Sprintf("already holds rows through offset %d", e.EndOffset-1)
	if n := e.EndOffset - 1; n < restoreJump {
		held = fmt.Sprintf("already holds %d %s (offsets 1..%d)", n, plural(n, "row", "rows"), n)
	}
	adds := fmt.Sprintf("as many permanent test rows as the server acknowledges in %v (no --rate)", e.Duration)
	if e.Rate > 0 {
		n := int64(e.Rate*e.Duration.Seconds() + 0.5)
		adds = fmt.Sprintf("about %d permanent test %s to it (--rate %g for --duration %v)", n, plural(n, "row", "rows"), e.Rate, e.Duration)
	}
	return fmt.Sprintf("bench: stream %q is durable and %s; bench would append %s, generated from its schema, each like %s\n"+
		"point bench at a scratch stream (live-only, or durable and empty), or pass --into-existing to write them anyway",
		e.Stream, held, adds, clip(e.Sample, maxSample))
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// clip shortens s to at most n bytes, on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
