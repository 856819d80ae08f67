package logstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/streamcast/streamcast/pkg/schema"
)

// Extent returns the offsets the log can serve, [earliest, end): end is the
// next offset Append will assign, earliest the lowest offset still held by
// any tier (the published table, a local file or the buffer; end when the
// log holds nothing), raised to the floor (SetFloor). Below earliest is
// evicted from every tier, or below the retention floor.
func (l *Log) Extent(ctx context.Context) (earliest, end int64, err error) {
	if err := l.checkOpen(); err != nil {
		return 0, 0, err
	}
	var floor int64
	err = l.readTx(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT `+endSQL+`, coalesce((SELECT v FROM meta WHERE k = 'floor'), 0)`).Scan(&end, &floor); err != nil {
			return err
		}
		earliest, err = earliestOffset(ctx, tx, l.tiers, end)
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("read extent of log %s: %w", l.dir, err)
	}
	return min(max(earliest, floor), end), end, nil
}

// Scan calls fn for every row in [from, to) that f matches (nil matches
// all), in offset order, with its offset, streamcast_ts and canonical bytes:
// the very bytes Append was given, whether the row now sits in the buffer
// or in a sealed file (I4). row is valid only during the call. A range
// outside Extent returns a *RangeError; an error from fn stops the scan and
// is returned as is.
func (l *Log) Scan(ctx context.Context, from, to int64, f *schema.Filter, fn func(offset, ts int64, row []byte) error) error {
	return l.ScanCounting(ctx, from, to, f, nil, fn)
}

// ScanCounting is Scan, adding to rows (when not nil) the number of rows
// it hands fn from each tier, for serve's replay metrics. The counts are
// plain adds on the scanning goroutine; the caller publishes them.
func (l *Log) ScanCounting(ctx context.Context, from, to int64, f *schema.Filter, rows *TierRows, fn func(offset, ts int64, row []byte) error) error {
	if rows == nil {
		rows = new(TierRows)
	}
	all := f == nil || f.All()
	var buf []byte
	isAny := l.sch.IsAny()
	onFile := func(fr fileRec, d *fileData, lo, hi int64) error {
		n := &rows[TierLocal]
		if fr.published {
			n = &rows[TierPublished]
		}
		for off := lo; off < hi; off++ {
			i := d.row(off)
			if isAny {
				b := stringBytes(d.decl[0].(*array.String), i)
				if !all && !f.MatchCanonical(b) {
					continue
				}
				*n++
				if err := fn(off, d.ts[i], b); err != nil {
					return err
				}
				continue
			}
			if !all && !f.MatchArrow(d.decl, i) {
				continue
			}
			buf = l.sch.AppendJSON(buf[:0], d.decl, i)
			*n++
			if err := fn(off, d.ts[i], buf); err != nil {
				return err
			}
		}
		return nil
	}
	onGroup := func(g *bufGroup, lo, hi int64) error {
		u := NewReader(g.rows)
		for off := g.first; off < hi; off++ {
			row, ok, err := u.Next()
			if err != nil || !ok {
				return fmt.Errorf("buffer group at offset %d ends before offset %d: %w", g.first, off, ErrCorrupt)
			}
			if off < lo || (!all && !f.MatchCanonical(row)) {
				continue
			}
			rows[TierBuffer]++
			if err := fn(off, g.ts, row); err != nil {
				return err
			}
		}
		return nil
	}
	return l.walk(ctx, from, to, f, onFile, onGroup)
}

// stringBytes returns value i of a string array without copying.
func stringBytes(a *array.String, i int) []byte {
	offs := a.ValueOffsets()
	return a.ValueBytes()[offs[i]-offs[0] : offs[i+1]-offs[0]]
}

// walk visits [from, to) in offset order across the tiers: local files
// where they hold an offset, published files below them, buffered groups
// above. Each tier is bounded by what its neighbour has recorded: the file
// lists come from buffer.db, never from listing a directory or a table.
//
// The buffer is read in short chunks, each its own read transaction, so a
// slow consumer never pins a snapshot. When a chunk finds its rows evicted
// (a seal completed and an evict ran since the file lists were read), or a
// file is gone (compaction replaced it, clean deleted it after publishing),
// walk reloads the file records and reads those offsets from where they are
// now: no row is doubled or dropped by maintenance running concurrently, in
// this process or another.
func (l *Log) walk(ctx context.Context, from, to int64, f *schema.Filter,
	onFile func(fileRec, *fileData, int64, int64) error,
	onGroup func(*bufGroup, int64, int64) error) error {
	earliest, end, err := l.Extent(ctx)
	if err != nil {
		return err
	}
	if from > to || from < earliest || to > end {
		if from == to && from >= earliest && from <= end {
			return nil
		}
		return &RangeError{From: from, To: to, Earliest: earliest, End: end}
	}
	tiers, err := l.tierFiles(ctx, from, to)
	if err != nil {
		return err
	}
	// Holes are recorded only offline (restore), before any reader opens
	// the log, so one read serves the whole walk.
	hs, err := readHoles(ctx, l.rdb)
	if err != nil {
		return fmt.Errorf("read the holes of log %s: %w", l.dir, err)
	}
	var chunk bufChunk
	next := from
	reloaded := false
	var gone fileRec // the file found missing before the last reload
	for next < to {
		if err := ctx.Err(); err != nil {
			return err
		}
		if h, ok := holeAt(hs, next); ok {
			// No tier holds a row here, ever: skip to the hole's end. The
			// rows after it carry their own offsets.
			next, reloaded = min(h.End, to), false
			continue
		}
		if fr, ok := tiers.find(next); ok {
			hi := min(fr.end, to)
			if fr.mayMatch(f) {
				err := l.eachGroup(ctx, fr, next, hi, func(d *fileData, lo, hi int64) error {
					return onFile(fr, d, lo, hi)
				})
				if errors.Is(err, ErrFileGone) {
					if reloaded && gone == fr {
						// Still recorded, still missing: not a move but a loss.
						return l.corrupt(fr, "the file is missing")
					}
					if tiers, err = l.tierFiles(ctx, next, to); err != nil {
						return err
					}
					reloaded, gone = true, fr
					continue
				}
				if err != nil {
					return err
				}
			}
			next, reloaded = hi, false
			continue
		}
		reached, err := l.readChunk(ctx, &chunk, next, to)
		if err != nil {
			return err
		}
		for i := range chunk.groups {
			g := &chunk.groups[i]
			if err := onGroup(g, max(next, g.first), min(g.first+g.n, to)); err != nil {
				return err
			}
		}
		if reached > next {
			next, reloaded = reached, false
			continue
		}
		// Offset next is no longer buffered: a file completed since holds it.
		if reloaded {
			return fmt.Errorf("log %s: offset %d is in neither a file nor the buffer: %w", l.dir, next, ErrCorrupt)
		}
		if tiers, err = l.tierFiles(ctx, next, to); err != nil {
			return err
		}
		reloaded, gone = true, fileRec{}
	}
	return nil
}

// tierSet is the recorded files of the local and published tiers over a
// range, each in offset order.
type tierSet struct {
	local, published []fileRec
}

// find returns the file holding off, preferring a local one: it is read
// without the network.
func (t tierSet) find(off int64) (fileRec, bool) {
	if fr, ok := findFile(t.local, off); ok {
		return fr, true
	}
	return findFile(t.published, off)
}

// tierFiles reads the records of local and published files overlapping
// [from, to) in one read transaction, so a file moving between the tiers
// is seen in exactly one of them or both, never in neither.
func (l *Log) tierFiles(ctx context.Context, from, to int64) (tierSet, error) {
	var t tierSet
	tx, err := l.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return t, fmt.Errorf("read file records of log %s: %w", l.dir, err)
	}
	defer tx.Rollback()
	if t.local, err = queryFiles(ctx, tx, `SELECT start_offset, end_offset, name, row_count, stats, '' FROM files
		WHERE end_offset > ? AND start_offset < ? ORDER BY start_offset`, false, from, to); err != nil {
		return t, fmt.Errorf("read file records of log %s: %w", l.dir, err)
	}
	if l.tiers {
		if t.published, err = queryFiles(ctx, tx, `SELECT start_offset, end_offset, name, row_count, stats, path FROM published
			WHERE end_offset > ? AND start_offset < ? ORDER BY start_offset`, true, from, to); err != nil {
			return t, fmt.Errorf("read published file records of log %s: %w", l.dir, err)
		}
	}
	return t, nil
}

// queryFiles runs a query yielding start, end, name, rows, stats, path.
func queryFiles(ctx context.Context, q querier, query string, published bool, args ...any) ([]fileRec, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []fileRec
	for rows.Next() {
		fr := fileRec{published: published}
		if err := rows.Scan(&fr.start, &fr.end, &fr.name, &fr.rows, &fr.stats, &fr.path); err != nil {
			return nil, err
		}
		out = append(out, fr)
	}
	return out, rows.Err()
}

// filesIn returns the records of local files overlapping [from, to), in
// offset order.
func (l *Log) filesIn(ctx context.Context, from, to int64) ([]fileRec, error) {
	files, err := queryFiles(ctx, l.rdb, `SELECT start_offset, end_offset, name, row_count, stats, '' FROM files
		WHERE end_offset > ? AND start_offset < ? ORDER BY start_offset`, false, from, to)
	if err != nil {
		return nil, fmt.Errorf("read file records of log %s: %w", l.dir, err)
	}
	return files, nil
}

func findFile(files []fileRec, off int64) (fileRec, bool) {
	for _, fr := range files {
		if fr.start <= off && off < fr.end {
			return fr, true
		}
	}
	return fileRec{}, false
}

// bufChunk holds one read of consecutive buffered groups; its byte slices
// are reused from read to read.
type bufChunk struct {
	groups []bufGroup
	data   []byte
}

// readChunk reads consecutive groups starting with the one holding offset
// next and ending before to, and returns the offset after the last group
// read. It returns next itself when that offset is no longer buffered.
func (l *Log) readChunk(ctx context.Context, c *bufChunk, next, to int64) (int64, error) {
	c.groups = c.groups[:0]
	c.data = c.data[:0]
	rows, err := l.rdb.QueryContext(ctx, `SELECT first, n, ts, rows FROM groups
		WHERE first >= (SELECT coalesce(max(first), ?1) FROM groups WHERE first <= ?1) AND first < ?2
		ORDER BY first LIMIT ?3`, next, to, l.opts.chunkGroups)
	if err != nil {
		return 0, fmt.Errorf("read buffer of log %s: %w", l.dir, err)
	}
	defer rows.Close()
	reached := next
	type span struct{ lo, hi int }
	var spans []span
	for rows.Next() {
		var g bufGroup
		var raw sql.RawBytes
		if err := rows.Scan(&g.first, &g.n, &g.ts, &raw); err != nil {
			return 0, fmt.Errorf("read buffer of log %s: %w", l.dir, err)
		}
		if len(c.groups) == 0 {
			if g.first > next || g.first+g.n <= next {
				break // next was evicted (or never buffered)
			}
		} else if g.first != reached {
			break // not contiguous: stop, the caller resumes from reached
		}
		lo := len(c.data)
		c.data = append(c.data, raw...)
		spans = append(spans, span{lo, len(c.data)})
		c.groups = append(c.groups, g)
		reached = g.first + g.n
		if len(c.data) >= l.opts.chunkBytes {
			break
		}
	}
	if err := rows.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return 0, fmt.Errorf("read buffer of log %s: %w", l.dir, err)
	}
	for i := range c.groups {
		c.groups[i].rows = c.data[spans[i].lo:spans[i].hi]
	}
	return reached, nil
}

// Tier is the tier a scan read a row from.
type Tier int

// The tiers, newest first.
const (
	TierBuffer    Tier = iota // buffer.db
	TierLocal                 // a Parquet file under the log's files/
	TierPublished             // a data file of the published table
	NumTiers                  // how many tiers there are
)

// String names the tier as metrics label it: buffer, local or published.
func (t Tier) String() string {
	switch t {
	case TierBuffer:
		return "buffer"
	case TierLocal:
		return "local"
	case TierPublished:
		return "published"
	}
	return "tier" + fmt.Sprint(int(t))
}

// TierRows counts rows by the tier they were read from.
type TierRows [NumTiers]int64
