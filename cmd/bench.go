package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"

	"github.com/streamcast/streamcast/internal/loadgen"
)

func newBenchCmd(a *app) *cobra.Command {
	var (
		cfg    = loadgen.DefaultConfig()
		idle   = loadgen.DefaultIdleConfig()
		tsUnit string
		asJSON bool
		tlsFl  *clientTLS
	)
	cmd := &cobra.Command{
		Use:   "bench URL",
		Short: "Load a running server with publishers and subscribers and report rates and latencies",
		Long: `Load a running server's stream with publishers and subscribers, then report
what it sustained: publish rows/s and ack latency, frames delivered/s and
publish→receive latency, drops (4429) and gaps, and the server's CPU seconds
(read from its /stats).

URL names a stream, e.g. ws://127.0.0.1:8765/bench. Rows are generated
from the stream's schema (from the greeting), with the send time in an int64
column (--ts-column, default ` + "`event_ts`" + `), every other column a fixed value.

A durable stream keeps every row bench publishes, for good. So bench refuses,
with exit 1, to publish into a durable stream that already holds rows: point
it at a scratch stream with the same schema (live-only, or durable and
empty), or pass --into-existing to write there anyway. Whenever it writes into
a durable stream it prints on stderr the offsets its rows took, so they can be
found. A run with --publishers 0 writes nothing and is never refused.

Subscribers read WebSocket frames, or Server-Sent Events with --sse;
publishers send WebSocket frames, or an HTTP POST per frame with
--http-publish. Subscribers attach live before publishers start; after --duration,
publishers stop, subscribers catch up, and the report is written: a table on
a terminal, JSON with --json or when stdout is not a terminal.

Run the server and bench on the same machine for latencies: both read the same
clock. A wss:// URL runs the load over TLS (--ca-file, --cert-file, --key-file
and --insecure as for tail), /stats included.

` + credentialsHelp + ` The user needs read and publish on the stream, and
stats on "*" for the server's CPU and memory figures.`,
		Example: `  streamcast bench --publishers 8 --rows-per-frame 100 --duration 10s ws://127.0.0.1:8765/bench
  streamcast bench --publishers 1 --rate 20000 --subscribers 100 --json ws://127.0.0.1:8765/bench
  streamcast bench --publishers 0 --subscribers 100 ws://127.0.0.1:8765/demo
  streamcast bench --sse --publishers 1 --rate 20000 --rows-per-frame 10 --subscribers 100 ws://127.0.0.1:8765/bench
  streamcast bench --http-publish --rows-per-frame 1000 --subscribers 0 ws://127.0.0.1:8765/bench
  streamcast bench --into-existing --rate 100 --duration 5s ws://127.0.0.1:8765/demo`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeStreamURLs,
		RunE: func(cmd *cobra.Command, args []string) (rerr error) {
			u, cred, err := streamURL(args[0])
			if err != nil {
				return err
			}
			cfg.URL, cfg.Dial.Credentials = u, cred
			tc, err := tlsFl.config(a.logger)
			if err != nil {
				return err
			}
			cfg.Dial.TLS = tc
			switch tsUnit {
			case "us", "µs":
			case "ns":
				cfg.TSNanos = true
			default:
				return usageError{fmt.Errorf("--ts-unit is %q; give us or ns", tsUnit)}
			}
			if cmd.Flags().Changed("idle") {
				idle.URL, idle.Dial = cfg.URL, cfg.Dial
				if err := idle.Validate(); err != nil {
					return usageError{err}
				}
				res, err := loadgen.Idle(cmd.Context(), idle)
				if err != nil {
					return err
				}
				if asJSON || !benchOnTerminal(a.stdout) {
					out, _ := json.Marshal(res)
					_, err = fmt.Fprintf(a.stdout, "%s\n", out)
					return err
				}
				_, err = fmt.Fprintf(a.stdout, "idle subscribers  %d\nserver RSS        %.1f MiB -> %.1f MiB\nper subscriber    %.1f KiB\ngoroutines        %d -> %d\n",
					res.Subscribers, float64(res.RSSBeforeBytes)/(1<<20), float64(res.RSSAfterBytes)/(1<<20),
					res.BytesPerSub/1024, res.GoroutinesBefore, res.GoroutinesAfter)
				return err
			}
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			res, err := loadgen.Run(cmd.Context(), cfg)
			if res.FirstOffset > 0 {
				fmt.Fprintf(a.stderr, "bench: wrote %d test rows to durable stream %q at offsets %d..%d%s\n",
					res.RowsPublished, res.Stream, res.FirstOffset, res.LastOffset, benchInterleaved(res))
			}
			if err != nil && (res.DurationS == 0 || !errors.Is(err, context.Canceled)) {
				return err
			}
			// An interrupted run still reports what it measured, then fails.
			defer func() {
				if err != nil && rerr == nil {
					rerr = fmt.Errorf("bench interrupted after %.1f s: %w", res.DurationS, err)
				}
			}()
			if asJSON || !benchOnTerminal(a.stdout) {
				out, err := json.Marshal(res)
				if err != nil {
					return fmt.Errorf("encode bench result: %w", err)
				}
				_, err = fmt.Fprintf(a.stdout, "%s\n", out)
				return err
			}
			return writeBenchTable(a.stdout, res)
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Publishers, "publishers", cfg.Publishers, "publisher connections")
	f.IntVar(&cfg.RowsPerFrame, "rows-per-frame", cfg.RowsPerFrame, "rows per publish frame (more than 1 sends batches)")
	f.Float64Var(&cfg.Rate, "rate", cfg.Rate, "total rows/s across publishers (0 = as fast as the server acknowledges)")
	f.IntVar(&cfg.Subscribers, "subscribers", cfg.Subscribers, "subscriber connections")
	f.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long publishers send")
	f.StringVar(&cfg.TSColumn, "ts-column", cfg.TSColumn, "int64 `column` that carries each row's send time")
	f.StringVar(&tsUnit, "ts-unit", "us", "unit of the send time: us or ns")
	f.IntVar(&cfg.MaxInFlight, "max-in-flight", cfg.MaxInFlight, "publish frames each publisher keeps unanswered")
	f.DurationVar(&cfg.Coalesce, "coalesce", cfg.Coalesce, "let a publisher's frames share socket writes, each held at most this long (0 = a write per frame, as a client that does not coalesce)")
	f.DurationVar(&cfg.Drain, "drain", cfg.Drain, "after publishing stops, how long subscribers may take to catch up")
	f.IntVar(&idle.Subscribers, "idle", 0, "instead of a load, hold `N` idle subscribers and report the server's RSS per subscriber (use a freshly started server)")
	f.DurationVar(&idle.Settle, "idle-settle", idle.Settle, "with --idle, how long to wait before reading the server's RSS")
	f.BoolVar(&cfg.Compress, "compress", false, "subscribers offer permessage-deflate as browsers do and receive compressed frames; one in 25 inflates and times its rows, the others count frames")
	f.BoolVar(&cfg.SSE, "sse", false, "subscribers read Server-Sent Events (GET with Accept: text/event-stream) instead of WebSocket frames")
	f.BoolVar(&cfg.HTTPPublish, "http-publish", false, "publishers POST each frame as an HTTP request on a keep-alive connection, one request in flight each (--max-in-flight and --coalesce do not apply)")
	f.BoolVar(&cfg.IntoExisting, "into-existing", false, "publish even into a durable stream that already holds rows (the test rows stay there for good)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object, even on a terminal")
	tlsFl = addClientTLSFlags(f)
	_ = cmd.RegisterFlagCompletionFunc("ts-unit", cobra.FixedCompletions([]string{"us", "ns"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// writeBenchTable prints the result as aligned text.
func writeBenchTable(w io.Writer, r loadgen.Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	rate := "max"
	if r.TargetRate > 0 {
		rate = fmt.Sprintf("%.0f rows/s", r.TargetRate)
	}
	lat := func(l loadgen.Latency) string {
		if l.Count == 0 {
			return "-"
		}
		return fmt.Sprintf("p50 %.3f ms  p99 %.3f ms  max %.3f ms", l.P50, l.P99, l.Max)
	}
	cpu := "not reported by /stats"
	if r.ServerCPUSeconds >= 0 {
		cpu = fmt.Sprintf("%.2f s (%.0f%% of a core)", r.ServerCPUSeconds, r.ServerCPUPercent)
	}
	writes := "one socket write per frame"
	switch {
	case r.HTTPPublish:
		writes = "an HTTP POST per frame"
	case r.CoalesceMS > 0:
		writes = fmt.Sprintf("frames coalesced (held ≤ %g ms)", r.CoalesceMS)
	}
	subs := fmt.Sprintf("%d subscribers", r.Subscribers)
	if r.SSE {
		subs = fmt.Sprintf("%d event-stream subscribers", r.Subscribers)
	}
	rows := [][2]string{
		{"stream", fmt.Sprintf("%s (%s)", r.Stream, r.URL)},
		{"load", fmt.Sprintf("%d publishers × %d rows/frame at %s (%s), %s, %.1f s", r.Publishers, r.RowsPerFrame, rate, writes, subs, r.DurationS)},
		{"published", fmt.Sprintf("%d rows, %.0f rows/s, %d errors", r.RowsPublished, r.PublishRowsPerS, r.PublishErrors)},
		{"ack latency", lat(r.AckLatency)},
		{"delivered", fmt.Sprintf("%d frames, %.0f frames/s", r.FramesDelivered, r.DeliveredPerS)},
		{"publish→receive", lat(r.DeliveryLatency)},
		{"drops", fmt.Sprintf("%d too slow (4429), %d gaps, %d missing, %d subscriber errors", r.Drops, r.Gaps, r.Missing, r.SubscriberErrors)},
		{"server CPU", cpu},
		{"bench CPU", fmt.Sprintf("%.2f s (%.0f%% of a core)", r.ClientCPUSeconds, r.ClientCPUPercent)},
	}
	if r.FirstErrorMessage != "" {
		rows = append(rows, [2]string{"first error", r.FirstErrorMessage})
	}
	for _, row := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], strings.ReplaceAll(row[1], "\t", " "))
	}
	return tw.Flush()
}

// benchInterleaved notes when bench's rows do not fill their offset range:
// another publisher's rows sit among them.
func benchInterleaved(r loadgen.Result) string {
	if r.LastOffset-r.FirstOffset+1 == r.RowsPublished {
		return ""
	}
	return " (interleaved with other publishers' rows)"
}

// benchOnTerminal reports whether w is a terminal.
func benchOnTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	return term.IsTerminal(f.Fd())
}
