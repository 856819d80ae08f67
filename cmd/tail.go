package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/streamcast/streamcast/internal/ndjson"
	"github.com/streamcast/streamcast/pkg/meta/history"
	"github.com/streamcast/streamcast/pkg/wire"
	"github.com/streamcast/streamcast/pkg/wire/txbox"
)

func newTailCmd(a *app) *cobra.Command {
	var (
		opts        = ndjson.DefaultTailOptions()
		offset      string
		reset       string
		where       string
		cursors     []string
		uploadEach  = ndjson.DefaultUploadEvery
		into        string
		table       string
		tlsFlags    *clientTLS
		catchUp     bool
		metadata    string
		compression string
		output      string
	)
	cmd := &cobra.Command{
		Use:   "tail URL",
		Short: "Print a stream's rows as NDJSON, live or from an offset",
		Long: `Subscribe to the stream at URL (ws://host:port/stream) and print one line per
row on stdout: the frame [offset,ts,row] exactly as the server sent it, or
with --rows the row object alone.

--offset says where a tail with no saved position starts: offset N
(inclusive), or earliest, the oldest row the server still serves; without it
the tail starts live, at the stream's frontier. A position saved by --cursor
or --into always wins over --offset (the tail says so on stderr), so the same
command line, --offset included, is safe to run again and again from cron or
a systemd timer: the first run starts at --offset, every later one resumes.

--cursor FILE keeps the tail's place across runs: the file holds the last
offset the tail finished with, and the next run resumes one above it. The
file moves only after a row's line has been written and flushed, is saved
atomically at most once a second and again on a clean exit (SIGINT, SIGTERM,
--count, --until-caught-up), and never moves backwards on its own. A cursor
file that cannot be read or is empty counts as absent, with a warning.

--output FILE appends the lines to FILE instead of printing them, and with
--cursor FILE makes the pair exactly once: each cursor save first syncs the
output and records its length with the offset, and a run killed after
writing lines it had not saved yet finds them past that length; the next run
cuts them off (saying how many bytes and rows on stderr) and writes those
rows again. A FILE the cursor did not record (rotated, replaced, rewritten
or cut shorter by something else) is never cut: the tail appends to it and
says so.
Printing to stdout (> FILE, | consumer) is at least once: after a kill, the
rows printed since the last save are printed again. --output needs a local
--cursor FILE (an s3:// cursor alone cannot record the length) and does not
apply to --into.

--reset-position OFFSET|earliest|latest moves a saved position, the one way
back (or forward): the file (or the table's place) is rewritten as the tail
connects, before any row, and the tail starts there, whatever --offset says. With --into the table's rows
at and above the new start are deleted in the same transaction and land
again, so the table still holds each row once. With --output the file is not
rewritten: the rows from the new start are appended again after what it
holds. Run it once by hand, not from cron, or every run starts over.

--until-caught-up exits once every row below the frontier the server greeted
with has been printed (at once when there is nothing to replay); --count N
exits after N rows. --reconnect resumes after the server restarts (1001), the
network fails, or the server drops a slow tail (4429): it reconnects with
backoff and resumes one above the last row received, logging each reconnect.
With --reconnect a server that is down or unreachable at start is waited for
the same way, until SIGINT or SIGTERM.

A wss:// URL connects over TLS, verifying the server's certificate against
the system's CAs and the one --ca-file names; --cert-file and --key-file
present a client certificate to a server that requires one (mutual TLS).
--insecure skips the verification, with a warning every time.

--into DSN --table NAME lands the stream in a database table instead of
printing it, exactly once: DSN is sqlite:///abs/path.db, sqlite://rel/path.db
or a postgres:// URL. The table (created when missing) has the columns
streamcast_offset (the primary key) and streamcast_ts, then one per schema
column (integers INTEGER/BIGINT, numbers REAL/DOUBLE PRECISION, booleans,
strings TEXT, binary decoded into BLOB/BYTEA, nested values as JSON TEXT). The
table's last offset is kept in the database, in the same transaction as its
rows: kill the tail anywhere and run it again, and it resumes one above the
last row landed, so the table holds every row once. A new table starts at the
frontier, or at --offset; the stream's identity is bound at the first run and
a recreated stream is refused. It reconnects whenever the connection ends
and runs until SIGINT/SIGTERM, or with --until-caught-up until every row below
the first frontier has landed.

--catch-up handles a tail that fell too far behind: when the server refuses to
replay that far back (4416 too_old, or evicted below a migration or the
retention floor), the tail reads the gap from the stream's published tables,
through the metadata the server's greeting names (or --metadata URI), with no
connection open, so a slow read never gets it dropped; then it subscribes
where the tables end. If the server refuses again, it reads what was
published meanwhile and retries, up to --catch-up-rounds rounds. --where
applies to those rows as the server applies it, and the output and --cursor
are what a tail that never fell behind would have made. With --offset
earliest it first reads everything the tables still hold. A failure names the
numbers and the ways out. S3 credentials come from the standard AWS
environment.

A refusal exits 1 with one line saying what to rerun with.

` + credentialsHelp,
		Example: `  streamcast tail ws://127.0.0.1:8765/demo
  streamcast tail --offset earliest --until-caught-up --rows ws://127.0.0.1:8765/demo > demo.ndjson
  streamcast tail --cursor demo.cursor --reconnect ws://127.0.0.1:8765/demo | ./consume
  streamcast tail --cursor demo.cursor --output demo.ndjson --offset earliest --until-caught-up --rows ws://127.0.0.1:8765/demo
  streamcast tail --where '{"symbol":"BTC-USD"}' --count 10 ws://127.0.0.1:8765/demo
  streamcast tail --catch-up --cursor demo.cursor --reconnect ws://127.0.0.1:8765/demo
  streamcast tail --cursor .demo.cursor --cursor s3://my-bucket/consumer1/demo.offset ws://127.0.0.1:8765/demo
  streamcast tail --into sqlite:///var/lib/app/app.db --table trades --offset earliest ws://127.0.0.1:8765/demo
  streamcast tail --cursor demo.cursor --reset-position earliest --until-caught-up ws://127.0.0.1:8765/demo
  streamcast tail --ca-file ca.crt wss://broker.example.com:8765/demo`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeStreamURLs,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if offset != "" {
				n, err := parseOffset(offset)
				if err != nil {
					return usageError{err}
				}
				opts.Offset = &n
			}
			if reset != "" {
				n, err := parseResetPosition(reset)
				if err != nil {
					return usageError{err}
				}
				opts.Reset = &n
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
			if into != "" || table != "" {
				if output != "" {
					return usageError{errors.New("--output does not apply to --into: the rows land in the table, which keeps its own place exactly once; drop --output")}
				}
				if err := checkInto(cmd, into, table); err != nil {
					return usageError{err}
				}
				return tailInto(cmd, a, u, opts.DialOptions, into, table, opts.Offset, opts.Reset, opts.UntilCaughtUp)
			}
			if where != "" {
				opts.Where = json.RawMessage(where)
			}
			if err := catchUpFlags(cmd, catchUp); err != nil {
				return usageError{err}
			}
			if catchUp {
				opts.CatchUp = catchUpFrom(a, metadata, opts.Where)
			}
			local, remote, err := splitCursors(cursors)
			if err != nil {
				return usageError{err}
			}
			if err := checkOutput(output, local, remote); err != nil {
				return usageError{err}
			}
			if opts.Reset != nil && len(cursors) == 0 {
				return usageError{errors.New("--reset-position moves the position saved by --cursor or --into; give one of them, or use --offset")}
			}
			if err := opts.Validate(); err != nil {
				return usageError{err}
			}
			if uploadEach <= 0 {
				return usageError{fmt.Errorf("--upload-every %v is not a positive duration; give e.g. 30s", uploadEach)}
			}
			if local != "" {
				c, warn, err := ndjson.OpenCursor(local)
				if err != nil {
					return err
				}
				if warn != nil {
					a.logger.Warn(warn.Error())
				}
				opts.Cursor = c
			}
			if remote != "" {
				if opts.Cursor == nil {
					opts.Cursor = ndjson.MemoryCursor(remote)
				}
				rc, err := ndjson.OpenRemoteCursor(cmd.Context(), remote, opts.Cursor, a.logger)
				if err != nil {
					return err
				}
				rc.Start(uploadEach)
				// After Tail has saved the local cursor: the object gets
				// the final position too.
				defer rc.Close()
			}
			opts.Logger = a.logger
			out := a.stdout
			if output != "" {
				o, err := ndjson.OpenOutput(output, opts.Cursor, a.logger)
				if err != nil {
					return err
				}
				defer func() {
					if cerr := o.Close(); cerr != nil && err == nil {
						err = cerr
					}
				}()
				out = o
			}

			// A reader that goes away (| head) is an ordinary end: get EPIPE
			// from the write instead of dying of SIGPIPE, so the cursor is saved.
			pipe := make(chan os.Signal, 1)
			signal.Notify(pipe, syscall.SIGPIPE)
			defer signal.Stop(pipe)

			res, err := ndjson.Tail(cmd.Context(), u, out, opts)
			if errors.Is(err, syscall.EPIPE) {
				err = nil
			}
			a.logger.Debug("tail ended", "rows", res.Rows, "first", res.First, "last", res.Last, "reconnects", res.Reconnects)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&offset, "offset", "", "where a tail with no saved position starts: offset `N` (inclusive), or \"earliest\", the oldest row still served (default: live); a position saved by --cursor or --into wins")
	f.StringVar(&reset, "reset-position", "", "move the position saved by --cursor or --into to `OFFSET` (inclusive), \"earliest\" or \"latest\", then tail from there (an --output file is not rewritten: the rows are appended again); run it once, not from cron")
	f.StringVar(&compression, "compression", "auto", "offer the server permessage-deflate: `MODE` auto (only to a server on another host), on or off; rows then take about a fifth of their bytes on the wire, and the server spends several times the CPU on each")
	_ = cmd.RegisterFlagCompletionFunc("compression", cobra.FixedCompletions([]string{"auto", "on", "off"}, cobra.ShellCompDirectiveNoFileComp))
	f.StringVar(&where, "where", "", "only rows matching this `JSON` object of column to value (or list of values), filtered by the server")
	f.Int64Var(&opts.Count, "count", 0, "exit after `N` rows (0: no limit)")
	f.BoolVar(&opts.UntilCaughtUp, "until-caught-up", false, "exit once every row below the frontier at connect has been printed")
	f.BoolVar(&opts.Reconnect, "reconnect", false, "on 1001, a network error or 4429, reconnect with backoff and resume after the last row")
	f.BoolVar(&opts.Rows, "rows", false, "print only each row's object, not [offset,ts,row]")
	f.StringArrayVar(&cursors, "cursor", nil, "keep the last offset finished with in `FILE` or s3://bucket/key (give both to keep both), and resume one above it")
	f.StringVar(&output, "output", "", "append the lines to `FILE` instead of stdout; with a local --cursor the pair is exactly once across crashes (lines written after the last save are cut and sent again); --reset-position appends the rows again")
	f.StringVar(&into, "into", "", "land the rows in a table of the database at `DSN` (sqlite:///abs.db, sqlite://rel.db, postgres://…), exactly once")
	f.StringVar(&table, "table", "", "the `NAME` of the table --into lands the rows in")
	f.DurationVar(&uploadEach, "upload-every", ndjson.DefaultUploadEvery, "how often an s3:// --cursor is uploaded while it moves")
	f.BoolVar(&catchUp, "catch-up", false, "when the server will not replay that far back (4416 too_old or evicted), read the gap from the stream's published tables, then subscribe where they end")
	f.IntVar(&opts.CatchUpRounds, "catch-up-rounds", ndjson.DefaultCatchUpRounds, "with --catch-up, give up after `N` rounds of reading the tables and subscribing")
	f.StringVar(&metadata, "metadata", "", "with --catch-up, read the published tables through this metadata `URI` (file://… or s3://…) instead of the one the server's greeting names")
	tlsFlags = addClientTLSFlags(f)
	_ = cmd.RegisterFlagCompletionFunc("offset", cobra.FixedCompletions([]string{"earliest"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("reset-position", cobra.FixedCompletions([]string{"earliest", "latest"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// checkInto refuses --into without --table (and the reverse), and the
// flags that shape printed output, which a landing does not have.
func checkInto(cmd *cobra.Command, into, table string) error {
	switch {
	case into == "":
		return errors.New("--table names the table of --into; give --into DSN too")
	case table == "":
		return errors.New("--into needs --table NAME, the table to land the rows in")
	}
	for _, name := range []string{"cursor", "rows", "where", "count", "reconnect", "upload-every", "catch-up", "catch-up-rounds", "metadata"} {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf("--%s does not apply to --into: the table keeps its own place (and always reconnects); drop --%s", name, name)
		}
	}
	return nil
}

// checkOutput refuses --output without a local cursor file, the one place
// its length can be recorded with the offset.
func checkOutput(output, local, remote string) error {
	switch {
	case output == "" || local != "":
		return nil
	case remote != "":
		return fmt.Errorf("--output needs a local --cursor FILE besides %s: the output's length is recorded in the local file, in the same atomic write as the offset; add --cursor FILE", remote)
	}
	return errors.New("--output needs --cursor FILE: the cursor records how much of the output its offset covers, which makes the pair exactly once; add --cursor FILE (or print to stdout, at least once)")
}

// tailInto runs `tail --into`: txbox.Land until SIGINT/SIGTERM (the
// command's context) or, with --until-caught-up, until it caught up.
func tailInto(cmd *cobra.Command, a *app, url string, dial wire.DialOptions, dsn, table string, offset, reset *int64, untilCaughtUp bool) error {
	db, d, err := txbox.OpenDSN(dsn)
	if err != nil {
		return usageError{err}
	}
	defer db.Close()
	shown := dsn
	if d == txbox.Postgres {
		shown = txbox.Redact(dsn)
	}
	where := "table " + table + " in " + shown
	res, err := txbox.Land(cmd.Context(), db, d, url, table, txbox.LandOptions{
		DialOptions: dial, Offset: offset, Reset: reset, UntilCaughtUp: untilCaughtUp,
		Notice: func(msg string, kv ...any) { a.logger.Warn(msg, kv...) },
		Started: func(s txbox.LandStart) {
			switch {
			case s.Moved:
				a.logger.Info(fmt.Sprintf("moved the position saved for %s from offset %d to %d; landing from %s", where, s.Saved, s.Last, startText(*reset, s.Last+1)))
			case s.Saved != wire.Null && offset != nil:
				a.logger.Info(fmt.Sprintf("resuming after offset %d saved for %s; --offset applies only when no position is saved (move it with --reset-position)", s.Saved, where))
			}
		},
	})
	a.logger.Info("tail --into ended", "table", table, "rows", res.Rows, "last_offset", res.Last)
	return intoError(err, table, shown, d)
}

// startText names where a --reset-position starts: the earliest row, or
// offset next.
func startText(reset, next int64) string {
	if reset == 0 {
		return "the earliest row"
	}
	return "offset " + strconv.FormatInt(next, 10)
}

// intoError words a failed --into for the command line: what the user can
// do with streamcast's flags, naming neither the txbox package nor the
// state table that keeps the table's place, which the user never made
// (except in the statement a role without CREATE rights needs run for it).
func intoError(err error, table, dsn string, d txbox.Dialect) error {
	if err == nil {
		return nil
	}
	var (
		sm *txbox.StreamMismatch
		nr *wire.NotReplayable
		se *txbox.StateError
	)
	if errors.As(err, &se) {
		return intoMessage{msg: stateMessage(se, table, dsn, d), err: err}
	}
	switch {
	case errors.As(err, &sm):
		return fmt.Errorf("table %s was landed from stream id %s, but the server now serves stream id %s: the stream was recreated, or the URL names another stream; point the URL at the original stream, or land this one in a new --table", table, sm.Stored, sm.Got)
	case errors.As(err, &nr):
		return fmt.Errorf("table %s cannot go on where it is saved: %v; rerun with --reset-position earliest (or a later offset the server still serves) to move its position, or land the stream in a new --table", table, nr)
	}
	return intoMessage{msg: strings.TrimPrefix(err.Error(), "txbox: "), err: err}
}

// stateMessage words a failure on the place tail --into keeps for table
// in the database at dsn.
func stateMessage(se *txbox.StateError, table, dsn string, d txbox.Dialect) string {
	cause := "no cause given"
	if se.Err != nil {
		cause = se.Err.Error()
	}
	switch se.Op {
	case txbox.StateCreate:
		out := "make the database file and its directory writable, or give --into a database that is"
		if d == txbox.Postgres {
			out = "grant the role CREATE on the schema, or have an owner of the database run once: " + se.DDL
		}
		return fmt.Sprintf("cannot create the table where tail --into keeps the place of table %s in %s: %s;\n%s", table, dsn, cause, out)
	case txbox.StateRead:
		return fmt.Sprintf("cannot read the place saved for table %s in %s: %s; check that the database is reachable and readable, then rerun", table, dsn, cause)
	case txbox.StateGone:
		return fmt.Sprintf("the place saved for table %s in %s was deleted while the tail ran; rerun with --reset-position set one above the table's highest streamcast_offset", table, dsn)
	}
	return fmt.Sprintf("cannot save the place of table %s in %s: %s; make the database writable and rerun (the place moves with the rows, so nothing lands twice)", table, dsn, cause)
}

// intoMessage rewords an error and keeps it for errors.As.
type intoMessage struct {
	msg string
	err error
}

func (e intoMessage) Error() string { return e.msg }
func (e intoMessage) Unwrap() error { return e.err }

// splitCursors sorts the --cursor values into one local file and one S3
// object, refusing a second of either.
func splitCursors(vals []string) (local, remote string, err error) {
	for _, v := range vals {
		switch {
		case v == "":
			return "", "", errors.New("--cursor is empty; give a file path or s3://bucket/key")
		case ndjson.IsS3URI(v):
			if remote != "" {
				return "", "", fmt.Errorf("--cursor names two S3 objects (%s and %s); give one", remote, v)
			}
			if _, _, err := ndjson.ParseS3URI(v); err != nil {
				return "", "", err
			}
			remote = v
		default:
			if local != "" {
				return "", "", fmt.Errorf("--cursor names two files (%s and %s); give one file, and at most one s3://bucket/key", local, v)
			}
			local = v
		}
	}
	return local, remote, nil
}

// parseResetPosition reads --reset-position: an offset, "earliest" (0) or
// "latest" (ndjson.ResetLatest, the frontier).
func parseResetPosition(s string) (int64, error) {
	switch s {
	case "earliest":
		return 0, nil
	case "latest":
		return ndjson.ResetLatest, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("--reset-position %q is not a position; give an offset (0 or more), \"earliest\" or \"latest\"", s)
	}
	return n, nil
}

// parseOffset reads --offset: a non-negative integer, or "earliest" (0).
func parseOffset(s string) (int64, error) {
	if s == "earliest" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("--offset %q is not an offset; give a number (0 or more) or \"earliest\"", s)
	}
	return n, nil
}

// catchUpFlags refuses --catch-up-rounds and --metadata without
// --catch-up, which alone reads the published tables.
func catchUpFlags(cmd *cobra.Command, catchUp bool) error {
	if catchUp {
		return nil
	}
	for _, name := range []string{"catch-up-rounds", "metadata"} {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf("--%s applies to --catch-up; add --catch-up or drop --%s", name, name)
		}
	}
	return nil
}

// catchUpFrom reads a tail's gap from the published tables: through
// --metadata when given (trusted as the file meant), else through the
// metadata the greeting names, checked against its stream_id.
func catchUpFrom(a *app, metadata string, where json.RawMessage) ndjson.CatchUpFunc {
	return func(ctx context.Context, g *wire.Greeting, from int64, emit func(offset, ts int64, row []byte) error) (int64, error) {
		o := history.CatchUpOptions{MetadataURI: metadata, Where: where, S3: a.cfg.S3}
		if o.MetadataURI == "" {
			o.MetadataURI, o.StreamID = g.MetadataHint, g.StreamID
			if o.MetadataURI == "" {
				o.MetadataURI = g.Metadata
			}
		}
		if o.MetadataURI == "" {
			return from, errors.New("the server's greeting names no published metadata for this stream, so there are no tables to read the gap from; give --metadata URI if they are elsewhere")
		}
		a.logger.Info("catching up from the published tables", "from", from, "metadata", o.MetadataURI)
		return history.CatchUp(ctx, o, from, emit)
	}
}
