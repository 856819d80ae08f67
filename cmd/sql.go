package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/history"
	"github.com/streamcast/streamcast/pkg/meta/sqlview"
)

// defaultMaxTail is --max-tail's default: the rows sql reads from --broker.
const defaultMaxTail = 1_000_000

func newSQLCmd(a *app) *cobra.Command {
	var (
		metadata string
		asOffset int64
		asTS     string
		broker   string
		maxTail  int64
		filters  []string
		format   string
		output   string
		follow   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "sql [STREAM] QUERY",
		Short: "Run SQL over a stream's whole history",
		Long: `Run one SQL query (SQLite's dialect) over the history of STREAM, read as one
table named log: every log of the stream, the ones before a migration
included, with columns matched by name (a column a log lacks reads NULL) and
streamcast_offset and streamcast_ts as ordinary columns.

The stream is found under the config's root (and its published: prefix), or,
with --metadata URI, from its published metadata alone (file://… or s3://…,
the greeting's "metadata"); STREAM may then be left out.

The query reads a fixed cut of the history: by default everything published;
--as-of-offset N every row up to and including offset N, reading rows past the
published end from the running server at --broker URL (at most --max-tail
rows); --as-of-ts T every published row with streamcast_ts at or before T
(RFC 3339, or microseconds since the epoch). A cut that cannot be read
exactly is refused, naming the numbers.

Types: integers are INTEGER, floats REAL, strings TEXT, booleans INTEGER 0/1,
binary BLOB, and struct, list and map columns JSON text, which json_extract
reads (json_extract(quote, '$.bid')).

Pruning: the columns the query uses are the only ones decoded, and the
comparisons =, <, <=, >, >= and IN on a column, against constants, skip the
logs, files and row groups whose statistics rule them out. Other conditions
(LIKE, functions, OR across columns) filter rows but skip nothing. Each
--filter 'column op value' term (op =, <, <=, >, >= or in, ANDed) both
filters the rows log shows and prunes, for one pass however long its in list.
What is skipped never changes an answer, only how long it takes.

Output: a table on a terminal, NDJSON otherwise, or --format table, csv, json,
ndjson or parquet; -o FILE writes the file instead of stdout (its extension
picks the format when --format is not given).

--follow DURATION keeps the answer current: the query reruns every DURATION
over the history re-pinned to what is published then, and each result says
the offset it is consistent to: redrawn in place on a terminal, one NDJSON
line {"seq","end_offset","at","rows"} per result otherwise. It runs until
SIGINT or SIGTERM.`,
		Example: `  streamcast sql demo 'SELECT count(*) FROM log'
  streamcast sql demo 'SELECT symbol, count(*), avg(price) FROM log GROUP BY symbol'
  streamcast sql demo --filter 'streamcast_offset >= 1000000' 'SELECT * FROM log LIMIT 10'
  streamcast sql demo --as-of-ts 2026-01-01T00:00:00Z --format csv -o jan.csv 'SELECT * FROM log'
  streamcast sql --metadata s3://bucket/streams/demo/demo.metadata.json 'SELECT max(streamcast_offset) FROM log'
  streamcast sql demo --follow 10s 'SELECT symbol, count(*) FROM log GROUP BY symbol'`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			opts := history.Options{MetadataURI: metadata, Broker: broker, MaxTail: maxTail}
			query := args[len(args)-1]
			switch {
			case len(args) == 2:
				opts.Stream = args[0]
			case metadata == "":
				return usageError{errors.New("name the stream: sql STREAM QUERY, or give --metadata URI")}
			}
			if opts.Stream != "" {
				if err := meta.CheckName(opts.Stream); err != nil {
					return usageError{err}
				}
			}
			if metadata == "" {
				opts.Root, opts.Published = a.cfg.Root, a.cfg.Published
			}
			f := cmd.Flags()
			if f.Changed("as-of-offset") && f.Changed("as-of-ts") {
				return usageError{errors.New("--as-of-offset and --as-of-ts each fix the cut; give one")}
			}
			if f.Changed("as-of-offset") {
				if asOffset < 0 {
					return usageError{fmt.Errorf("--as-of-offset %d: offsets start at 0", asOffset)}
				}
				opts.AsOfOffset = &asOffset
			}
			if f.Changed("as-of-ts") {
				ts, err := parseAsOfTS(asTS)
				if err != nil {
					return usageError{err}
				}
				opts.AsOfTS = &ts
			}
			if broker != "" && opts.AsOfOffset == nil {
				return usageError{errors.New("--broker reads the rows past the published end up to --as-of-offset; give --as-of-offset N with it")}
			}
			if maxTail <= 0 {
				return usageError{fmt.Errorf("--max-tail %d: give a positive number of rows", maxTail)}
			}
			var vopts sqlview.Options
			for _, s := range filters {
				flt, err := sqlview.ParseFilter(s)
				if err != nil {
					return usageError{err}
				}
				vopts.Filters = append(vopts.Filters, flt)
			}
			fmtName, err := sqlFormat(format, output, benchOnTerminal(a.stdout) && output == "")
			if err != nil {
				return usageError{err}
			}
			if follow != 0 {
				if follow < 0 {
					return usageError{fmt.Errorf("--follow %v: give a positive interval such as 10s", follow)}
				}
				if output != "" || (fmtName != sqlview.FormatTable && fmtName != sqlview.FormatNDJSON) {
					return usageError{errors.New("--follow prints to stdout, as a table on a terminal or NDJSON; leave out -o and --format csv, json or parquet")}
				}
				return sqlFollow(ctx, a, opts, vopts, query, follow, fmtName)
			}
			return sqlOnce(ctx, a, opts, vopts, query, fmtName, output)
		},
	}
	f := cmd.Flags()
	f.StringVar(&metadata, "metadata", "", "read the stream from its published metadata at `URI` (file://… or s3://…) instead of the config's root")
	f.Int64Var(&asOffset, "as-of-offset", 0, "read every row up to and including offset `N`")
	f.StringVar(&asTS, "as-of-ts", "", "read every published row with streamcast_ts at or before `T` (RFC 3339, or µs since the epoch)")
	f.StringVar(&broker, "broker", "", "read rows past the published end, up to --as-of-offset, from the server at `URL` (ws://host:port/stream)")
	f.Int64Var(&maxTail, "max-tail", defaultMaxTail, "read at most `N` rows from --broker")
	f.StringArrayVar(&filters, "filter", nil, "keep only rows where `'column op value'` holds (op =, <, <=, >, >=, in), and skip what it rules out; repeat to AND")
	f.StringVar(&format, "format", "", "print the result as `F`: "+strings.Join(sqlview.Formats(), ", ")+" (default table on a terminal, else ndjson)")
	f.StringVarP(&output, "output", "o", "", "write the result to `FILE` instead of stdout")
	f.DurationVar(&follow, "follow", 0, "rerun the query every `DURATION` over the newest published history, until interrupted")
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions(sqlview.Formats(), cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// parseAsOfTS reads --as-of-ts: RFC 3339, or microseconds since the epoch
// (the unit of streamcast_ts).
func parseAsOfTS(s string) (time.Time, error) {
	if us, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMicro(us).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--as-of-ts %q is neither RFC 3339 (2026-01-02T15:04:05Z) nor microseconds since the epoch", s)
	}
	return t, nil
}

// sqlFormat decides the output format: --format, else -o FILE's
// extension, else a table on a terminal and NDJSON otherwise.
func sqlFormat(format, output string, terminal bool) (sqlview.Format, error) {
	if format != "" {
		f := sqlview.Format(strings.ToLower(format))
		for _, k := range sqlview.Formats() {
			if string(f) == k {
				if f == sqlview.FormatParquet && terminal {
					return "", errors.New("--format parquet writes binary; give -o FILE or redirect stdout")
				}
				return f, nil
			}
		}
		return "", fmt.Errorf("--format %q: want one of %s", format, strings.Join(sqlview.Formats(), ", "))
	}
	switch strings.ToLower(filepath.Ext(output)) {
	case ".parquet":
		return sqlview.FormatParquet, nil
	case ".csv":
		return sqlview.FormatCSV, nil
	case ".json":
		return sqlview.FormatJSON, nil
	case ".txt":
		return sqlview.FormatTable, nil
	}
	if terminal {
		return sqlview.FormatTable, nil
	}
	return sqlview.FormatNDJSON, nil
}

// sqlOnce runs the query over one cut and writes its result.
func sqlOnce(ctx context.Context, a *app, opts history.Options, vopts sqlview.Options, query string, format sqlview.Format, output string) (err error) {
	r, err := history.Open(ctx, opts)
	if err != nil {
		return err
	}
	defer r.Close()
	v, err := sqlview.Open(ctx, r, vopts)
	if err != nil {
		return err
	}
	defer v.Close()
	start := time.Now()
	rows, err := v.Query(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	w := a.stdout
	if output != "" {
		// Written beside the target and renamed into place, so a failed
		// query never leaves half a file under the name asked for.
		tmp, err := os.CreateTemp(filepath.Dir(output), "."+filepath.Base(output)+".*")
		if err != nil {
			return fmt.Errorf("-o %s: %w", output, err)
		}
		defer func() {
			if err != nil {
				tmp.Close()
				os.Remove(tmp.Name())
			}
		}()
		w = tmp
	}
	n, err := sqlview.Write(w, rows, format)
	if err != nil {
		return err
	}
	if f, ok := w.(*os.File); ok && output != "" {
		if err := f.Close(); err != nil {
			return fmt.Errorf("-o %s: %w", output, err)
		}
		if err := os.Rename(f.Name(), output); err != nil {
			return fmt.Errorf("-o %s: %w", output, err)
		}
	}
	st := r.Stats()
	a.logger.Debug("query done", "rows", n, "seconds", time.Since(start).Seconds(),
		"files_opened", st.FilesOpened, "files_skipped", st.FilesSkipped, "logs_skipped", st.LogsSkipped)
	return nil
}

// sqlFollow is --follow: the query rerun over the newest published cut
// every interval. The live tail above the published end joins it once
// tail --catch-up's reader is in; until then each result is consistent
// to the published end.
func sqlFollow(ctx context.Context, a *app, opts history.Options, vopts sqlview.Options, query string, every time.Duration, format sqlview.Format) error {
	pin := sqlview.PinFunc(func(ctx context.Context) (sqlview.Pin, error) {
		r, err := history.Open(ctx, opts)
		if err != nil {
			return sqlview.Pin{}, err
		}
		return sqlview.Pin{Table: r, End: -1, Close: r.Close}, nil
	})
	return sqlview.Follow(ctx, pin, vopts, query, every, nil, func(r sqlview.Refresh) error {
		return sqlview.WriteRefresh(a.stdout, r, format)
	})
}
