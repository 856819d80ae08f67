package cmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/streamcast/streamcast/internal/ndjson"
)

func newTailCmd(a *app) *cobra.Command {
	var (
		opts       = ndjson.DefaultTailOptions()
		offset     string
		where      string
		cursorPath string
		tlsFlags   *clientTLS
	)
	cmd := &cobra.Command{
		Use:   "tail URL",
		Short: "Print a stream's rows as NDJSON, live or from an offset",
		Long: `Subscribe to the stream at URL (ws://host:port/stream) and print one line per
row on stdout: the frame [offset,ts,row] exactly as the server sent it, or
with --rows the row object alone.

Without --offset or --cursor the tail starts live, at the stream's frontier.
--offset N starts at offset N (inclusive); --offset earliest at the oldest row
the server still serves.

--cursor FILE keeps the tail's place across runs: the file holds the last
offset the tail finished with, and the next run resumes one above it. The
file moves only after a row's line has been written and flushed, is saved
atomically at most once a second and again on a clean exit (SIGINT, SIGTERM,
--count, --until-caught-up), and never moves backwards on its own: --offset
given with --cursor re-reads from N while the file keeps its place. A cursor
file that cannot be read or is empty counts as absent, with a warning.

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

A refusal exits 1 with one line saying what to rerun with.`,
		Example: `  streamcast tail ws://127.0.0.1:8765/demo
  streamcast tail --offset earliest --until-caught-up --rows ws://127.0.0.1:8765/demo > demo.ndjson
  streamcast tail --cursor demo.cursor --reconnect ws://127.0.0.1:8765/demo | ./consume
  streamcast tail --where '{"symbol":"BTC-USD"}' --count 10 ws://127.0.0.1:8765/demo
  streamcast tail --ca-file ca.crt wss://broker.example.com:8765/demo`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if offset != "" {
				n, err := parseOffset(offset)
				if err != nil {
					return usageError{err}
				}
				opts.Offset = &n
			}
			if where != "" {
				opts.Where = json.RawMessage(where)
			}
			if err := opts.Validate(); err != nil {
				return usageError{err}
			}
			if cursorPath != "" {
				c, warn, err := ndjson.OpenCursor(cursorPath)
				if err != nil {
					return err
				}
				if warn != nil {
					a.logger.Warn(warn.Error())
				}
				opts.Cursor = c
			}
			opts.Logger = a.logger
			tc, err := tlsFlags.config(a.logger)
			if err != nil {
				return err
			}
			opts.TLS = tc

			// A reader that goes away (| head) is an ordinary end: get EPIPE
			// from the write instead of dying of SIGPIPE, so the cursor is saved.
			pipe := make(chan os.Signal, 1)
			signal.Notify(pipe, syscall.SIGPIPE)
			defer signal.Stop(pipe)

			res, err := ndjson.Tail(cmd.Context(), args[0], a.stdout, opts)
			if errors.Is(err, syscall.EPIPE) {
				err = nil
			}
			a.logger.Debug("tail ended", "rows", res.Rows, "first", res.First, "last", res.Last, "reconnects", res.Reconnects)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&offset, "offset", "", "start at offset `N` (inclusive), or at the oldest row still served with \"earliest\" (default: live, or one above --cursor)")
	f.StringVar(&where, "where", "", "only rows matching this `JSON` object of column to value (or list of values), filtered by the server")
	f.Int64Var(&opts.Count, "count", 0, "exit after `N` rows (0: no limit)")
	f.BoolVar(&opts.UntilCaughtUp, "until-caught-up", false, "exit once every row below the frontier at connect has been printed")
	f.BoolVar(&opts.Reconnect, "reconnect", false, "on 1001, a network error or 4429, reconnect with backoff and resume after the last row")
	f.BoolVar(&opts.Rows, "rows", false, "print only each row's object, not [offset,ts,row]")
	f.StringVar(&cursorPath, "cursor", "", "keep the last offset finished with in `FILE`, and resume one above it")
	tlsFlags = addClientTLSFlags(f)
	_ = cmd.RegisterFlagCompletionFunc("offset", cobra.FixedCompletions([]string{"earliest"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
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
