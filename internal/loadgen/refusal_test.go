package loadgen

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestRunRefusesADurableStreamThatHoldsRowsUnlessToldTo(t *testing.T) {
	base := serve(t)
	short := func(c *Config) {
		c.Publishers, c.Rate, c.Subscribers, c.Duration, c.Drain = 1, 200, 1, 200*time.Millisecond, 5*time.Second
	}
	// Empty: it runs, and says which offsets its rows took.
	first, err := Run(ctxT(t), runConfig(base+"/trades", short))
	if err != nil {
		t.Fatal(err)
	}
	if first.RowsPublished == 0 || first.FirstOffset != 1 || first.LastOffset != first.RowsPublished {
		t.Fatalf("a run into an empty stream wrote %d rows at offsets %d..%d; want 1..%d", first.RowsPublished, first.FirstOffset, first.LastOffset, first.RowsPublished)
	}

	// Now it holds rows: refused before publishing, naming them.
	_, err = Run(ctxT(t), runConfig(base+"/trades", short))
	var held *HoldsRows
	if !errors.As(err, &held) {
		t.Fatalf("a second run: %v, want *HoldsRows", err)
	}
	if held.Stream != "trades" || held.EndOffset != first.LastOffset+1 || !strings.Contains(held.Sample, `"event_ts":`) {
		t.Errorf("refusal %+v: want stream trades, end offset %d and a sample row", held, first.LastOffset+1)
	}

	// Without publishers nothing is written, so nothing is refused.
	if _, err := Run(ctxT(t), runConfig(base+"/trades", func(c *Config) {
		short(c)
		c.Publishers = 0
	})); err != nil {
		t.Errorf("a run without publishers: %v", err)
	}

	// IntoExisting writes, right after the rows the refused run left alone.
	again, err := Run(ctxT(t), runConfig(base+"/trades", func(c *Config) {
		short(c)
		c.IntoExisting = true
	}))
	if err != nil {
		t.Fatal(err)
	}
	if again.FirstOffset != first.LastOffset+1 || again.LastOffset != first.LastOffset+again.RowsPublished {
		t.Errorf("IntoExisting wrote %d rows at offsets %d..%d; want them from %d, after the first run's", again.RowsPublished, again.FirstOffset, again.LastOffset, first.LastOffset+1)
	}
}

func TestHoldsRowsSaysWhatIsThereWhatBenchWouldAddAndTheWayOut(t *testing.T) {
	sample := `{"event_ts":1,"symbol":"bench"}`
	tests := []struct {
		name string
		e    HoldsRows
		want []string
	}{
		{"paced", HoldsRows{Stream: "trades", EndOffset: 17879, Rate: 500, Duration: 10 * time.Second, Sample: sample},
			[]string{`stream "trades" is durable and already holds 17878 rows (offsets 1..17878)`, "about 5000 permanent test rows to it (--rate 500 for --duration 10s)", "each like " + sample, "--into-existing"}},
		{"one row, flat out", HoldsRows{Stream: "t", EndOffset: 2, Duration: time.Second, Sample: sample},
			[]string{"already holds 1 row (offsets 1..1)", "as many permanent test rows as the server acknowledges in 1s (no --rate)"}},
		{"after a restore's jump", HoldsRows{Stream: "t", EndOffset: restoreJump + 10, Duration: time.Second, Sample: sample},
			[]string{"already holds rows through offset 1099511627785;"}},
		{"a wide row is clipped", HoldsRows{Stream: "t", EndOffset: 2, Duration: time.Second, Sample: `{"s":"` + strings.Repeat("é", 200) + `"}`},
			[]string{"é…\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := tt.e.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q\nlacks %q", msg, w)
				}
			}
			if n := strings.Count(msg, "\n"); n != 1 {
				t.Errorf("%q has %d line breaks; want two lines", msg, n)
			}
		})
	}
}
