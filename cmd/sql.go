package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/history"
	"github.com/streamcast/streamcast/pkg/meta/sqlview"
)

func newSQLCmd(a *app) *cobra.Command {
	var (
		hf      *historyFlags
		filters []string
		format  string
		output  string
		follow  time.Duration
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
exactly is refused, naming the numbers. When the default cut leaves out
rows the stream's log under the root holds past the published end (taken
by a running server, not published yet), one line on stderr after the
answer says which, and that --as-of-offset N --broker URL includes them;
stdout holds the answer alone.

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
over the history re-pinned to what is published then and, with --broker URL,
the rows past the published end, read from one subscription to the server
and held in memory (at most --max-tail; the rows publishing covers are
dropped at each refresh and after each reconnect). Each result says the
offset it is consistent to: redrawn in place on a terminal, one NDJSON line
{"seq","end_offset","at","rows"} per result otherwise. If publishing falls
so far behind that the tail outgrows --max-tail, the view says so and stops
rather than answer from part of the history. Without --broker it follows
published rows only, and says once on stderr which newer rows that leaves
out. It runs until SIGINT or SIGTERM.`,
		Example: `  streamcast sql demo 'SELECT count(*) FROM log'
  streamcast sql demo 'SELECT symbol, count(*), avg(price) FROM log GROUP BY symbol'
  streamcast sql demo --filter 'streamcast_offset >= 1000000' 'SELECT * FROM log LIMIT 10'
  streamcast sql demo --as-of-ts 2026-01-01T00:00:00Z --format csv -o jan.csv 'SELECT * FROM log'
  streamcast sql --metadata s3://bucket/streams/demo/demo.metadata.json 'SELECT max(streamcast_offset) FROM log'
  streamcast sql demo --follow 10s --broker ws://127.0.0.1:8765/demo 'SELECT symbol, count(*) FROM log GROUP BY symbol'`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: a.completeStreamNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			query := args[len(args)-1]
			var stream string
			switch {
			case len(args) == 2:
				stream = args[0]
				if err := meta.CheckName(stream); err != nil {
					return usageError{err}
				}
			case hf.metadata == "":
				return usageError{errors.New("name the stream: sql STREAM QUERY, or give --metadata URI")}
			}
			hf.live = follow != 0
			opts, err := hf.options(cmd, a, stream)
			if err != nil {
				return usageError{err}
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
				return sqlFollow(ctx, a, opts, vopts, query, follow, fmtName, sqlBrokerHint(a, opts.Stream))
			}
			return sqlOnce(ctx, a, opts, vopts, query, fmtName, output, sqlBrokerHint(a, opts.Stream))
		},
	}
	hf = addHistoryFlags(cmd)
	f := cmd.Flags()
	f.StringArrayVar(&filters, "filter", nil, "keep only rows where `'column op value'` holds (op =, <, <=, >, >=, in), and skip what it rules out; repeat to AND")
	f.StringVar(&format, "format", "", "print the result as `F`: "+strings.Join(sqlview.Formats(), ", ")+" (default table on a terminal, else ndjson)")
	f.StringVarP(&output, "output", "o", "", "write the result to `FILE` instead of stdout")
	f.DurationVar(&follow, "follow", 0, "rerun the query every `DURATION` over the newest published history (and, with --broker, the live rows above it), until interrupted")
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions(sqlview.Formats(), cobra.ShellCompDirectiveNoFileComp))
	return cmd
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
func sqlOnce(ctx context.Context, a *app, opts history.Options, vopts sqlview.Options, query string, format sqlview.Format, output, broker string) (err error) {
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
	if output == "" {
		n, err := sqlview.Write(a.stdout, rows, format)
		if err != nil {
			return err
		}
		logQueryDone(a, r, n, start)
		noteUnpublished(ctx, a, r, broker, false)
		return nil
	}
	// Written beside the target and renamed into place, so a failed query
	// never leaves half a file under the name asked for.
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
	// The Parquet writer closes a writer that has Close; the file is
	// closed here, once, after the bytes are written.
	n, err := sqlview.Write(struct{ io.Writer }{tmp}, rows, format)
	if err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("-o %s: %w", output, err)
	}
	if err := os.Rename(tmp.Name(), output); err != nil {
		return fmt.Errorf("-o %s: %w", output, err)
	}
	logQueryDone(a, r, n, start)
	noteUnpublished(ctx, a, r, broker, false)
	return nil
}

// noteUnpublished says on stderr, in one line, which rows an answer read
// from published rows only left out: those the stream's live log holds
// past the cut (history.Reader.Unpublished), with the flags that include
// them. stdout is never touched, and nothing is said when nothing was left
// out or the cut was chosen (--as-of-offset, --as-of-ts, --broker). The
// answer stands either way, so failing to count is only logged.
func noteUnpublished(ctx context.Context, a *app, r *history.Reader, broker string, follow bool) {
	u, ok, err := r.Unpublished(ctx)
	if err != nil {
		a.logger.Debug("could not count the rows past the published end", "err", err)
		return
	}
	if ok {
		start, _ := r.Extent()
		fmt.Fprintln(a.stderr, unpublishedNote(start, u, broker, follow))
	}
}

// unpublishedNote is noteUnpublished's line: what the answer read
// ([start, u.From)), what it left out (u), and how to include it: a fixed
// cut up to the newest row read from the server at broker, or, for
// --follow, the live tail from it.
func unpublishedNote(start int64, u history.Unpublished, broker string, follow bool) string {
	read := fmt.Sprintf("the published offsets %d..%d", start, u.From-1)
	if u.From <= start {
		read = "published rows, of which there are none yet"
	}
	left, them := fmt.Sprintf("%d newer rows (offsets %d..%d) are not published yet", u.Rows, u.From, u.To-1), "them"
	if u.Rows == 1 && u.To-u.From == 1 {
		left, them = fmt.Sprintf("1 newer row (offset %d) is not published yet", u.From), "it"
	}
	if follow {
		return fmt.Sprintf("sql: following %s; %s; rerun with --broker %s to include %s and every row after", read, left, broker, them)
	}
	return fmt.Sprintf("sql: answered from %s; %s; rerun with --as-of-offset %d --broker %s to include %s, read from the running server", read, left, u.To-1, broker, them)
}

// sqlBrokerHint is the server URL the note on unpublished rows names: the
// config's listen address when it names a port (the server the config
// describes), else a placeholder for the user to fill in.
func sqlBrokerHint(a *app, stream string) string {
	if stream == "" {
		stream = "STREAM"
	}
	scheme := "ws"
	if a.cfg.TLS.Enabled() {
		scheme = "wss"
	}
	host, port, err := net.SplitHostPort(a.cfg.Listen)
	if err != nil || port == "" || port == "0" {
		return scheme + "://host:port/" + stream
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/" + stream
}

// logQueryDone logs what a query read and skipped, at debug level.
func logQueryDone(a *app, r *history.Reader, n int64, start time.Time) {
	st := r.Stats()
	a.logger.Debug("query done", "rows", n, "seconds", time.Since(start).Seconds(),
		"files_opened", st.FilesOpened, "files_skipped", st.FilesSkipped, "logs_skipped", st.LogsSkipped)
}

// sqlFollow is --follow: the query rerun every interval over the newest
// published cut and, with --broker, the live tail held in memory above it.
func sqlFollow(ctx context.Context, a *app, opts history.Options, vopts sqlview.Options, query string, every time.Duration, format sqlview.Format, broker string) error {
	noted := opts.Broker != ""
	var pin sqlview.Pinner = sqlview.PinFunc(func(ctx context.Context) (sqlview.Pin, error) {
		r, err := history.Open(ctx, opts)
		if err != nil {
			return sqlview.Pin{}, err
		}
		if !noted {
			// Once, at the first pin: each refresh would repeat it.
			noted = true
			noteUnpublished(ctx, a, r, broker, true)
		}
		_, end := r.Extent()
		return sqlview.Pin{Table: r, End: end, Close: r.Close}, nil
	})
	if opts.Broker != "" {
		live, err := history.OpenLive(ctx, opts)
		if err != nil {
			return err
		}
		defer live.Close()
		pin = sqlview.LivePinner(live)
	}
	return sqlview.Follow(ctx, pin, vopts, query, every, nil, func(r sqlview.Refresh) error {
		return sqlview.WriteRefresh(a.stdout, r, format)
	})
}
