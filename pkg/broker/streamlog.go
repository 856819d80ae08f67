package broker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/charmbracelet/log"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
	"github.com/streamcast/streamcast/pkg/schema"
)

// idleCloseAfter is how long a served log's SQLite connections may go unused
// before the log closes them (logstore.WithIdleClose); the next publish
// or read opens them again.
const idleCloseAfter = 5 * time.Second

// logSpec is what openStreamLog needs of a durable stream and of its server.
type logSpec struct {
	Stream config.Stream  // the stream as configured
	Schema *schema.Schema // its compiled schema
	Server *config.Config // the server's config: root, published prefix, S3, tier settings
	Clock  logstore.Clock // every log's clock; nil is the system clock
	Logger *log.Logger    // receives what openStreamLog notices on the way
	// Log, when set, is the current log already open as the Writer with
	// Options (an online migration's new log, lifecycle.Options.KeepNext):
	// openStreamLog checks it as it would a log it opened, and takes it over: it
	// is the returned log, or closed on an error.
	Log *logstore.Log
}

// Options are the options openStreamLog opens or creates the stream's log with.
func (sp logSpec) Options() []logstore.Option {
	// A quiet stream's log lets its SQLite connections go, keeping only
	// its lock: thousands of idle streams must fit in the descriptor limit.
	opts := []logstore.Option{logstore.WithClock(sp.Clock), logstore.WithIdleClose(idleCloseAfter)}
	if sp.Stream.Replicate {
		opts = append(opts, logstore.WithReplicatedWAL()) // the replicator checkpoints (docs/design.md §4.9)
	}
	return opts
}

// openedLog is a durable stream's current log, open for writing, and what
// openStreamLog read on the way.
type openedLog struct {
	Log *logstore.Log
	// Meta is the stream's metadata; MetaURI and HintURI are the
	// published plain copy and hint the greeting names.
	Meta             *meta.Metadata
	MetaURI, HintURI string
	// End is the log's end offset: the offset the next row gets.
	End int64
}

// openStreamLog opens a durable stream's current log for writing and reads its
// end. Which log is current comes from the stream's metadata, resolved
// without ever minting an identity over history that exists (meta.Resolve,
// I8): a stream with nothing anywhere gets its first log and its first
// metadata (published copy first); otherwise the log the metadata names is
// opened, never created. The log must hold the schema the config declares,
// and a stream with a history_guard is checked before openStreamLog returns. On an
// error no log is left open.
func openStreamLog(ctx context.Context, root string, sp logSpec) (*openedLog, error) {
	o, err := open(ctx, root, sp)
	if err != nil && sp.Log != nil {
		_ = sp.Log.Close()
	}
	return o, err
}

func open(ctx context.Context, root string, sp logSpec) (*openedLog, error) {
	srvCfg := sp.Server
	lay, err := meta.NewLayout(root, srvCfg.Published)
	if err != nil {
		return nil, fmt.Errorf("stream %q: %w", sp.Stream.Name, config.PublishedError(err))
	}
	// A log already here must publish where the config says, and reach S3
	// as it says, before its stream's metadata is looked for there: the
	// metadata is read and written at the configured prefix.
	if err := checkStoredFirst(sp, lay); err != nil {
		return nil, err
	}
	store, err := meta.NewStore(ctx, lay, sp.Stream.Name, srvCfg.S3)
	if err != nil {
		return nil, err
	}
	res, err := meta.Resolve(ctx, store)
	if err != nil {
		return nil, err
	}
	if res.Warning != nil {
		sp.Logger.Warn("the stream serves from its home's metadata; its published copy is not current", "stream", sp.Stream.Name, "err", res.Warning)
	}
	if res.Outcome != meta.Found && res.Outcome != meta.Absent {
		sp.Logger.Info("stream metadata "+res.Outcome.String(), "stream", sp.Stream.Name, "stream_id", res.Metadata.StreamID, "metadata", store.PublishedURI())
	}
	opts := sp.Options()
	md := res.Metadata
	var lg *logstore.Log
	if md == nil {
		if sp.Log != nil {
			return nil, fmt.Errorf("stream %q: no metadata names the log %s it was given", sp.Stream.Name, sp.Log.Dir())
		}
		// Nothing of the stream anywhere: its first log, then the metadata
		// naming it, as ingest makes them (lifecycle.CreateFirst).
		lc, err := srvCfg.LogSettings(sp.Stream, meta.LogName(sp.Stream.Name, 1))
		if err != nil {
			return nil, fmt.Errorf("stream %q: %w", sp.Stream.Name, err)
		}
		s := lifecycle.Stream{Layout: lay, S3: srvCfg.S3, Name: sp.Stream.Name}
		lg, md, err = lifecycle.CreateFirst(ctx, store, s, lifecycle.Declaration{Schema: sp.Schema, Log: lc}, historyGuard(sp), opts...)
		if err != nil {
			return nil, err
		}
		sp.Logger.Info("new stream: its identity is minted", "stream", sp.Stream.Name, "stream_id", md.StreamID, "metadata", store.PublishedURI())
	} else {
		if in := md.Intent; in != nil && (in.Kind == lifecycle.KindMigrate || in.Kind == lifecycle.KindRetire) {
			// The current log may be fenced and its successor half made:
			// the command that recorded the intent finishes it, offline.
			return nil, fmt.Errorf("stream %q: a %s of it was interrupted (its intent is recorded in metadata version %d); run `streamcast %s %s` to finish it, then serve again",
				sp.Stream.Name, in.Kind, md.Version, in.Kind, sp.Stream.Name)
		}
		cur := md.Current()
		if cur == nil {
			return nil, fmt.Errorf("stream %q: its metadata %s (version %d) names no log; restore the stream's home directory from a backup", sp.Stream.Name, store.HomeURI(), md.Version)
		}
		dir := lay.LogDir(sp.Stream.Name, cur.Name)
		if sp.Log != nil {
			// The log the caller made current: the metadata must name it,
			// as it names any log opened here.
			if filepath.Clean(sp.Log.Dir()) != filepath.Clean(dir) {
				return nil, fmt.Errorf("stream %q: its metadata %s (version %d) names log %s as current, not the log %s it was given",
					sp.Stream.Name, store.HomeURI(), md.Version, cur.Name, sp.Log.Dir())
			}
			lg, err = sp.Log, nil
		} else {
			// A log too old to store its names is given the metadata's
			// (its stream's, and the name the metadata knows it by), and
			// stores them; a log that stores names keeps its own.
			lg, err = logstore.Open(dir, logstore.Writer, append(opts, logstore.WithNames(sp.Stream.Name, cur.Name))...)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("stream %q: its metadata %s (version %d) names log %s as current, but %s holds no log; "+
				"a log is never created afresh under metadata that names it (docs/design.md I8): restore that directory from a backup",
				sp.Stream.Name, store.HomeURI(), md.Version, cur.Name, dir)
		}
		if err != nil {
			return nil, fmt.Errorf("stream %q: %w", sp.Stream.Name, err)
		}
		if err := md.CheckLive(lg); err != nil {
			_ = lg.Close()
			return nil, err
		}
	}
	dir := lg.Dir()
	if got, want := string(lg.Schema().JSON()), string(sp.Schema.JSON()); got != want || lg.Schema().IsAny() != sp.Schema.IsAny() {
		_ = lg.Close()
		return nil, fmt.Errorf("stream %q: the log at %s was created with another schema than the config declares; "+
			"a log's schema never changes: stop the server and run streamcast migrate %s to continue the stream in a new log with the new schema, "+
			"or put the schema the log was created with back in the config (log has %s, config has %s)", sp.Stream.Name, dir, sp.Stream.Name, clip(got, 200), clip(want, 200))
	}
	warns, err := srvCfg.CheckStored(sp.Stream, dir, lg.Config())
	if err != nil {
		_ = lg.Close()
		return nil, fmt.Errorf("stream %q: %w", sp.Stream.Name, err)
	}
	if len(warns) > 0 {
		sp.Logger.Warn("the log keeps the sizes and sort order it was created with; the config's retention and grace settings still apply through serve's maintain children",
			"stream", sp.Stream.Name, "log", dir, "differences", strings.Join(warns, "; "))
	}
	earliest, end, err := lg.Extent(ctx)
	if err != nil {
		_ = lg.Close()
		return nil, fmt.Errorf("stream %q: read the extent of %s: %w", sp.Stream.Name, dir, err)
	}
	// A protected stream is checked before any traffic reaches it.
	if g := historyGuard(sp); g != nil {
		if err := g.Check(ctx, md, lg, earliest, end); err != nil {
			_ = lg.Close()
			return nil, err
		}
	}
	return &openedLog{Log: lg, Meta: md, End: end, MetaURI: store.PublishedURI(), HintURI: store.PublishedHintURI()}, nil
}

// checkStoredFirst refuses the config when the newest log in the
// stream's home stores another published prefix or other S3 settings
// (config.CheckStored); the warnings wait for the open of the current log.
func checkStoredFirst(sp logSpec, lay meta.Layout) error {
	logs, err := meta.LocalLogs(lay, sp.Stream.Name)
	if err != nil || len(logs) == 0 {
		return err
	}
	dir := lay.LogDir(sp.Stream.Name, logs[len(logs)-1])
	if sp.Log != nil && filepath.Clean(sp.Log.Dir()) == filepath.Clean(dir) {
		// The log given is the newest: its stored config is at hand, and
		// opening it again read-only would cost its WAL a checkpoint
		// when that handle closes.
		if _, err := sp.Server.CheckStored(sp.Stream, dir, sp.Log.Config()); err != nil {
			return fmt.Errorf("stream %q: %w", sp.Stream.Name, err)
		}
		return nil
	}
	lg, err := logstore.Open(dir, logstore.ReadOnly)
	if err != nil {
		return fmt.Errorf("stream %q: %w", sp.Stream.Name, err)
	}
	defer lg.Close()
	if _, err := sp.Server.CheckStored(sp.Stream, dir, lg.Config()); err != nil {
		return fmt.Errorf("stream %q: %w", sp.Stream.Name, err)
	}
	return nil
}

// historyGuard is the stream's history_guard as meta checks it (package
// meta, Guard); nil when the stream has none.
func historyGuard(sp logSpec) *meta.Guard { return sp.Stream.Guard() }

// clip shortens s for an error message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
