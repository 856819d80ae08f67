package cmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/streamcast/streamcast/internal/ndjson"
	"github.com/streamcast/streamcast/pkg/wire"
)

func newPublishCmd(a *app) *cobra.Command {
	var (
		opts           = ndjson.DefaultLoadOptions()
		quarantinePath string
		summaryPath    string
		tlsFlags       *clientTLS
		fromOutbox     string
		untilEmpty     bool
		compression    string
	)
	cmd := &cobra.Command{
		Use:   "publish URL [FILE...] | publish --from-outbox DSN --publisher ID URL",
		Short: "Publish NDJSON rows from files or stdin to a stream",
		Long: `Publish the rows of the NDJSON FILEs (read in order as one input; "-" is
stdin), or of stdin when none is given, to the stream at URL
(ws://host:port/stream): one JSON object per line, blank lines skipped.

Rows are checked against the stream's schema (from the server's greeting,
with the code the server runs) before they are sent, so a refused row never
costs a round trip. Without --quarantine, the first refused row stops the run
with exit 1, naming the file, the line and the reason; what came before it is
published, and nothing after it was sent. The error says how to go on: fix
the line and rerun with --skip-lines N, N filled in (the lines before it), so
no row is published twice; a plain rerun would publish those lines again. With
--quarantine FILE each refused row is written there as one JSON line
({"file","line","reason","input"}) and the run goes on. A row the server
refuses although this client accepted it stops the run with exit 1: client
and server disagree about the schema.

--skip-lines N skips the first N lines of the input (the FILEs read as one
input, blank lines counted) without reading them: the way to resume a run
without --publisher after the lines it published. Every error and interruption
that leaves a known prefix published names its N.

--batch-size N sends N rows per frame (all or nothing); --window DUR sends a
partial batch once it has waited DUR. Up to --max-in-flight frames await their
acknowledgement at once (match the server's ` + "`limits.max_in_flight`" + `).

--publisher ID publishes exactly once: each accepted row's sequence number is
its position among the accepted rows of the whole input, so every run numbers
the rows alike. A run that dies at any point and is rerun with the same ID and
input skips the rows that landed (from the server's mark for ID) and sends the
rest; the stream then holds every accepted row once, in input order. The
stream must be declared with ` + "`exactly_once: true`" + `. A plain rerun is
then the way to resume, so --skip-lines does not go with --publisher.

By default publish reads to the end of the input, waits for every
acknowledgement and exits 0. --follow keeps reading the last FILE as it grows,
until SIGINT or SIGTERM, then waits for the acknowledgements and exits 0.

A summary goes to stderr (lines read, rows published, duplicates skipped,
quarantined, first and last offset, where the run resumed from, rows/s);
--summary-json FILE also writes it as JSON. On a terminal, progress is shown
while it runs.

--http publishes over plain HTTP instead of a WebSocket, for hosts where a
WebSocket cannot reach the server (a proxy that passes no upgrade): each
batch is one POST to the stream's URL on a keep-alive connection, answered
once its rows are on disk, one request at a time (--max-in-flight does not
apply). The URL is the same (ws:// is sent as http://, wss:// as https://,
and http:// or https:// may be given); HTTPS_PROXY and HTTP_PROXY are
honoured. Everything else is as over a WebSocket: the schema check, the
output, --batch-size, --skip-lines, and --publisher, whose id and seqs go in
headers, so a rerun after a crash resumes from the server's mark.

A wss:// URL connects over TLS, verifying the server's certificate against
the system's CAs and the one --ca-file names; --cert-file and --key-file
present a client certificate to a server that requires one (mutual TLS).
--insecure skips the verification, with a warning every time.

--from-outbox DSN sends the rows an application committed to its outbox
tables instead of reading NDJSON: the database is sqlite:///abs/path.db,
sqlite://relative/path.db or a postgres:// URL, and --publisher ID names the
outbox. Applications in any language queue rows with the documented DDL (the
streamcast_outbox tables; see docs/exactly-once-database.md); this process ships committed rows in order, exactly once, and
deletes them when they land. Rows the stream's schema refuses move to
streamcast_outbox_dead. It runs until SIGINT or SIGTERM; --until-empty exits
0 once every row committed at its start has landed. The stream must be
declared with ` + "`exactly_once: true`" + `.

` + credentialsHelp,
		Example: `  streamcast publish ws://127.0.0.1:8765/demo trades.ndjson
  cat trades.ndjson | streamcast publish --batch-size 500 ws://127.0.0.1:8765/demo
  streamcast publish --skip-lines 1200 ws://127.0.0.1:8765/demo trades.ndjson
  streamcast publish --publisher loader-1 --quarantine bad.ndjson --summary-json run.json ws://127.0.0.1:8765/demo day1.ndjson day2.ndjson
  streamcast publish --http --batch-size 1000 http://127.0.0.1:8765/demo trades.ndjson
  streamcast publish --follow --window 200ms ws://127.0.0.1:8765/demo live.ndjson
  streamcast publish --from-outbox postgres://app@db.internal/orders --publisher orders-1 ws://127.0.0.1:8765/orders`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: thenFiles(a.completeStreamURLs),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if cmd.Flags().Changed("publisher") && opts.Publisher == "" {
				return usageError{fmt.Errorf("--publisher is empty; give an id of 1 to %d bytes, or leave the flag out to publish without one", wire.MaxPublisherBytes)}
			}
			u, cred, err := streamURL(args[0])
			if err != nil {
				return err
			}
			opts.Credentials = cred
			if opts.Compression, err = wire.ParseCompression(compression); err != nil {
				return usageError{err}
			}
			tc, err := tlsFlags.config(a.logger)
			if err != nil {
				return err
			}
			opts.TLS = tc
			if opts.HTTP && (fromOutbox != "" || untilEmpty) {
				return usageError{errors.New("--http does not go with --from-outbox: the outbox is sent over a WebSocket; remove --http")}
			}
			if opts.HTTP && cmd.Flags().Changed("max-in-flight") {
				return usageError{errors.New("--max-in-flight does not go with --http: over HTTP one request is in flight at a time; remove it")}
			}
			if fromOutbox != "" || untilEmpty {
				return publishFromOutbox(cmd, a, u, args, fromOutbox, untilEmpty, opts)
			}
			opts.Inputs = args[1:]
			opts.Stdin = a.stdin
			if f, ok := a.stdin.(*os.File); ok {
				r, release := ndjson.Interruptible(f)
				defer release()
				opts.Stdin = r
			}
			opts.Logger = a.logger
			if err := opts.Validate(); err != nil {
				return usageError{err}
			}
			if quarantinePath != "" {
				q, err := os.Create(quarantinePath)
				if err != nil {
					return fmt.Errorf("--quarantine: %w", err)
				}
				defer func() {
					if cerr := q.Close(); cerr != nil && err == nil {
						err = fmt.Errorf("--quarantine: %w", cerr)
					}
				}()
				opts.Quarantine = q
			}
			progress := benchOnTerminal(a.stderr)
			if progress {
				opts.Progress = func(s ndjson.LoadSummary) {
					fmt.Fprintf(a.stderr, "\r\033[Kpublish: %d lines read, %d rows published, %d quarantined, %.0f rows/s",
						s.LinesRead, s.RowsPublished, s.Quarantined, s.RowsPerSecond())
				}
			}

			sum, lerr := ndjson.Load(cmd.Context(), u, opts)
			if progress {
				fmt.Fprint(a.stderr, "\r\033[K")
			}
			if lerr == nil || sum.LinesRead > 0 {
				fmt.Fprintln(a.stderr, summaryLine(sum, quarantinePath))
			}
			if summaryPath != "" {
				if werr := writeSummary(summaryPath, sum); werr != nil {
					return errors.Join(lerr, werr)
				}
			}
			return lerr
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Publisher, "publisher", "", "publish exactly once as publisher `ID`; a rerun with the same ID and input skips what landed")
	f.Int64Var(&opts.SkipLines, "skip-lines", 0, "skip the first `N` lines of the input (all FILEs as one, blank lines counted): resume after what a stopped run published")
	f.IntVar(&opts.BatchSize, "batch-size", opts.BatchSize, "rows per publish frame (`N`), committed all or nothing")
	f.DurationVar(&opts.Window, "window", 0, "send a partial batch once it has waited `DUR` (0: only full batches, and at the end)")
	f.IntVar(&opts.MaxInFlight, "max-in-flight", opts.MaxInFlight, "frames awaiting acknowledgement at once (`N`; the server's limits.max_in_flight)")
	f.IntVar(&opts.MaxFrameBytes, "max-frame-bytes", opts.MaxFrameBytes, "largest frame sent, in `BYTES` (the server's limits.max_message_bytes)")
	f.StringVar(&compression, "compression", "auto", "offer the server permessage-deflate: `MODE` auto (only to a server on another host), on or off; batches then go out compressed")
	_ = cmd.RegisterFlagCompletionFunc("compression", cobra.FixedCompletions([]string{"auto", "on", "off"}, cobra.ShellCompDirectiveNoFileComp))
	f.BoolVar(&opts.HTTP, "http", false, "publish over plain HTTP (one POST per batch) where a WebSocket cannot reach the server")
	f.StringVar(&quarantinePath, "quarantine", "", "write refused rows to `FILE` as NDJSON and go on (default: stop at the first)")
	f.BoolVar(&opts.Follow, "follow", false, "keep reading the last FILE as it grows, until SIGINT or SIGTERM")
	f.DurationVar(&opts.PollEvery, "poll", opts.PollEvery, "with --follow, check the file for new lines every `DUR`")
	f.StringVar(&summaryPath, "summary-json", "", "also write the run's summary as JSON to `FILE`")
	tlsFlags = addClientTLSFlags(f)
	f.StringVar(&fromOutbox, "from-outbox", "", "send the rows committed to the outbox tables of database `DSN` (sqlite:///abs/path.db, sqlite://rel/path.db, postgres://…) as --publisher")
	f.BoolVar(&untilEmpty, "until-empty", false, "with --from-outbox, exit once every row committed at the start has landed")
	_ = cmd.MarkFlagFilename("quarantine", "ndjson", "jsonl")
	_ = cmd.MarkFlagFilename("summary-json", "json")
	return cmd
}

// publishFromOutbox checks the flags --from-outbox takes and runs the
// outbox sender.
func publishFromOutbox(cmd *cobra.Command, a *app, url string, args []string, dsn string, untilEmpty bool, opts ndjson.LoadOptions) error {
	switch {
	case dsn == "":
		return usageError{errors.New("--until-empty goes with --from-outbox DSN; give the database to send from")}
	case opts.Publisher == "":
		return usageError{errors.New("--from-outbox needs --publisher ID: the id the application queues its rows under")}
	case len(args) != 1:
		return usageError{fmt.Errorf("--from-outbox sends from the database, not from files; give only the stream URL (got %d arguments)", len(args))}
	}
	for _, name := range []string{"quarantine", "follow", "window", "summary-json", "poll", "skip-lines"} {
		if cmd.Flags().Changed(name) {
			return usageError{fmt.Errorf("--%s reads NDJSON input and does not go with --from-outbox; remove it", name)}
		}
	}
	r := outboxRun{dsn: dsn, publisher: opts.Publisher, url: url, dial: opts.DialOptions, untilEmpty: untilEmpty}
	// Unset, the outbox's own defaults apply (batches of 100 rows).
	if cmd.Flags().Changed("batch-size") {
		r.batchRows = opts.BatchSize
	}
	if cmd.Flags().Changed("max-in-flight") {
		r.maxInFlight = opts.MaxInFlight
	}
	if cmd.Flags().Changed("max-frame-bytes") {
		r.maxFrameBytes = opts.MaxFrameBytes
	}
	return r.run(cmd.Context(), a)
}

// summaryLine is the run's summary for stderr, one line.
func summaryLine(s ndjson.LoadSummary, quarantine string) string {
	off := func(v int64) string {
		if v == wire.Null {
			return "-"
		}
		return strconv.FormatInt(v, 10)
	}
	resumed := "-"
	if s.ResumedFrom != wire.Null {
		resumed = "seq " + strconv.FormatInt(s.ResumedFrom, 10)
	}
	q := ""
	if s.Quarantined > 0 && quarantine != "" {
		q = " (in " + quarantine + ")"
	}
	skipped := ""
	if s.SkippedLines > 0 {
		skipped = fmt.Sprintf(", %d skipped by --skip-lines", s.SkippedLines)
	}
	return fmt.Sprintf("publish: %d lines read (%d blank%s), %d rows published, %d duplicates skipped, %d quarantined%s; offsets %s to %s; resumed from %s; %.2f s, %.0f rows/s",
		s.LinesRead, s.BlankLines, skipped, s.RowsPublished, s.DuplicatesSkipped, s.Quarantined, q,
		off(s.FirstOffset), off(s.LastOffset), resumed, s.Elapsed.Seconds(), s.RowsPerSecond())
}

func writeSummary(path string, s ndjson.LoadSummary) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("--summary-json: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("--summary-json: %w", err)
	}
	return nil
}

// Compile-time check that the summary is what --summary-json writes.
var _ json.Marshaler = ndjson.LoadSummary{}
