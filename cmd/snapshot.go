package cmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/history"
	"github.com/streamcast/streamcast/pkg/meta/sqlview"
)

// snapshotted is snapshot's summary line, on stderr when the rows go to
// stdout, else on stdout.
type snapshotted struct {
	Stream      string   `json:"stream"`
	StreamID    string   `json:"stream_id"`
	Format      string   `json:"format"`
	Rows        int64    `json:"rows"`
	StartOffset int64    `json:"start_offset"` // the first offset read from
	EndOffset   int64    `json:"end_offset"`   // one past the last offset the export covers
	Files       []string `json:"files"`
	Seconds     float64  `json:"seconds"`
}

// historyFlags are the flags that address a stream's history and fix the
// point it is read as of, shared by the commands that read it.
type historyFlags struct {
	metadata string
	asOffset int64
	asTS     string
	broker   string
	maxTail  int64
	// live is sql --follow: --broker then feeds the live tail above the
	// published base, and no fixed point may be given.
	live bool
}

func addHistoryFlags(cmd *cobra.Command) *historyFlags {
	h := &historyFlags{}
	f := cmd.Flags()
	f.StringVar(&h.metadata, "metadata", "", "read the stream through its published metadata `URI` (file://… or s3://…, the greeting's metadata), without the server's root")
	f.Int64Var(&h.asOffset, "as-of-offset", -1, "read every row up to and including offset `N` (past the published end only with --broker)")
	f.StringVar(&h.asTS, "as-of-ts", "", "read every published row stamped at or before `T` (RFC 3339, or µs since the epoch)")
	f.StringVar(&h.broker, "broker", "", "read rows past the published end from the server at ws://host:port/STREAM (with --as-of-offset, or sql --follow)")
	f.Int64Var(&h.maxTail, "max-tail", history.DefaultMaxTail, "refuse to read more than `N` rows from --broker")
	return h
}

// options builds the reader's options from the flags and the
// configuration (root, published prefix, S3).
func (h *historyFlags) options(cmd *cobra.Command, a *app, stream string) (history.Options, error) {
	o := history.Options{Stream: stream, Broker: h.broker, MaxTail: h.maxTail, S3: a.cfg.S3}
	if h.metadata != "" {
		o.MetadataURI = h.metadata
	} else {
		o.Root, o.Published = a.cfg.Root, a.cfg.Published
	}
	if cmd.Flags().Changed("as-of-offset") {
		if h.asOffset < 0 {
			return o, fmt.Errorf("--as-of-offset %d is negative; give an offset of 0 or more", h.asOffset)
		}
		n := h.asOffset
		o.AsOfOffset = &n
	}
	if h.asTS != "" {
		t, err := parseTime(h.asTS)
		if err != nil {
			return o, fmt.Errorf("--as-of-ts: %w", err)
		}
		o.AsOfTS = &t
	}
	switch {
	case o.AsOfOffset != nil && o.AsOfTS != nil:
		return o, errors.New("--as-of-offset and --as-of-ts both fix the point the history is read as of; give one")
	case h.live && (o.AsOfOffset != nil || o.AsOfTS != nil):
		return o, errors.New("--follow keeps the answer current to the newest row; leave out --as-of-offset and --as-of-ts")
	case h.broker != "" && o.AsOfOffset == nil && !h.live:
		return o, errors.New("--broker reads rows past the published end up to --as-of-offset N (or, for sql, live with --follow); give one of them too, or drop --broker")
	case h.maxTail <= 0:
		return o, fmt.Errorf("--max-tail %d: give a row count of 1 or more", h.maxTail)
	}
	if h.broker != "" {
		u, cred, err := streamURL(h.broker)
		if err != nil {
			return o, err
		}
		o.Broker, o.Dial.Credentials = u, cred
	}
	return o, nil
}

// parseTime reads RFC 3339 (with or without fractional seconds) or an
// integer of µs since the epoch.
func parseTime(s string) (time.Time, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMicro(n), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither RFC 3339 (2026-01-02T15:04:05Z) nor µs since the epoch", s)
	}
	return t, nil
}

func newSnapshotCmd(a *app) *cobra.Command {
	var (
		format      string
		output      string
		start, end  int64
		rowsPerFile int64
		hf          *historyFlags
	)
	cmd := &cobra.Command{
		Use:   "snapshot STREAM",
		Short: "Export a stream's history as of a fixed point",
		Long: `Export the rows of STREAM across all its logs (migrated ones included) as
one table, in offset order, as of a fixed point: everything published (the
default), every row up to --as-of-offset N, or every published row stamped
at or before --as-of-ts T. Columns are unioned by name; a column a log lacks
is null there. The stream is read from the published tables under the
configured root (the server need not run), or from anywhere through
--metadata URI, the greeting's metadata (file://… or s3://…; S3
credentials come from the standard AWS environment).

--format ndjson (the default) prints one JSON object per row:
streamcast_offset, streamcast_ts, then the columns. --format frames prints
[offset,ts,row] lines, byte-identical to what the server sends and tail
prints. --format parquet and --format arrow (Arrow IPC file) need -o.
-o FILE writes a file (never over an existing one); -o DIR/ (an existing
directory, or a name ending in /) writes part-00000.<format>, … of
--rows-per-file rows each.

--start-offset and --end-offset bound the rows to [start, end). A range no
tier holds, rows below the retention floor, an --as-of-ts later than what
is published, and a retired log whose table lost rows are refused, naming
the numbers: never answered short. Past the published end,
--as-of-offset N needs --broker, which reads the rest from the server (up
to --max-tail rows).

A summary line (rows, offsets, files) goes to stdout when the rows go to a
file, else to stderr. On a terminal, progress is shown.`,
		Example: `  streamcast snapshot demo > demo.ndjson
  streamcast snapshot demo --format parquet -o demo.parquet
  streamcast snapshot demo --format frames --start-offset 1000 --end-offset 2000
  streamcast snapshot demo --as-of-offset 5000 --broker ws://127.0.0.1:8765/demo -o demo.ndjson
  streamcast snapshot trades --metadata s3://bucket/tables/trades/trades.metadata.json --format parquet -o exports/`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeStreamNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			stream := args[0]
			if err := meta.CheckName(stream); err != nil {
				return usageError{err}
			}
			opts, err := hf.options(cmd, a, stream)
			if err != nil {
				return usageError{err}
			}
			switch {
			case start < 0 || end < 0:
				return usageError{errors.New("--start-offset and --end-offset are offsets of 0 or more")}
			case end != 0 && end < start:
				return usageError{fmt.Errorf("--end-offset %d is below --start-offset %d; the range is [start, end)", end, start)}
			case rowsPerFile <= 0:
				return usageError{fmt.Errorf("--rows-per-file %d: give 1 or more", rowsPerFile)}
			case !slices.Contains(snapshotFormats(), format):
				return usageError{fmt.Errorf("--format %q: want one of %s", format, strings.Join(snapshotFormats(), ", "))}
			}
			eo := history.ExportOptions{Format: format, From: start, To: end, RowsPerFile: rowsPerFile, Out: a.stdout}
			switch {
			case output == "" && (format == history.FormatParquet || format == history.FormatArrow):
				return usageError{fmt.Errorf("--format %s writes a file: give -o FILE (or -o DIR/ for one file per --rows-per-file rows)", format)}
			case output == "":
			case (strings.HasSuffix(output, "/") || isDir(output)) && format == string(sqlview.FormatCSV):
				return usageError{errors.New("--format csv writes one file: give -o FILE (or --format parquet, arrow or ndjson for a directory of parts)")}
			case strings.HasSuffix(output, "/") || isDir(output):
				if err := os.MkdirAll(output, 0o755); err != nil {
					return err
				}
				eo.Dir = output
			default:
				eo.Path = output
			}
			if end != 0 {
				eo.To = end
			}
			t0 := time.Now()
			r, err := history.Open(cmd.Context(), opts)
			if err != nil {
				return err
			}
			defer r.Close()
			prog := newProgressLine(a.stderr, benchOnTerminal(a.stderr))
			eo.Progress = func(rows int64) {
				prog.draw(func(el time.Duration) string {
					return fmt.Sprintf("snapshot: %d rows, %.0f rows/s, %s", rows, float64(rows)/max(el.Seconds(), 1e-9), el.Round(time.Second))
				})
			}
			var res history.ExportResult
			if format == string(sqlview.FormatCSV) {
				res, err = sqlview.ExportCSV(cmd.Context(), r, eo)
			} else {
				res, err = r.Export(cmd.Context(), eo)
			}
			prog.clear()
			if err != nil {
				return err
			}
			from, to := r.Extent()
			if start != 0 {
				from = start
			}
			if end != 0 {
				to = end
			}
			sum := snapshotted{Stream: stream, StreamID: r.Metadata().StreamID, Format: format, Rows: res.Rows,
				StartOffset: from, EndOffset: to, Files: res.Files, Seconds: time.Since(t0).Seconds()}
			if sum.Files == nil {
				sum.Files = []string{}
			}
			b, err := json.Marshal(sum)
			if err != nil {
				return err
			}
			w := a.stdout
			if output == "" {
				w = a.stderr
			}
			_, err = fmt.Fprintf(w, "%s\n", b)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&format, "format", history.FormatNDJSON, "output `format`: "+strings.Join(snapshotFormats(), ", "))
	f.StringVarP(&output, "output", "o", "", "write to `FILE` (or into DIR/, one file per --rows-per-file rows) instead of stdout")
	f.Int64Var(&start, "start-offset", 0, "export rows from offset `N` on (default: the first the stream holds)")
	f.Int64Var(&end, "end-offset", 0, "export rows below offset `N` (default: the end of the fixed point)")
	f.Int64Var(&rowsPerFile, "rows-per-file", history.DefaultRowsPerFile, "rows per file when -o names a directory")
	hf = addHistoryFlags(cmd)
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions(snapshotFormats(), cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// snapshotFormats are history's export formats and csv, which is sql's
// CSV writer over the same rows.
func snapshotFormats() []string { return append(history.Formats(), string(sqlview.FormatCSV)) }

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
