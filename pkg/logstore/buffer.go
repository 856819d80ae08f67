package logstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"modernc.org/sqlite"

	"github.com/streamcast/streamcast/internal/durable"
	"github.com/streamcast/streamcast/pkg/schema"
)

// busyTimeoutMS bounds how long a statement waits for another process's
// write transaction (a seal's bookkeeping, an evict chunk) before failing.
const busyTimeoutMS = 10000

// dsn returns the connection string for buffer.db. Every connection runs
// WAL with synchronous=FULL: WAL alone syncs only at checkpoints, which
// would let a crash lose commits the server had already delivered (I3).
// Write connections start their transactions with BEGIN IMMEDIATE: a
// deferred transaction that reads first gets SQLITE_BUSY, without waiting,
// when it later needs to write while another process writes.
//
// checkpointPages, when positive, is a write connection's
// wal_autocheckpoint (WithReplicatedWAL); 0 keeps SQLite's default.
func dsn(path string, write bool, checkpointPages int) string {
	s := path + fmt.Sprintf("?_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)", busyTimeoutMS)
	if write {
		if checkpointPages > 0 {
			s += fmt.Sprintf("&_pragma=wal_autocheckpoint(%d)", checkpointPages)
		}
		return s + "&_txlock=immediate"
	}
	// Reads never write, whatever the handle's mode.
	return s + "&_pragma=query_only(1)"
}

func openDB(path string, write bool, checkpointPages int) (*sql.DB, error) {
	syncWithFdatasync()
	c, err := sqlite.NewConnector(dsn(path, write, checkpointPages))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return sql.OpenDB(persistentWAL{c}), nil
}

// syncWithFdatasync makes SQLite commit with fdatasync(2) rather than
// fsync(2), as SQLite's own Linux builds do. A commit is exactly as
// durable (docs/design.md, I3): fdatasync writes the data and the size
// needed to read it back and skips only the timestamps, whose journal
// commit on ext4 is what a single-row commit mostly waits for, and what
// one stream's commit queues behind when another stream's migration or
// seal syncs at the same time. modernc makes the switch process-wide;
// every SQLite database streamcast opens wants it, so each open sets it
// again rather than leaving it to whichever opened first. Where the
// platform has no fdatasync the call fails and fsync stays.
func syncWithFdatasync() { _, _ = sqlite.Fdatasync(true) }

// persistentWAL opens connections that leave the WAL and its index in
// place when the last one closes (SQLITE_FCNTL_PERSIST_WAL); SQLite still
// checkpoints everything into buffer.db then. Without it, the last close
// deletes buffer.db-shm, whose header is how the maintenance processes
// see, without opening a log, that nothing changed (ReadActivity):
// with logs closing when idle (WithIdleClose), each process's open and
// close of a quiet log would look like a change to the others, and they
// would reopen it in turn, forever.
type persistentWAL struct{ driver.Connector }

func (p persistentWAL) Connect(ctx context.Context) (driver.Conn, error) {
	c, err := p.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if fc, ok := c.(sqlite.FileControl); ok {
		if _, err := fc.FileControlPersistWAL("main", 1); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("keep the WAL of buffer.db across closes: %w", err)
		}
	}
	return c, nil
}

// The tables of buffer.db.
//
//	meta          k → v: format, schema, schema_kind, config, next_offset, start_offset,
//	              and once set: fenced_end (Fence), floor (SetFloor); next_offset is
//	              a lower bound of the end, see endSQL
//	groups        one row per commit group: first offset, count, ts, packed rows
//	marks         exactly-once marks, upserted with the group they cover
//	seal_intents  seals begun but not completed (at most one per sealer)
//	files         completed local files (sealed or compacted): range, counts, sizes, column min/max
//
// and the tables of the later tiers (tiersDDL).
const ddl = `
CREATE TABLE meta (k TEXT PRIMARY KEY NOT NULL, v) WITHOUT ROWID;
CREATE TABLE groups (
	first INTEGER PRIMARY KEY,
	n     INTEGER NOT NULL,
	ts    INTEGER NOT NULL,
	rows  BLOB NOT NULL
);
CREATE TABLE marks (
	publisher   TEXT PRIMARY KEY NOT NULL,
	last_seq    INTEGER NOT NULL,
	last_offset INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE seal_intents (
	name         TEXT PRIMARY KEY NOT NULL,
	start_offset INTEGER NOT NULL,
	end_offset   INTEGER NOT NULL,
	created_us   INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE files (
	start_offset INTEGER PRIMARY KEY,
	end_offset   INTEGER NOT NULL,
	name         TEXT NOT NULL UNIQUE,
	row_count    INTEGER NOT NULL,
	arrow_bytes  INTEGER NOT NULL,
	json_bytes   INTEGER NOT NULL,
	file_bytes   INTEGER NOT NULL,
	min_ts       INTEGER NOT NULL,
	max_ts       INTEGER NOT NULL,
	stats        TEXT NOT NULL,
	sealed_us    INTEGER NOT NULL
);
` + tiersDDL + endDDL

// endSQL is the log's end, the next offset to assign, as one SQL
// expression: the end of the last buffered group, or meta next_offset when
// that is further. Append writes only its group, not next_offset: a commit
// that also rewrote the meta row put a second page into the WAL for every
// group, whatever its size. next_offset is written where the last group
// does not tell the end: at create (the log's start), by AdvanceNext (an
// ingest writes files, not groups), and by endDDL's trigger when a group
// leaves the buffer. It only ever rises, so the larger of the two is the
// end (I1), in every process that reads buffer.db. Every read of the end
// goes through endSQL, in one statement, so it sees one snapshot.
const endSQL = `max((SELECT v FROM meta WHERE k = 'next_offset'),
	coalesce((SELECT first + n FROM groups ORDER BY first DESC LIMIT 1), 0))`

// endDDL keeps endSQL true when groups are deleted (evict, delete-below,
// whoever runs it): deleting a group raises next_offset to that group's
// end, so the end never moves back when the last group goes and an offset
// is never handed out twice. Open adds the trigger to logs made before it
// existed, before anything appends.
//
// It fires for every deleted group, not only the last: next_offset is
// then always either the end or the first offset of a buffered group, so
// an older streamcast that takes next_offset for the end fails on the
// group's primary key rather than hand out an offset again.
const endDDL = `
CREATE TRIGGER IF NOT EXISTS groups_keep_end AFTER DELETE ON groups
BEGIN
	UPDATE meta SET v = old.first + old.n WHERE k = 'next_offset' AND v < old.first + old.n;
END;
`

// tiersDDL creates the tables of compaction, publishing and deletion. Open
// runs it on logs created before these tiers existed.
//
//	published        data files of the published table, as the last recorded commit left them
//	publish_intents  files a publish pass is uploading and committing (one pass at a time)
//	compact_intents  compaction outputs being written
//	delete_queue     files and objects to delete once due, after a check that nothing references them
//	holes            offset ranges skipped on purpose (restore resumes past a fence): no tier holds
//	                 rows there; reads, seal and publish step over them, CountRows leaves them out
//	mark_history     each publisher's marks at the offsets it committed, pruned by publish, so a
//	                 pass can write the marks as of the rows it published (MarksAsOf)
const tiersDDL = `
CREATE TABLE IF NOT EXISTS published (
	start_offset INTEGER PRIMARY KEY,
	end_offset   INTEGER NOT NULL,
	name         TEXT NOT NULL,
	path         TEXT NOT NULL UNIQUE,
	row_count    INTEGER NOT NULL,
	file_bytes   INTEGER NOT NULL,
	min_ts       INTEGER NOT NULL,
	max_ts       INTEGER NOT NULL,
	stats        TEXT NOT NULL,
	published_us INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS publish_intents (
	path         TEXT PRIMARY KEY NOT NULL,
	pass         TEXT NOT NULL,
	name         TEXT NOT NULL,
	start_offset INTEGER NOT NULL,
	end_offset   INTEGER NOT NULL,
	row_count    INTEGER NOT NULL,
	file_bytes   INTEGER NOT NULL,
	min_ts       INTEGER NOT NULL,
	max_ts       INTEGER NOT NULL,
	stats        TEXT NOT NULL,
	created_us   INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS compact_intents (
	name         TEXT PRIMARY KEY NOT NULL,
	start_offset INTEGER NOT NULL,
	end_offset   INTEGER NOT NULL,
	inputs       TEXT NOT NULL,
	created_us   INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS delete_queue (
	tier   TEXT NOT NULL,
	path   TEXT NOT NULL,
	due_us INTEGER NOT NULL,
	reason TEXT NOT NULL,
	PRIMARY KEY (tier, path)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS holes (
	start_offset INTEGER PRIMARY KEY,
	end_offset   INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS mark_history (
	publisher   TEXT NOT NULL,
	last_offset INTEGER NOT NULL,
	last_seq    INTEGER NOT NULL,
	PRIMARY KEY (publisher, last_offset)
) WITHOUT ROWID;
INSERT OR IGNORE INTO meta(k, v) VALUES ('published_through', 0);
`

// newBufferFile is where Create builds buffer.db before renaming it into
// place.
const newBufferFile = BufferFile + ".new"

// initBuffer makes dir's buffer.db, tables and meta, in WAL mode, and
// makes it durable; a crash at any point leaves either no buffer.db or a
// whole one (Create's callers remove a log directory without one).
//
// It builds the database as newBufferFile with no journal and no syncs
// (nothing refers to that file, so a torn one is only removed), switches
// it to WAL, fdatasyncs it and renames it to buffer.db; Create then syncs
// the directory, which makes the rename durable. Three syncs in all where
// creating buffer.db in place took ten: a rollback journal for the switch
// to WAL, the tables' commit in the WAL and a checkpoint at close, each
// synced, every one a disk flush the other streams' commits queue behind
// (a migration creates a log while its neighbours serve).
func initBuffer(dir string, sch *schema.Schema, cfg Config, created time.Time) error {
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encode config: %w", err)
	}
	kind := "declared"
	if sch.IsAny() {
		kind = "any"
	}
	tmp := filepath.Join(dir, newBufferFile)
	if err := buildBuffer(tmp, [][2]any{
		{"format", formatV1},
		{"schema", string(sch.JSON())},
		{"schema_kind", kind},
		{"config", string(cfgJSON)},
		{"next_offset", cfg.Start},
		{"start_offset", cfg.Start},
		{"created_us", created.UnixMicro()},
		{"log_id", NewToken()},
	}); err != nil {
		return err
	}
	f, err := os.Open(tmp)
	if err != nil {
		return fmt.Errorf("create buffer.db: %w", err)
	}
	err = durable.SyncData(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("create buffer.db: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, BufferFile)); err != nil {
		return fmt.Errorf("create buffer.db: %w", err)
	}
	return nil
}

// buildBuffer writes the database at path: the tables and the meta rows
// in one transaction, then the switch to WAL (which only sets the file's
// header), all unsynced and without a journal. The connection closes
// before path is renamed; it leaves no WAL behind (none is opened).
func buildBuffer(path string, meta [][2]any) error {
	c, err := sqlite.NewConnector(path + "?_pragma=journal_mode(OFF)&_pragma=synchronous(OFF)")
	if err != nil {
		return fmt.Errorf("create buffer.db: %w", err)
	}
	db := sql.OpenDB(c)
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("create buffer.db: %w", err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create buffer.db: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, ddl); err != nil {
		return fmt.Errorf("create buffer.db tables: %w", err)
	}
	for _, kv := range meta {
		if _, err := tx.ExecContext(ctx, `INSERT INTO meta(k, v) VALUES (?, ?)`, kv[0], kv[1]); err != nil {
			return fmt.Errorf("write buffer.db meta: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create buffer.db: %w", err)
	}
	var mode string
	if err := conn.QueryRowContext(ctx, `PRAGMA journal_mode=WAL`).Scan(&mode); err != nil || mode != "wal" {
		return fmt.Errorf("create buffer.db: switch it to WAL: got %q, %v", mode, err)
	}
	if err := conn.Close(); err != nil {
		return fmt.Errorf("create buffer.db: %w", err)
	}
	return db.Close()
}

// writeStmts are the append path's statements, prepared once on wconn, so
// a commit parses no SQL.
type writeStmts struct {
	begin, commit, rollback, insGroup, upsMark, insHist *sql.Stmt
}

func (s *writeStmts) close() {
	for _, st := range []*sql.Stmt{s.begin, s.commit, s.rollback, s.insGroup, s.upsMark, s.insHist} {
		if st != nil {
			st.Close()
		}
	}
	*s = writeStmts{}
}

func (l *Log) prepare(ctx context.Context) error {
	var err error
	prep := func(q string) *sql.Stmt {
		if err != nil {
			return nil
		}
		var st *sql.Stmt
		st, err = l.wconn.PrepareContext(ctx, q)
		return st
	}
	l.stmts.begin = prep(`BEGIN IMMEDIATE`)
	l.stmts.commit = prep(`COMMIT`)
	l.stmts.rollback = prep(`ROLLBACK`)
	l.stmts.insGroup = prep(`INSERT INTO groups(first, n, ts, rows) VALUES (?, ?, ?, ?)`)
	l.stmts.upsMark = prep(`INSERT INTO marks(publisher, last_seq, last_offset) VALUES (?, ?, ?)
		ON CONFLICT(publisher) DO UPDATE SET last_seq = excluded.last_seq, last_offset = excluded.last_offset`)
	l.stmts.insHist = prep(`INSERT OR REPLACE INTO mark_history(publisher, last_offset, last_seq) VALUES (?, ?, ?)`)
	if err != nil {
		l.stmts.close()
		return fmt.Errorf("prepare buffer.db statements: %w", err)
	}
	return nil
}

// Mark is an exactly-once publisher's progress: the last sequence number
// committed and the offset it was committed at.
type Mark struct {
	Publisher  string
	LastSeq    int64
	LastOffset int64
}

// Append commits rows as one group in one SQLite transaction (I1) and
// returns the first row's offset; the rest follow densely. The commit is
// fsynced before Append returns, so nothing the caller then delivers can be
// lost (I3). Marks are upserted in the same
// transaction, so a mark never runs ahead of or behind its rows.
//
// rows must be canonical bytes that the log's schema has already accepted:
// Append does not validate them again, since the publish path has just done
// so and the hot path runs nothing it can avoid. A failed Append commits
// nothing and consumes no offset. Only the Writer may append.
func (l *Log) Append(ctx context.Context, rows [][]byte, ts int64, marks []Mark) (first int64, err error) {
	if l.mode != Writer {
		return 0, fmt.Errorf("append to log %s (open as %s): %w", l.dir, l.mode, ErrNotWriter)
	}
	if len(rows) == 0 {
		return 0, fmt.Errorf("append to log %s: no rows given; a commit group holds at least one row", l.dir)
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.closed.Load() {
		return 0, fmt.Errorf("append to log %s: %w", l.dir, ErrClosed)
	}
	if l.fenced != 0 {
		return 0, &FencedError{Dir: l.dir, End: l.fenced}
	}
	if err := l.writerLocked(ctx); err != nil {
		return 0, fmt.Errorf("append to log %s: %w", l.dir, err)
	}
	first = l.next
	n := int64(len(rows))
	l.packed = Append(l.packed[:0], rows)
	if err := l.appendTx(ctx, first, n, ts, marks); err != nil {
		// The transaction rolled back, but make sure the cached next offset
		// still agrees with what is on disk before anything else commits.
		if rerr := l.reloadNext(); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return 0, fmt.Errorf("append %d rows to log %s at offset %d: %w", n, l.dir, first, err)
	}
	l.next = first + n
	return first, nil
}

func (l *Log) appendTx(ctx context.Context, first, n, ts int64, marks []Mark) (err error) {
	// Only BEGIN takes ctx: it is the statement that may wait, for another
	// process's write transaction. The driver watches a cancellable context
	// with a goroutine per statement; the statements inside the
	// transaction are short, so they run without one and ctx is checked
	// again before COMMIT.
	if _, err := l.stmts.begin.ExecContext(ctx); err != nil {
		return err
	}
	bg := context.Background()
	defer func() {
		if err != nil {
			_, _ = l.stmts.rollback.ExecContext(bg)
		}
	}()
	// No next_offset write: the group is the end (endSQL).
	if _, err := l.stmts.insGroup.ExecContext(bg, first, n, ts, l.packed); err != nil {
		return err
	}
	for _, m := range marks {
		if _, err := l.stmts.upsMark.ExecContext(bg, m.Publisher, m.LastSeq, m.LastOffset); err != nil {
			return fmt.Errorf("store mark of publisher %q: %w", m.Publisher, err)
		}
		// The history lets a publish pass write the marks as of the rows
		// it published (MarksAsOf), which a table-only restore brings back.
		if _, err := l.stmts.insHist.ExecContext(bg, m.Publisher, m.LastOffset, m.LastSeq); err != nil {
			return fmt.Errorf("store mark history of publisher %q: %w", m.Publisher, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// COMMIT runs uncancellable: interrupting it would leave the outcome
	// for the caller to guess.
	_, err = l.stmts.commit.ExecContext(bg)
	return err
}

// reloadNext re-reads the end from buffer.db (after a failed commit).
func (l *Log) reloadNext() error {
	if l.wconn == nil {
		// The write connection could not be opened again (WithIdleClose),
		// so nothing was written and the cached end still holds.
		return nil
	}
	var next int64
	err := l.wconn.QueryRowContext(context.Background(), `SELECT `+endSQL).Scan(&next)
	if err != nil {
		return fmt.Errorf("re-read next offset: %w", err)
	}
	l.next = next
	return nil
}

// Marks returns every exactly-once mark stored in the log, by publisher.
func (l *Log) Marks(ctx context.Context) ([]Mark, error) {
	if err := l.checkOpen(); err != nil {
		return nil, err
	}
	rows, err := l.rdb.QueryContext(ctx, `SELECT publisher, last_seq, last_offset FROM marks ORDER BY publisher`)
	if err != nil {
		return nil, fmt.Errorf("read marks of log %s: %w", l.dir, err)
	}
	defer rows.Close()
	var out []Mark
	for rows.Next() {
		var m Mark
		if err := rows.Scan(&m.Publisher, &m.LastSeq, &m.LastOffset); err != nil {
			return nil, fmt.Errorf("read marks of log %s: %w", l.dir, err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read marks of log %s: %w", l.dir, err)
	}
	return out, nil
}

// writeTx runs fn inside a BEGIN IMMEDIATE transaction on the write
// connection, committing when fn returns nil.
func (l *Log) writeTx(ctx context.Context, fn func(c *sql.Conn) error) (err error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	return l.writeTxLocked(ctx, fn)
}

// writeTxLocked is writeTx for a caller that holds wmu.
func (l *Log) writeTxLocked(ctx context.Context, fn func(c *sql.Conn) error) (err error) {
	if l.closed.Load() {
		return fmt.Errorf("log %s: %w", l.dir, ErrClosed)
	}
	if err := l.writerLocked(ctx); err != nil {
		return err
	}
	c := l.wconn
	if _, err := c.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_, _ = c.ExecContext(context.Background(), "ROLLBACK")
		}
	}()
	if err := fn(c); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err = c.ExecContext(context.Background(), "COMMIT")
	return err
}
