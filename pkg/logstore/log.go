package logstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamcast/streamcast/internal/durable"
	"github.com/streamcast/streamcast/pkg/logstore/parquetfile"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/schema"
)

// Mode says what a handle may do with a log.
type Mode int

const (
	// ReadOnly handles take no lock and never write.
	ReadOnly Mode = iota
	// Maintainer handles may run the maintenance steps (Seal, Publish, ...; writes
	// in buffer.db, each step under its own role lock) but never Append.
	Maintainer
	// Writer is the one appending handle (I7): it holds an exclusive flock
	// on <log>/lock for its whole life. It may also run the steps.
	Writer
)

func (m Mode) String() string {
	switch m {
	case ReadOnly:
		return "read-only"
	case Maintainer:
		return "maintainer"
	case Writer:
		return "writer"
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

// Log is one open log. Its methods are safe for concurrent use.
type Log struct {
	dir    string
	mode   Mode
	sch    *schema.Schema
	cfg    Config
	fileSc *arrow.Schema   // schema of sealed files: offset, ts, then the declared (or row) columns, with field ids
	iceSc  *iceberg.Schema // the published table's schema (nil when the columns have no Iceberg equivalent)

	lock *fileLock // writer lock (Writer mode only)

	// wmu serialises everything done on wconn: SQLite transactions on one
	// connection must not interleave, and a SELECT issued while another
	// goroutine's transaction is open would silently join it.
	wmu    sync.Mutex
	wdb    *sql.DB   // nil in ReadOnly mode
	wconn  *sql.Conn // the single connection every write goes through
	stmts  writeStmts
	next   int64  // next offset to assign; Writer only, guarded by wmu
	fenced int64  // the end Fence recorded (0: not fenced); Writer only, guarded by wmu
	packed []byte // reused packing buffer, guarded by wmu

	// The idle close of the write connection (WithIdleClose), guarded by
	// wmu: the last write through wconn, and the timer that closes it.
	lastWrite time.Time
	idleTimer *time.Timer

	rdb *sql.DB // reads: scans, extents, seal input

	roleMus [5]sync.Mutex // one pass of each maintenance role at a time within this process (Acquire)

	// pol is cfg with the policy overrides of the maintenance process
	// (WithOverride); guarded by polMu.
	polMu sync.Mutex
	pol   Config
	logID string // meta log_id: stamped on the published table (I8)
	tiers bool   // buffer.db has the tables of the later tiers (false only for an old log opened read-only)

	pubMu sync.Mutex
	pub   *warehouse.Table // the published table's location and IO, made on first use

	opts options // the clock and test hooks this handle was opened with

	closed atomic.Bool
}

// Schema returns the log's schema.
func (l *Log) Schema() *schema.Schema { return l.sch }

// Config returns the log's configuration, defaults filled in.
func (l *Log) Config() Config {
	c := l.cfg
	c.SortBy = slices.Clone(c.SortBy)
	return c
}

// Dir returns the log's directory.
func (l *Log) Dir() string { return l.dir }

// Mode returns the mode the log was opened in.
func (l *Log) Mode() Mode { return l.mode }

// ID returns the log's id (meta log_id), which tells it from another log
// created under the same name and is stamped on its published table (I8);
// "" for a log no writer or maintainer has opened since ids were added.
func (l *Log) ID() string { return l.logID }

// The names a log gives what it keeps in its directory. They are spelled
// here and nowhere else: other packages and tests use these.
const (
	// BufferFile is the log's SQLite database: unsealed rows, intents, the
	// delete queue and the log's config (its names included).
	BufferFile = "buffer.db"
	// FilesDir is the directory of the log's sealed and compacted Parquet
	// files.
	FilesDir = "files"
)

const (
	lockFile = "lock"
	formatV1 = 1
)

// ReplicaProgressFile is the file a WAL replicator (pkg/logstore/replica)
// keeps beside a log it ships: its presence tells clean that the log
// replicates, so buffered rows wait for the published table.
const ReplicaProgressFile = "replicate.json"

// Create makes a new log in dir (which must not exist or be empty) with the
// given schema and config, and returns it opened as the Writer. The config
// is stored with the log, its stream and log names included: they name the
// published table for the log's life, wherever dir later sits. Both names
// must be given; they are never taken from dir.
func Create(dir string, sch *schema.Schema, cfg Config, opts ...Option) (*Log, error) {
	o := newOptions(opts)
	if sch == nil {
		return nil, fmt.Errorf("create log %s: no schema given (use schema.Any() for a stream without one)", dir)
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(dir, sch); err != nil {
		return nil, fmt.Errorf("create log %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	switch {
	case err == nil && len(entries) > 0:
		return nil, fmt.Errorf("create log %s: the directory exists and is not empty; a log is never created over existing data (open it instead)", dir)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("create log %s: %w", dir, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, FilesDir), 0o755); err != nil {
		return nil, fmt.Errorf("create log %s: %w", dir, err)
	}
	lk, err := tryLock(filepath.Join(dir, lockFile))
	if err != nil {
		return nil, fmt.Errorf("create log %s: %w", dir, err)
	}
	// Another Create may have raced us into the empty directory; the lock
	// decides, and the loser finds buffer.db.
	if _, err := os.Stat(filepath.Join(dir, BufferFile)); err == nil {
		lk.Release()
		return nil, fmt.Errorf("create log %s: a log already exists there; open it instead", dir)
	}
	// From here on everything in dir is ours: undo it on failure, so a
	// retried Create does not find a half-made log in its way.
	undo := func(err error) (*Log, error) {
		for _, name := range []string{BufferFile, BufferFile + "-wal", BufferFile + "-shm", newBufferFile, FilesDir} {
			_ = os.RemoveAll(filepath.Join(dir, name))
		}
		lk.Release()
		_ = os.Remove(filepath.Join(dir, lockFile))
		return nil, fmt.Errorf("create log %s: %w", dir, err)
	}
	if err := initBuffer(dir, sch, cfg, o.clock.Now()); err != nil {
		return undo(err)
	}
	if err := durable.SyncDir(dir); err != nil {
		return undo(err)
	}
	l, err := open(dir, Writer, lk, o)
	if err != nil {
		return undo(err)
	}
	return l, nil
}

// Open opens the existing log in dir. A Writer takes the log's lock file and
// fails at once, naming the holder's pid, when another process holds it.
// Writer and Maintainer opens recover an interrupted seal when no other
// process is sealing.
func Open(dir string, mode Mode, opts ...Option) (*Log, error) {
	if mode != ReadOnly && mode != Maintainer && mode != Writer {
		return nil, fmt.Errorf("open log %s: unknown mode %d", dir, int(mode))
	}
	if _, err := os.Stat(filepath.Join(dir, BufferFile)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("open log %s: no log there (%s is missing): %w", dir, filepath.Join(dir, BufferFile), fs.ErrNotExist)
		}
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	var lk *fileLock
	if mode == Writer {
		var err error
		lk, err = tryLock(filepath.Join(dir, lockFile))
		if err != nil {
			return nil, fmt.Errorf("open log %s for writing: %w", dir, err)
		}
	}
	l, err := open(dir, mode, lk, newOptions(opts))
	if err != nil {
		lk.Release()
		return nil, err
	}
	return l, nil
}

// RemoveUnborn removes what a Create killed before it wrote buffer.db left
// in dir (a log without buffer.db never held a row), so a retried Create
// finds the directory free. It refuses a directory holding anything else,
// a log included, and does nothing when dir does not exist.
func RemoveUnborn(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		switch e.Name() {
		case BufferFile:
			return fmt.Errorf("%s holds a log (its %s exists); open it instead", dir, BufferFile)
		case lockFile, BufferFile + "-wal", BufferFile + "-shm":
		case newBufferFile:
			// Create builds buffer.db under this name, then renames it.
		case FilesDir:
			inner, err := os.ReadDir(filepath.Join(dir, FilesDir))
			if err != nil || len(inner) > 0 {
				return fmt.Errorf("%s holds no %s but holds %s/ with %d entries; move it away (it is no log an interrupted create left)", dir, BufferFile, FilesDir, len(inner))
			}
		default:
			return fmt.Errorf("%s holds no %s but holds %s; move it away (it is no log an interrupted create left)", dir, BufferFile, e.Name())
		}
	}
	return os.RemoveAll(dir)
}

// open does the work shared by Create and Open; lk is the writer lock in
// Writer mode.
func open(dir string, mode Mode, lk *fileLock, o options) (*Log, error) {
	l := &Log{dir: dir, mode: mode, lock: lk, opts: o}
	var err error
	l.rdb, err = openDB(filepath.Join(dir, BufferFile), false, 0)
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	l.rdb.SetMaxOpenConns(readConns)
	l.rdb.SetMaxIdleConns(readConns)
	l.rdb.SetConnMaxIdleTime(o.idleClose)
	fail := func(err error) (*Log, error) {
		l.closeDBs()
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	ctx := context.Background()
	m, err := readMeta(ctx, l.rdb)
	if err != nil {
		return fail(err)
	}
	l.sch, l.cfg = m.schema, m.config
	// A log created before logs stored their names takes the ones its
	// stream's metadata gives it (WithNames), never its directory's; a
	// writable open stores them (below). Given none, it stays unnamed and
	// what needs its names refuses (Names).
	if l.cfg.Stream == "" {
		l.cfg.Stream = o.stream
	}
	if l.cfg.Log == "" {
		l.cfg.Log = o.log
	}
	l.pol = l.cfg.Override(o.override)
	l.fileSc = fileSchema(l.sch)
	// The published table's schema, and the file schema with its field ids.
	// A schema Iceberg cannot hold leaves the files without ids; publishing
	// then reports why.
	if ice, err := table.ArrowSchemaToIcebergWithFreshIDs(l.fileSc, false); err == nil {
		if sc, err := parquetfile.WithFieldIDs(l.fileSc, ice); err == nil {
			l.fileSc, l.iceSc = sc, ice
		}
	}
	l.logID = m.logID
	if mode != ReadOnly {
		l.wdb, err = openDB(filepath.Join(dir, BufferFile), true, l.opts.checkpointPages)
		if err != nil {
			return fail(err)
		}
		l.wdb.SetMaxOpenConns(1)
		// wconn is the only connection: when it is let go (WithIdleClose)
		// it closes rather than waiting in the pool.
		l.wdb.SetMaxIdleConns(0)
		l.wconn, err = l.wdb.Conn(ctx)
		if err != nil {
			return fail(err)
		}
		// Logs made before compaction and publishing existed get their
		// tables now, and logs made before Append stopped writing
		// next_offset the trigger that keeps the end (endDDL); IF NOT
		// EXISTS makes this a no-op otherwise.
		if err := l.writeTx(ctx, func(c *sql.Conn) error {
			if _, err := c.ExecContext(ctx, tiersDDL+endDDL); err != nil {
				return err
			}
			if l.logID == "" {
				l.logID = NewToken()
				if _, err := c.ExecContext(ctx, `INSERT OR IGNORE INTO meta(k, v) VALUES ('log_id', ?)`, l.logID); err != nil {
					return err
				}
			}
			return storeNames(ctx, c, l.cfg)
		}); err != nil {
			return fail(fmt.Errorf("add the tables of the later tiers to buffer.db: %w", err))
		}
		l.tiers = true
		if err := l.prepare(ctx); err != nil {
			return fail(err)
		}
		if mode == Writer {
			l.next = m.next
			l.fenced = m.fenced
		}
		if err := os.MkdirAll(filepath.Join(dir, FilesDir), 0o755); err != nil {
			return fail(err)
		}
		// Finish what a crashed sealer left, unless a live one is at it.
		if err := l.recoverIfIdle(ctx); err != nil {
			return fail(err)
		}
	} else {
		var n int
		if err := l.rdb.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'published'`).Scan(&n); err != nil {
			return fail(err)
		}
		l.tiers = n > 0
	}
	if l.idleClosing() {
		// Nothing writes until the first Append or step: a server
		// opening thousands of logs holds no connection per idle one.
		l.releaseWriterLocked()
	}
	if l.logID == "" {
		// A read-only open of a log no maintainer has opened since it got a
		// log id: read it again in case another process just wrote it.
		_ = l.rdb.QueryRowContext(ctx, `SELECT v FROM meta WHERE k = 'log_id'`).Scan(&l.logID)
	}
	return l, nil
}

// Close releases the log's connections and, for the Writer, its lock.
func (l *Log) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.idleTimer != nil {
		l.idleTimer.Stop()
		l.idleTimer = nil
	}
	err := l.closeDBs()
	l.lock.Release()
	l.pubMu.Lock()
	l.pub.Close()
	l.pubMu.Unlock()
	if err != nil {
		return fmt.Errorf("close log %s: %w", l.dir, err)
	}
	return nil
}

// closeDBs closes the connections. The fields keep their (closed) values so
// that a call racing Close gets an error from database/sql, never a nil
// pointer.
func (l *Log) closeDBs() error {
	var errs []error
	l.stmts.close()
	if l.wconn != nil {
		errs = append(errs, l.wconn.Close())
	}
	if l.wdb != nil {
		errs = append(errs, l.wdb.Close())
	}
	if l.rdb != nil {
		errs = append(errs, l.rdb.Close())
	}
	return errors.Join(errs...)
}

func (l *Log) checkOpen() error {
	if l.closed.Load() {
		return fmt.Errorf("log %s: %w", l.dir, ErrClosed)
	}
	return nil
}

// ErrUnnamed is the refusal of what needs a log's identity (its published
// table, its WAL replica, its place in its stream's metadata) on a log
// that stores no stream or log name: one created before logs stored them
// and not yet given them (WithNames).
var ErrUnnamed = errors.New("the log stores no stream or log name")

// Names returns the names of the log's stream and of the log, as the log
// stores them (or, for a log created before logs stored them, as its
// stream's metadata gave them: WithNames). They are its identity, never
// read from where its directory sits; a log without them is refused with
// ErrUnnamed, naming the way out.
func (l *Log) Names() (stream, log string, err error) {
	return l.cfg.names()
}

// names returns c's stream and log names, or ErrUnnamed.
func (c Config) names() (string, string, error) {
	if c.Stream == "" || c.Log == "" {
		return "", "", fmt.Errorf("%w (it was created before logs stored them, and a log's names are never taken from its directory); "+
			"start `streamcast serve` with its stream once: it stores the names the stream's metadata gives the log", ErrUnnamed)
	}
	return c.Stream, c.Log, nil
}

// storeNames records cfg's stream and log names in the stored config of a
// log created before logs stored them; a no-op when they are there, or
// when cfg has none to give. The rest of the stored JSON is kept as it
// is, fields this build does not know included.
func storeNames(ctx context.Context, c *sql.Conn, cfg Config) error {
	var raw []byte
	if err := c.QueryRowContext(ctx, `SELECT v FROM meta WHERE k = 'config'`).Scan(&raw); err != nil {
		return fmt.Errorf("read the stored config: %w", err)
	}
	stored := map[string]json.RawMessage{}
	if err := json.Unmarshal(raw, &stored); err != nil {
		return fmt.Errorf("the config stored in buffer.db is not valid JSON: %w", err)
	}
	changed := false
	for k, v := range map[string]string{"stream": cfg.Stream, "log": cfg.Log} {
		if cur, ok := stored[k]; v == "" || ok && string(cur) != `""` {
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		stored[k] = b
		changed = true
	}
	if !changed {
		return nil
	}
	b, err := json.Marshal(stored)
	if err != nil {
		return err
	}
	_, err = c.ExecContext(ctx, `UPDATE meta SET v = ? WHERE k = 'config'`, string(b))
	return err
}

// meta is what buffer.db's meta table says about the log.
type meta struct {
	schema *schema.Schema
	config Config
	next   int64
	fenced int64 // the end Fence recorded; 0 when not fenced
	logID  string
}

func readMeta(ctx context.Context, db *sql.DB) (meta, error) {
	var m meta
	rows, err := db.QueryContext(ctx, `SELECT k, v FROM meta`)
	if err != nil {
		return m, fmt.Errorf("read buffer.db: %w (was the log fully created?)", err)
	}
	defer rows.Close()
	kv := map[string]any{}
	for rows.Next() {
		var k string
		var v any
		if err := rows.Scan(&k, &v); err != nil {
			return m, fmt.Errorf("read buffer.db meta: %w", err)
		}
		kv[k] = v
	}
	if err := rows.Err(); err != nil {
		return m, fmt.Errorf("read buffer.db meta: %w", err)
	}
	format, _ := kv["format"].(int64)
	if format != formatV1 {
		return m, fmt.Errorf("buffer.db has format %v; this streamcast reads format %d", kv["format"], formatV1)
	}
	schemaJSON := metaBytes(kv["schema"])
	kind := string(metaBytes(kv["schema_kind"]))
	switch kind {
	case "any":
		m.schema = schema.Any()
	case "declared":
		m.schema, err = schema.Compile(schemaJSON)
		if err != nil {
			return m, fmt.Errorf("the schema stored in buffer.db does not compile: %w", err)
		}
	default:
		return m, fmt.Errorf("buffer.db meta has schema_kind %q; expected \"any\" or \"declared\"", kind)
	}
	if err := json.Unmarshal(metaBytes(kv["config"]), &m.config); err != nil {
		return m, fmt.Errorf("the config stored in buffer.db is not valid JSON: %w", err)
	}
	m.config = m.config.WithDefaults()
	next, ok := kv["next_offset"].(int64)
	if !ok || next < 1 {
		return m, fmt.Errorf("buffer.db meta has next_offset %v; expected a positive integer", kv["next_offset"])
	}
	// next_offset is a lower bound; the end is read in one statement, so
	// an evict in another process cannot fall between its two halves.
	if err := db.QueryRowContext(ctx, `SELECT `+endSQL).Scan(&m.next); err != nil {
		return m, fmt.Errorf("read buffer.db's end: %w", err)
	}
	// start_offset is the truth about where the log starts, whatever the
	// stored config says (logs made before Config.Start store none).
	start, ok := kv["start_offset"].(int64)
	if !ok || start < 1 || start > next {
		return m, fmt.Errorf("buffer.db meta has start_offset %v (next offset %d); expected a positive integer no greater than the next offset", kv["start_offset"], next)
	}
	m.config.Start = start
	if v, ok := kv["fenced_end"].(int64); ok {
		m.fenced = v
	}
	m.logID = string(metaBytes(kv["log_id"]))
	return m, nil
}

func metaBytes(v any) []byte {
	switch v := v.(type) {
	case []byte:
		return v
	case string:
		return []byte(v)
	}
	return nil
}
