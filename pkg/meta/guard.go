package meta

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/streamcast/streamcast/pkg/logstore"
)

// The checks of a history guard that need the stream's metadata and log;
// the config's own validation makes the others ("exactly-once", "unbounded
// replay") before serve opens anything.
const (
	CheckIdentity    = "identity"
	CheckNoMigration = "no migration"
	CheckNoRetention = "no retention"
	CheckStart       = "starts at offset 1"
	CheckDense       = "dense history"
	CheckKnownRow    = "known row"
)

// Guard is a stream's history guard (its declaration's history_guard): its
// consumers rebuild their state by reading it from offset 1, so serve must
// refuse to serve it over any other history than the one they read.
type Guard struct {
	Stream      string // the stream's name, for messages
	StreamID    string // the identity the consumers read
	KnownOffset int64  // the offset of a row the consumers hold
	KnownRow    string // that row, byte for byte as a data frame carries it
}

// GuardError is the refusal of a protected stream whose history fails one
// of its guard's checks: no traffic may be admitted to it.
type GuardError struct {
	Stream string
	Check  string // one of the Check* names
	Detail string // what was found, with the numbers
}

func (e *GuardError) Error() string {
	return fmt.Sprintf("stream %q is protected by its history_guard and fails the check %q: %s. "+
		"Its consumers rebuild their state by reading it from offset 1, so serve admits no traffic to it. "+
		"Point root and published at the history the consumers read, or, once the consumers have rebuilt from the history that is here, "+
		"update or remove history_guard in the stream's declaration",
		e.Stream, e.Check, e.Detail)
}

func (g *Guard) fail(check, format string, args ...any) error {
	return &GuardError{Stream: g.Stream, Check: check, Detail: fmt.Sprintf(format, args...)}
}

// RefuseNew refuses to create a protected stream that exists nowhere (home
// and published name where it was looked for): its consumers hold a
// history, and a stream made afresh would reissue offset 1 with other rows
// under another identity (I8). The caller asks it before creating anything.
func (g *Guard) RefuseNew(home, published string) error {
	return g.fail(CheckIdentity, "history_guard.stream_id is %s, but neither the stream's home %s nor its published metadata %s holds anything of the stream; serve would start it afresh under a new stream_id",
		g.StreamID, home, published)
}

// Check runs the guard's checks against the stream's metadata md and its
// open current log lg, whose extent is [earliest, end). Each costs nothing
// but reads of records, except the last, which scans one row. The first
// that fails is the refusal, a *GuardError; it reads lg and never writes.
func (g *Guard) Check(ctx context.Context, md *Metadata, lg *logstore.Log, earliest, end int64) error {
	if !strings.EqualFold(md.StreamID, g.StreamID) {
		return g.fail(CheckIdentity, "the stream here has stream_id %s, but history_guard.stream_id is %s: this is another stream of the same name", md.StreamID, g.StreamID)
	}
	if len(md.Logs) != 1 {
		cur := md.Current()
		return g.fail(CheckNoMigration, "the stream has %d logs: it was migrated, and its current log %s starts at offset %d, so offsets below it are no longer served",
			len(md.Logs), cur.Name, cur.StartOffset)
	}
	if md.Intent != nil && md.Intent.Kind == "migrate" {
		return g.fail(CheckNoMigration, "a migration of the stream is under way (its metadata version %d records the intent)", md.Version)
	}
	if r := md.Retention; r.MaxAge != nil || r.Floor != nil || len(r.PendingDeletions) > 0 {
		return g.fail(CheckNoRetention, "the stream has retention (%s), which deletes its oldest rows", describeRetention(r))
	}
	start := lg.Config().Start
	if start == 0 { // a log made before logs stored their start begins at 1
		start = 1
	}
	if first := md.Current().StartOffset; first != 1 || start != 1 {
		return g.fail(CheckStart, "the live log %s starts at offset %d (the metadata says %d)", lg.Dir(), start, first)
	}
	if earliest != 1 {
		return g.fail(CheckDense, "the log's earliest offset is %d, not 1: offsets [1, %d) are gone", earliest, earliest)
	}
	n, err := lg.CountRows(ctx, 1, end)
	if err != nil {
		return fmt.Errorf("stream %q: check its history_guard: %w", g.Stream, err)
	}
	if n != end-1 {
		return g.fail(CheckDense, "the log holds %d rows in offsets [1, %d), not %d: %d offsets are missing", n, end, end-1, end-1-n)
	}
	if g.KnownOffset >= end {
		return g.fail(CheckKnownRow, "history_guard.known_offset is %d, but the log ends at offset %d (its next offset is %d)", g.KnownOffset, end-1, end)
	}
	var got []byte
	err = lg.Scan(ctx, g.KnownOffset, g.KnownOffset+1, nil, func(_, _ int64, row []byte) error {
		got = bytes.Clone(row)
		return nil
	})
	if err != nil {
		return fmt.Errorf("stream %q: check its history_guard: read the row at offset %d: %w", g.Stream, g.KnownOffset, err)
	}
	if !bytes.Equal(got, []byte(g.KnownRow)) {
		return g.fail(CheckKnownRow, "offset %d holds %s, but history_guard.known_row is %s", g.KnownOffset, clip(string(got), 300), clip(g.KnownRow, 300))
	}
	return nil
}

// describeRetention words what of a retention is set.
func describeRetention(r Retention) string {
	var parts []string
	if r.MaxAge != nil {
		parts = append(parts, "max_age "+*r.MaxAge)
	}
	if r.Floor != nil {
		parts = append(parts, fmt.Sprintf("floor %d", *r.Floor))
	}
	if n := len(r.PendingDeletions); n > 0 {
		parts = append(parts, fmt.Sprintf("%d pending deletion(s)", n))
	}
	return strings.Join(parts, ", ")
}
