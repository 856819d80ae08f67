package cmd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"

	"github.com/charmbracelet/log"
	"github.com/spf13/cobra"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta"
)

func newMaintainCmd(a *app) *cobra.Command {
	// The flags are maintain's: serve renders its children's command lines
	// from the same logstore.MaintainArgs, so a flag cannot be renamed on one side only.
	args := logstore.DefaultMaintainArgs()
	roles := logstore.RoleNames()
	cmd := &cobra.Command{
		Use:   logstore.MaintainCommand + " --role ROLE --every DUR --log PATH...",
		Short: "Run one maintenance role over logs in a loop (started by serve)",
		Long: `Run one maintenance role over one or more logs, a pass over every log each
--every, beside the serve process that writes them. serve starts one
maintain process per role; run one by hand to catch up a log whose server
is stopped, or to run the roles on a schedule of your own.

Roles:
  seal             turn buffered rows into Parquet files under <log>/files/, a
                   full target at a time; once per --flush-every (at wall-clock
                   multiples of it) seal everything buffered
  compact          merge adjacent small files into larger ones (the log's
                   target_file_bytes, 512 MiB by default)
  publish          push finished files into the log's Iceberg table, one commit
                   per pass; once per --flush-every push every file
  clean            delete buffered rows that files hold, and local files that
                   are published and past staging_retention (or beyond
                   staging_max_bytes); delete what the delete queue holds
                   once its grace is over
  clean-published  expire snapshots of the published table past
                   published_snapshot_retention, and delete the objects no
                   snapshot references any more once their grace is over
  retain           the retention pass of each log's stream (streamcast
                   retain): publish the floor of the stream's window in its
                   metadata and on its logs, then, after retention_grace,
                   delete below it

Retention, grace and S3 settings are stored in each log when it is created;
the flags below override them for this process. S3 credentials come only
from the standard AWS environment variables (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN) or profile (AWS_PROFILE), never
from flags.

A --log that holds no log when maintain starts is an error (exit 1): a
mistyped path is never retried. After that, a failed pass, or a log that
fails to open, is logged and retried on the next one; nothing is lost by a
retry. SIGTERM or SIGINT ends the loop after the pass in progress; SIGUSR1
runs a flushing pass over every log at once. With --ready-fd, "ready" is
written to that file descriptor once every log has been opened, and
"flushed" after each pass that SIGUSR1 asked for. With --add-fd (serve
passes it), more logs arrive on that descriptor while maintain runs, one
JSON line each ({"seq":N,"logs":[DIR...]}), each answered on --ready-fd
with "added N" or "refused N" and the reason: an added log is stepped at
once and in every pass after, and the other logs keep their schedule.
A pass steps only the logs
with work (a commit since their last step, a flush or a deletion come due);
an idle log is closed, and at most --max-open-logs are open at once. Two processes never run one role on one log at the same
time: each role holds <log>/<role>.lock while it works, and the other skips
its pass. With STREAMCAST_HEAP_PROFILE_DIR set (serve's children inherit
it), each SIGUSR2 writes a heap profile, heap-ROLE-PID.pprof, there, and
heap-ROLE-PID.txt, the runtime's memory statistics after the same collection.`,
		Example: `  streamcast maintain --role seal --every 250ms --flush-every 60s --log data/trades/trades
  streamcast maintain --role publish --every 10s --flush-every 60s --log data/trades/trades
  streamcast maintain --role clean --every 10s --log data/trades/trades --log data/quotes/quotes`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logstore.AfterInit() // a child of serve: collect as usual from here (logstore.ChildEnv)
			if err := args.Validate(); err != nil {
				return usageError{err}
			}
			var ready io.WriteCloser
			if args.ReadyFD != 0 {
				f := os.NewFile(uintptr(args.ReadyFD), "ready")
				if _, err := f.Stat(); err != nil {
					_ = f.Close() // now, while the number is free, not from a finalizer later
					return usageError{fmt.Errorf("--%s %d is not an open file descriptor: %w", logstore.FlagReadyFD, args.ReadyFD, err)}
				}
				ready = f
				defer ready.Close()
			}
			var sayMu sync.Mutex // the loop and the additions' reader both answer
			say := func(line string) {
				if ready != nil {
					sayMu.Lock()
					_, _ = io.WriteString(ready, line+"\n")
					sayMu.Unlock()
				}
			}
			var adds *logstore.Additions
			if args.AddFD != 0 {
				f, err := openAddFD(args.AddFD)
				if err != nil {
					return usageError{fmt.Errorf("--%s %d: %w", logstore.FlagAddFD, args.AddFD, err)}
				}
				adds = logstore.NewAdditions(args.Role)
				done := readAdditions(f, adds, say, a.logger.With("role", string(args.Role)))
				// Closing the descriptor ends the reader's read in progress
				// (openAddFD); it is waited for, so it never outlives the
				// command or answers on a closed --ready-fd.
				defer func() { _ = f.Close(); <-done }()
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			flush, flushDone := flushSignals(ctx)
			defer func() { cancel(); <-flushDone }()
			if dir := os.Getenv(logstore.HeapProfileEnv); dir != "" {
				heapDone := heapProfiles(ctx, dir, string(args.Role), a.logger)
				defer func() { cancel(); <-heapDone }()
			}
			return logstore.Maintain(ctx, args.Role, slices.Concat(args.Logs, args.CacheLogs), logstore.MaintainOptions{
				Every:      args.Every,
				FlushEvery: args.FlushEvery,
				Flush:      flush,
				Ready:      func() { say("ready") },
				Flushed:    func() { say("flushed") },
				Override:   logstore.OverrideConfig(args.Override),
				MaxOpen:    args.MaxOpen,
				Logger:     a.logger, // Run adds the role to every line
				Retain:     a.retainPass,
				Cache:      args.CacheLogs,
				Additions:  adds,
			})
		},
	}
	flags := flag.NewFlagSet("maintain", flag.ContinueOnError)
	args.Flags(flags)
	cmd.Flags().AddGoFlagSet(flags)
	_ = cmd.MarkFlagDirname(logstore.FlagLog)
	_ = cmd.MarkFlagDirname(logstore.FlagCacheLog)
	_ = cmd.RegisterFlagCompletionFunc(logstore.FlagRole, cobra.FixedCompletions(roles, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// readAdditions reads the logs the parent adds from r, one JSON line each
// ({"seq":N,"logs":[…],"cache":[…]}), queues them on adds and answers
// each on say: "added N" once they are queued (a process that exits before
// its loop takes them loses nothing: serve restarts it with them on its
// command line), or "refused N why" on one line, having queued none. It
// reads until r ends or is closed; done closes then.
func readAdditions(r io.Reader, adds *logstore.Additions, say func(string), logger *log.Logger) (done <-chan struct{}) {
	c := make(chan struct{})
	go func() {
		defer close(c)
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var req struct {
				Seq   int64    `json:"seq"`
				Logs  []string `json:"logs"`
				Cache []string `json:"cache"`
			}
			if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
				say(fmt.Sprintf("refused %d the request is not one JSON object {\"seq\":N,\"logs\":[…],\"cache\":[…]}: %s", req.Seq, oneLine(err.Error())))
				continue
			}
			if err := adds.Add(req.Logs, req.Cache); err != nil {
				say(fmt.Sprintf("refused %d %s", req.Seq, oneLine(err.Error())))
				continue
			}
			say(fmt.Sprintf("added %d", req.Seq))
		}
		if err := sc.Err(); err != nil && !errors.Is(err, os.ErrClosed) {
			// serve then gets no answer, and restarts the children over
			// every log instead.
			logger.Error("stopped reading logs to add; serve restarts this child to give it more", "err", err)
		}
	}()
	return c
}

// oneLine keeps an answer on its line.
func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// retainPass is the retain role's step: the retention pass of the stream
// whose current log is l (pkg/meta owns it; the runner, below meta, only
// calls it).
func (a *app) retainPass(ctx context.Context, l *logstore.Log) (int64, error) {
	r, err := meta.RetainLog(ctx, l, meta.RetainOptions{})
	if r.Moved {
		a.logger.Info("published the retention floor", "role", string(logstore.RoleRetain), "log", l.Dir(), "floor", r.Floor, "pending_deletions", r.Pending)
	}
	return r.Taken(), err
}

// heapProfiles writes dir/heap-ROLE-PID.pprof, after a collection, on
// each SIGUSR2 until ctx ends; the channel closes when it has stopped.
// Beside it, heap-ROLE-PID.txt holds the runtime's memory statistics read
// just after that collection (heap in use and released, stacks, the
// collector's metadata): a child's resident memory is mostly not its live
// heap, and those figures say where the runtime's share of it is.
func heapProfiles(ctx context.Context, dir, role string, logger *log.Logger) <-chan struct{} {
	return onSignal(ctx, heapSignal, func() {
		path := filepath.Join(dir, fmt.Sprintf("heap-%s-%d.pprof", role, os.Getpid()))
		if err := writeHeapProfile(path); err != nil {
			logger.Warn("heap profile not written", "role", role, "path", path, "err", err)
		}
	})
}

// writeHeapProfile writes the heap profile, after a collection so it
// shows what is live, to path, and the memory statistics read before the
// profile's own allocations to path with the extension .txt. The
// statistics are written first, so a complete .pprof means both are there.
func writeHeapProfile(path string) error {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	stats := strings.TrimSuffix(path, filepath.Ext(path)) + ".txt"
	if err := os.WriteFile(stats, memStatsText(&ms), 0o644); err != nil {
		return fmt.Errorf("write the memory statistics (is %s a writable directory?): %w", logstore.HeapProfileEnv, err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create the heap profile (is %s a writable directory?): %w", logstore.HeapProfileEnv, err)
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("write the heap profile: %w", err)
	}
	return f.Close()
}

// memStatsText renders the runtime's memory statistics that account for a
// process's anonymous memory, one "Name = bytes" a line (the names are
// runtime.MemStats's, as in the text form of a heap profile).
func memStatsText(ms *runtime.MemStats) []byte {
	var b strings.Builder
	for _, f := range []struct {
		name string
		v    uint64
	}{
		{"HeapAlloc", ms.HeapAlloc}, {"HeapInuse", ms.HeapInuse}, {"HeapIdle", ms.HeapIdle},
		{"HeapReleased", ms.HeapReleased}, {"StackInuse", ms.StackInuse}, {"MSpanInuse", ms.MSpanInuse},
		{"MCacheInuse", ms.MCacheInuse}, {"BuckHashSys", ms.BuckHashSys}, {"GCSys", ms.GCSys},
		{"OtherSys", ms.OtherSys}, {"Sys", ms.Sys}, {"NumGC", uint64(ms.NumGC)},
	} {
		fmt.Fprintf(&b, "%s = %d\n", f.name, f.v)
	}
	return []byte(b.String())
}

// flushSignals turns each SIGUSR1 into a request for a flushing pass, until
// ctx ends; done closes when it has stopped.
func flushSignals(ctx context.Context) (flush <-chan struct{}, done <-chan struct{}) {
	c := make(chan struct{}, 1)
	return c, onSignal(ctx, flushSignal, func() {
		select {
		case c <- struct{}{}:
		default: // one is already pending
		}
	})
}

// onSignal calls fn on each of sigs that arrives until ctx ends; the
// channel closes when it has stopped listening.
func onSignal(ctx context.Context, sigs []os.Signal, fn func()) <-chan struct{} {
	done := make(chan struct{})
	sig := make(chan os.Signal, 1)
	if len(sigs) > 0 { // Notify with no signals would relay every signal
		signal.Notify(sig, sigs...)
	}
	go func() {
		defer close(done)
		defer signal.Stop(sig)
		for {
			select {
			case <-ctx.Done():
				return
			case <-sig:
				fn()
			}
		}
	}()
	return done
}
