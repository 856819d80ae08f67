package logstore

import (
	"context"
	"fmt"
	"time"
)

// readConns bounds a handle's read connections: scans, extents and a
// seal's input run side by side.
const readConns = 4

// WithIdleClose makes the handle close its SQLite connections once they
// have gone unused for d, and open them again on the next use: the
// readers' each on its own (database/sql's idle time), the write
// connection and its prepared statements once no write has gone through
// it for d. An idle log then holds one descriptor, its lock file (I7 is
// the lock's, not the connection's), where it held six: a server with
// thousands of quiet streams would otherwise run out of descriptors.
// The first write after an idle spell pays for a connection and three
// prepared statements. 0 (the default) keeps the connections for the
// handle's life.
//
// A handle opened WithReplicatedWAL keeps its write connection: the
// last connection to close checkpoints the WAL and deletes it, under the
// replicator's feet (docs/design.md §4.9).
func WithIdleClose(d time.Duration) Option {
	return func(o *options) { o.idleClose = max(d, 0) }
}

// writerLocked returns the write connection, opening it again (with its
// statements) when it was closed for being idle, and counts the use.
// The caller holds wmu.
func (l *Log) writerLocked(ctx context.Context) error {
	if l.wdb == nil {
		return fmt.Errorf("log %s: %w", l.dir, ErrReadOnly)
	}
	if l.wconn == nil {
		c, err := l.wdb.Conn(ctx)
		if err != nil {
			return fmt.Errorf("log %s: open the write connection again: %w", l.dir, err)
		}
		l.wconn = c
		if err := l.prepare(ctx); err != nil {
			_ = c.Close()
			l.wconn = nil
			return fmt.Errorf("log %s: %w", l.dir, err)
		}
	}
	if l.idleClosing() {
		l.lastWrite = time.Now()
		if l.idleTimer == nil {
			l.idleTimer = time.AfterFunc(l.opts.idleClose, l.closeIdle)
		}
	}
	return nil
}

// idleClosing reports whether the handle closes idle connections.
func (l *Log) idleClosing() bool {
	return l.opts.idleClose > 0 && l.opts.checkpointPages == 0 && l.wdb != nil
}

// closeIdle is the idle timer's: it closes the write connection when no
// write went through it for the idle time, or waits out the rest. It
// runs on the timer's goroutine and ends at once; Close stops the timer,
// and a call that lost that race finds the handle closed.
func (l *Log) closeIdle() {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.idleTimer = nil
	if l.closed.Load() || l.wconn == nil {
		return
	}
	// The idle time is a resource bound, not a log's semantics: wall
	// time, not the handle's Clock, which a test may hold still.
	if rest := l.opts.idleClose - time.Since(l.lastWrite); rest > 0 {
		l.idleTimer = time.AfterFunc(rest, l.closeIdle)
		return
	}
	l.releaseWriterLocked()
}

// releaseWriterLocked closes the write connection and its statements;
// the next write opens them again. The caller holds wmu.
func (l *Log) releaseWriterLocked() {
	l.stmts.close()
	if l.wconn != nil {
		// wdb keeps no idle connection (open), so this closes it.
		_ = l.wconn.Close()
		l.wconn = nil
	}
	// Readers idle now (the open's own reads, say) go too; the pool
	// opens new ones on demand.
	l.rdb.SetMaxIdleConns(0)
	l.rdb.SetMaxIdleConns(readConns)
}
