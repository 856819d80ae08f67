package broker

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta"
)

// The checks of a history_guard that need the stream's metadata and log;
// config.Validate makes the others ("exactly-once", "unbounded replay")
// before serve opens anything.
const (
	checkIdentity    = "identity"
	checkNoMigration = "no migration"
	checkNoRetention = "no retention"
	checkStart       = "starts at offset 1"
	checkDense       = "dense history"
	checkKnownRow    = "known row"
)

// guardError is serve's refusal of a protected stream whose history
// fails one of its history_guard's checks: no traffic is admitted to it.
type guardError struct {
	stream string
	check  string // one of the check* names
	detail string // what was found, with the numbers
}

func (e *guardError) Error() string {
	return fmt.Sprintf("stream %q is protected by its history_guard and fails the check %q: %s. "+
		"Its consumers rebuild their state by reading it from offset 1, so serve admits no traffic to it. "+
		"Point root and published at the history the consumers read, or, once the consumers have rebuilt from the history that is here, "+
		"update or remove history_guard in the stream's declaration",
		e.stream, e.check, e.detail)
}

func (s *stream) guardFail(check, format string, args ...any) error {
	return &guardError{stream: s.name, check: check, detail: fmt.Sprintf(format, args...)}
}

// refuseNewProtected refuses to create a protected stream that exists
// nowhere: its consumers hold a history, and a stream made afresh would
// reissue offset 1 with other rows under another identity (I8). It runs
// before anything is created.
func (s *stream) refuseNewProtected(store *meta.Store) error {
	g := s.cfg.HistoryGuard
	if g == nil {
		return nil
	}
	return s.guardFail(checkIdentity, "history_guard.stream_id is %s, but neither the stream's home %s nor its published metadata %s holds anything of the stream; serve would start it afresh under a new stream_id",
		g.StreamID, s.srv.cfg.Root, store.PublishedURI())
}

// checkGuard runs the history_guard's checks against the stream's
// metadata md and its open current log lg, whose extent is [earliest,
// end). Each costs nothing but reads of records, except the last, which
// scans one row. The first that fails is the refusal.
func (s *stream) checkGuard(ctx context.Context, md *meta.Metadata, lg *logstore.Log, earliest, end int64) error {
	g := s.cfg.HistoryGuard
	if g == nil {
		return nil
	}
	if !strings.EqualFold(md.StreamID, g.StreamID) {
		return s.guardFail(checkIdentity, "the stream here has stream_id %s, but history_guard.stream_id is %s: this is another stream of the same name", md.StreamID, g.StreamID)
	}
	if len(md.Logs) != 1 {
		cur := md.Current()
		return s.guardFail(checkNoMigration, "the stream has %d logs: it was migrated, and its current log %s starts at offset %d, so offsets below it are no longer served",
			len(md.Logs), cur.Name, cur.StartOffset)
	}
	if md.Intent != nil && md.Intent.Kind == "migrate" {
		return s.guardFail(checkNoMigration, "a migration of the stream is under way (its metadata version %d records the intent)", md.Version)
	}
	if r := md.Retention; r.MaxAge != nil || r.Floor != nil || len(r.PendingDeletions) > 0 {
		return s.guardFail(checkNoRetention, "the stream has retention (%s), which deletes its oldest rows", describeRetention(r))
	}
	start := lg.Config().Start
	if start == 0 { // a log made before logs stored their start begins at 1
		start = 1
	}
	if first := md.Current().StartOffset; first != 1 || start != 1 {
		return s.guardFail(checkStart, "the live log %s starts at offset %d (the metadata says %d)", lg.Dir(), start, first)
	}
	if earliest != 1 {
		return s.guardFail(checkDense, "the log's earliest offset is %d, not 1: offsets [1, %d) are gone", earliest, earliest)
	}
	n, err := lg.CountRows(ctx, 1, end)
	if err != nil {
		return fmt.Errorf("stream %q: check its history_guard: %w", s.name, err)
	}
	if n != end-1 {
		return s.guardFail(checkDense, "the log holds %d rows in offsets [1, %d), not %d: %d offsets are missing", n, end, end-1, end-1-n)
	}
	if g.KnownOffset >= end {
		return s.guardFail(checkKnownRow, "history_guard.known_offset is %d, but the log ends at offset %d (its next offset is %d)", g.KnownOffset, end-1, end)
	}
	var got []byte
	err = lg.Scan(ctx, g.KnownOffset, g.KnownOffset+1, nil, func(_, _ int64, row []byte) error {
		got = bytes.Clone(row)
		return nil
	})
	if err != nil {
		return fmt.Errorf("stream %q: check its history_guard: read the row at offset %d: %w", s.name, g.KnownOffset, err)
	}
	if !bytes.Equal(got, []byte(g.KnownRow)) {
		return s.guardFail(checkKnownRow, "offset %d holds %s, but history_guard.known_row is %s", g.KnownOffset, clip(string(got), 300), clip(string(g.KnownRow), 300))
	}
	return nil
}

// describeRetention words what of a retention is set.
func describeRetention(r meta.Retention) string {
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
