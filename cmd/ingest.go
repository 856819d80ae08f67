package cmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/streamcast/streamcast/internal/ndjson"
	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
	"github.com/streamcast/streamcast/pkg/schema/source"
)

func newIngestCmd(a *app) *cobra.Command {
	var (
		format      string
		noPublish   bool
		skipRows    int64
		summaryPath string
	)
	cmd := &cobra.Command{
		Use:   "ingest STREAM FILE...",
		Short: "Load files straight into a stream's Parquet files (server stopped)",
		Long: `Load the rows of the FILEs (read in order as one source) into STREAM, with
the server stopped: rows are checked against the stream's schema and written
straight to the log's Parquet files, without passing through the buffer. They
take the next offsets of the stream's current log, in source order, and
streamcast_ts is the time each batch is loaded.

Formats: Parquet, Arrow IPC file and stream, NDJSON, and CSV with a header
row, from the extension (.parquet, .arrow, .arrows, .ndjson/.jsonl, .csv) or
from --format. "-" reads stdin (arrows, ndjson or csv).

The schema decides, as for a published row. Parquet and Arrow columns are
matched by name: every required column must be present (a nullable one the
schema does not require, such as one a migration added, may be left out and
loads as null), none other, and no streamcast_offset or streamcast_ts;
lossless casts are made (int32 to int64,
large_string to string), lossy ones refused. NaN and infinities are refused,
so is a null in a non-nullable column. NDJSON lines go through publish's
decoder. A CSV cell is read by its column's type: an empty field is null
(nullable columns only), booleans are true or false, binary follows the
column's contentEncoding, nested columns hold JSON text.

A refused or failed load keeps what landed before it (dense offsets, no gap)
and says where it stopped, why, and the command that resumes it
(--skip-rows N skips the source's first N rows). Rows a previous server left
in the buffer are sealed first. At the end every row is published (a flush),
unless --no-publish. A failed publish leaves the rows loaded: publish them,
do not ingest them again.

A summary goes to stderr and one JSON line to stdout ({"rows","files",
"first_offset","end_offset","source_bytes","seconds","publish_seconds",…});
--summary-json FILE also writes it there. On a terminal, progress is shown.
ingest refuses to run while serve (or any process) holds the log's writer
lock, naming its pid, and refuses a retired stream. A stream that was never
served is started by ingest as serve would start it (its identity, metadata
and first log), never over history: a stream whose home is gone while its
published copy survives is refused, naming restore.`,
		Example: `  streamcast ingest trades trades-2025.parquet
  streamcast ingest --no-publish trades jan.csv feb.csv mar.csv
  zcat trades.ndjson.gz | streamcast ingest --format ndjson trades -
  streamcast ingest trades jan.csv feb.csv --skip-rows 1250000`,
		Args:              cobra.MinimumNArgs(2),
		ValidArgsFunction: thenFiles(a.completeStreamNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			if skipRows < 0 {
				return usageError{fmt.Errorf("--skip-rows %d: give a row count of 0 or more", skipRows)}
			}
			var forced source.Format
			if format != "" {
				f, err := source.ParseFormat(format)
				if err != nil {
					return usageError{fmt.Errorf("--format: %w", err)}
				}
				forced = f
			}
			var inputs []source.Input
			for _, p := range args[1:] {
				in := source.Input{Path: p, Format: forced}
				if in.Format == "" {
					f, ok := source.FormatOf(p)
					if !ok {
						what := "its extension names no format"
						if p == "-" {
							what = "stdin has no extension"
						}
						return usageError{fmt.Errorf("%s: %s; give --format (parquet, arrow, arrows, ndjson or csv)", p, what)}
					}
					in.Format = f
				}
				inputs = append(inputs, in)
			}
			tgt, err := a.lifecycleTarget(args[0], "")
			if err != nil {
				return err
			}
			stdin := a.stdin
			if f, ok := a.stdin.(*os.File); ok {
				r, release := ndjson.Interruptible(f)
				defer release()
				stdin = r
			}
			// A stream never served yet starts here as serve would start it.
			lc, err := a.cfg.LogSettings(tgt.decl, "")
			if err != nil {
				return err
			}
			first := &lifecycle.First{Declaration: lifecycle.Declaration{Schema: tgt.schema, Log: lc}, Guard: tgt.decl.Guard()}
			prog := newIngestProgress(a.stderr, benchOnTerminal(a.stderr))
			res, err := lifecycle.Ingest(cmd.Context(), tgt.stream, lifecycle.IngestOptions{
				Inputs:        inputs,
				Stdin:         stdin,
				SkipRows:      skipRows,
				SkipRowsGiven: cmd.Flags().Changed("skip-rows"),
				NoPublish:     noPublish,
				Progress:      prog.update,
				First:         first,
			})
			prog.clear()
			var ie *lifecycle.IngestError
			if errors.As(err, &ie) {
				fmt.Fprintln(a.stderr, ingestFailure(ie, a.configUsed, args, format, noPublish))
				if ie.PublishFailed {
					_ = writeIngestSummary(a, summaryPath, &ie.Ingested)
				}
				return err
			}
			if err != nil {
				return err
			}
			fmt.Fprintln(a.stderr, ingestLine(res))
			return writeIngestSummary(a, summaryPath, res)
		},
	}
	f := cmd.Flags()
	f.StringVar(&format, "format", "", "read every FILE as `FORMAT`: parquet, arrow (IPC file), arrows (IPC stream), ndjson, csv (default: from the extension)")
	f.BoolVar(&noPublish, "no-publish", false, "leave the rows in local files; do not publish them at the end")
	f.Int64Var(&skipRows, "skip-rows", 0, "skip the source's first `N` rows (what an earlier run loaded; its report gives N)")
	f.StringVar(&summaryPath, "summary-json", "", "also write the summary as JSON to `FILE`")
	_ = cmd.MarkFlagFilename("summary-json", "json")
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"parquet", "arrow", "arrows", "ndjson", "csv"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// ingestSummary is the JSON form of a run.
type ingestSummary struct {
	Stream         string  `json:"stream"`
	Log            string  `json:"log"`
	Rows           int64   `json:"rows"`
	Files          int     `json:"files"`
	FirstOffset    *int64  `json:"first_offset"`
	LastOffset     *int64  `json:"last_offset"`
	EndOffset      int64   `json:"end_offset"`
	SourceBytes    int64   `json:"source_bytes"`
	FileBytes      int64   `json:"file_bytes"`
	Sealed         int64   `json:"sealed_first"`
	Seconds        float64 `json:"seconds"`
	RowsPerSecond  float64 `json:"rows_per_second"`
	Published      bool    `json:"published"`
	PublishSeconds float64 `json:"publish_seconds"`
}

func summaryOf(r *lifecycle.Ingested) ingestSummary {
	s := ingestSummary{Stream: r.Stream, Log: r.Log, Rows: r.Rows, Files: r.Files, EndOffset: r.End,
		SourceBytes: r.SourceBytes, FileBytes: r.FileBytes, Sealed: r.Sealed, Seconds: r.Load.Seconds(),
		Published: r.Published, PublishSeconds: r.Publish.Seconds()}
	if r.Rows > 0 {
		first, last := r.Start, r.End-1
		s.FirstOffset, s.LastOffset = &first, &last
	}
	if s.Seconds > 0 {
		s.RowsPerSecond = float64(r.Rows) / s.Seconds
	}
	return s
}

func writeIngestSummary(a *app, path string, r *lifecycle.Ingested) error {
	s := summaryOf(r)
	if err := a.printJSON(s); err != nil {
		return err
	}
	if path == "" {
		return nil
	}
	b, _ := json.Marshal(s)
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("--summary-json: %w", err)
	}
	return nil
}

// ingestLine is the summary line of a finished run.
func ingestLine(r *lifecycle.Ingested) string {
	s := summaryOf(r)
	rng := "no offsets"
	if r.Rows > 0 {
		rng = fmt.Sprintf("offsets %d to %d", r.Start, r.End-1)
	}
	pub := "not published (--no-publish)"
	if r.Published {
		pub = fmt.Sprintf("published in %.2f s", s.PublishSeconds)
	}
	sealed := ""
	if r.Sealed > 0 {
		sealed = fmt.Sprintf("; sealed %d buffered rows first", r.Sealed)
	}
	return fmt.Sprintf("ingest: %d rows into %s/%s, %s, in %d files (%s read, %s written) in %.2f s, %.0f rows/s; %s%s",
		r.Rows, r.Stream, r.Log, rng, r.Files, byteSize(r.SourceBytes), byteSize(r.FileBytes), s.Seconds, s.RowsPerSecond, pub, sealed)
}

// ingestFailure is the report of a run that stopped: what landed, where
// it stopped, why, and the command that resumes it.
func ingestFailure(e *lifecycle.IngestError, config string, args []string, format string, noPublish bool) string {
	var b strings.Builder
	landed := "no rows landed"
	if e.Rows > 0 {
		landed = fmt.Sprintf("%d rows landed at offsets %d to %d in %d files", e.Rows, e.Start, e.End-1, e.Files)
	}
	if e.PublishFailed {
		fmt.Fprintf(&b, "ingest: %s; publishing them failed (the error follows): they stay loaded, do not ingest them again", landed)
		return b.String()
	}
	fmt.Fprintf(&b, "ingest: stopped: %s", landed)
	if e.At.File != "" {
		if e.At.Row > 0 {
			fmt.Fprintf(&b, "; stopped at %s", e.At)
		} else {
			fmt.Fprintf(&b, "; stopped at %s", e.At.File)
		}
	}
	why := "the source was refused"
	if !e.Refused {
		why = "the failure is not the data's (the error follows)"
	}
	fmt.Fprintf(&b, "\ningest: why: %s\n", why)
	fix := "resume"
	if e.Refused {
		fix = "fix the source, then resume"
	}
	fmt.Fprintf(&b, "ingest: %s with: %s", fix, resumeCommand(config, args, format, noPublish, e.Position))
	return b.String()
}

// resumeCommand spells the command that loads the rest of the source.
func resumeCommand(config string, args []string, format string, noPublish bool, skip int64) string {
	words := []string{"streamcast"}
	if config != "" {
		words = append(words, "--config", config)
	}
	words = append(words, "ingest")
	if format != "" {
		words = append(words, "--format", format)
	}
	if noPublish {
		words = append(words, "--no-publish")
	}
	words = append(words, "--skip-rows", strconv.FormatInt(skip, 10))
	words = append(words, args...)
	for i, w := range words {
		words[i] = shellQuote(w)
	}
	return strings.Join(words, " ")
}

// shellQuote quotes w for a POSIX shell when it needs it.
func shellQuote(w string) string {
	if w != "" && strings.IndexFunc(w, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '.' || r == '/' || r == ':' || r == '=' || r == '+' || r == ',' ||
			(r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'))
	}) < 0 {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}

// byteSize spells n bytes for people.
func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// ingestProgress draws a one-line progress bar on a terminal: rows,
// bytes, rows/s, elapsed time and, when the source's size is known, ETA.
type ingestProgress struct {
	*progressLine
}

func newIngestProgress(w io.Writer, on bool) *ingestProgress {
	return &ingestProgress{newProgressLine(w, on)}
}

func (p *ingestProgress) update(s lifecycle.IngestProgress) {
	p.draw(func(el time.Duration) string {
		rate := float64(s.Rows) / max(el.Seconds(), 1e-9)
		line := fmt.Sprintf("ingest: %d rows, %s", s.Rows, byteSize(s.BytesRead))
		if s.SourceSize > 0 {
			frac := min(float64(s.BytesRead)/float64(s.SourceSize), 1)
			const width = 24
			fill := int(frac * width)
			line = fmt.Sprintf("ingest [%s%s] %3.0f%% %d rows, %s of %s", strings.Repeat("=", fill), strings.Repeat(" ", width-fill), frac*100, s.Rows, byteSize(s.BytesRead), byteSize(s.SourceSize))
			if frac > 0.001 {
				eta := time.Duration(float64(el) * (1 - frac) / frac)
				line += fmt.Sprintf(", ETA %s", eta.Round(time.Second))
			}
		}
		return line + fmt.Sprintf(", %.0f rows/s, %s, %d landed", rate, el.Round(time.Second), s.Landed)
	})
}
