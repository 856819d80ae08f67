package history

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/schema"
)

// part is one log of the stream as the Reader pinned it: its schema, its
// published table's data files at the pinned snapshot, and (for the
// current log, when a fixed point asked for it) the rows read from the
// broker past the published end.
type part struct {
	lg     meta.Log
	sch    *schema.Schema
	fileSc *arrow.Schema // streamcast_offset, streamcast_ts, then the declared columns (or streamcast_row)
	sorted bool          // the files are sorted by sort_by, not by offset
	tbl    *warehouse.Table
	ice    *iceberg.Schema // the pinned snapshot's schema; nil without a table
	files  []pfile         // by offset

	// [start, end) is what this part contributes to the cut: the log's
	// rows at or above the floor, up to its published end (or the fixed
	// point's end); tail holds the broker's rows past the published end.
	start, end int64
	pubEnd     int64 // one past the last offset the table holds
	tail       []tailRow
}

// pfile is one data file of a pinned snapshot, with the statistics its
// manifest entry records.
type pfile struct {
	path         string
	lo, hi       int64 // streamcast_offset bounds, inclusive
	tsLo, tsHi   int64 // streamcast_ts bounds, inclusive
	rows         int64
	lower, upper map[int][]byte // by field id
}

// locationPrefix returns the prefix a warehouse.Table is placed under
// from a table location <prefix>/<stream>/<log> (an s3:// URL, a file://
// URL or a directory).
func locationPrefix(loc, stream, log string) (warehouse.Location, error) {
	table, err := warehouse.Parse(loc, "")
	if err != nil {
		return warehouse.Location{}, fmt.Errorf("log %s: its location %q does not parse; the stream metadata is damaged: %w", log, loc, err)
	}
	prefix, ok := table.Parent(stream, log)
	if !ok {
		return warehouse.Location{}, fmt.Errorf("log %s: its location %q does not end in /%s/%s; the stream metadata is damaged", log, loc, stream, log)
	}
	return prefix, nil
}

// pin places the log's table, loads its current snapshot and lists its
// data files with their statistics. A log with no table yet has no files.
func pin(ctx context.Context, m *meta.Metadata, lg meta.Log, s3 warehouse.S3) (*part, error) {
	p := &part{lg: lg, sorted: len(lg.SortBy) > 0, pubEnd: lg.StartOffset}
	var err error
	if len(lg.Schema) == 0 || string(lg.Schema) == "null" {
		p.sch = schema.Any()
	} else if p.sch, err = schema.Compile(lg.Schema); err != nil {
		return nil, fmt.Errorf("log %s: its schema in the stream metadata does not compile: %w", lg.Name, err)
	}
	fields := []arrow.Field{
		{Name: logstore.OffsetColumn, Type: arrow.PrimitiveTypes.Int64},
		{Name: logstore.TSColumn, Type: arrow.PrimitiveTypes.Int64},
	}
	if p.sch.IsAny() {
		fields = append(fields, arrow.Field{Name: logstore.RowColumn, Type: arrow.BinaryTypes.String})
	} else {
		fields = append(fields, p.sch.Arrow().Fields()...)
	}
	p.fileSc = arrow.NewSchema(fields, nil)

	if lg.Location == "" {
		return p, nil
	}
	loc, err := locationPrefix(lg.Location, m.Stream, lg.Name)
	if err != nil {
		return nil, err
	}
	p.tbl, err = warehouse.NewTable(loc, m.Stream, lg.Name, s3)
	if err != nil {
		return nil, fmt.Errorf("log %s: %w", lg.Name, err)
	}
	tbl, err := p.tbl.Load(ctx)
	if errors.Is(err, warehouse.ErrNoTable) {
		return p, nil
	}
	if err != nil {
		return nil, fmt.Errorf("log %s: load its published table %s: %w", lg.Name, lg.Location, err)
	}
	if err := p.list(ctx, tbl); err != nil {
		return nil, fmt.Errorf("log %s: read the published table %s: %w", lg.Name, lg.Location, err)
	}
	return p, nil
}

// list reads the data files of tbl's current snapshot: that snapshot is
// the pin, since the files it lists are never rewritten and are deleted
// only after a grace that outlasts a read.
func (p *part) list(ctx context.Context, tbl *table.Table) error {
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return nil
	}
	// A log's table never changes schema (a migration starts a new log),
	// so the current schema is the snapshot's.
	p.ice = tbl.Schema()
	offF, ok1 := p.ice.FindFieldByName(logstore.OffsetColumn)
	tsF, ok2 := p.ice.FindFieldByName(logstore.TSColumn)
	if !ok1 || !ok2 {
		return fmt.Errorf("the table lacks %s or %s; it was not written by streamcast", logstore.OffsetColumn, logstore.TSColumn)
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return err
	}
	mans, err := snap.Manifests(fsys)
	if err != nil {
		return fmt.Errorf("read the manifest list of snapshot %d: %w", snap.SnapshotID, err)
	}
	for _, mf := range mans {
		entries, err := mf.FetchEntries(fsys, true)
		if err != nil {
			return fmt.Errorf("read manifest %s: %w", mf.FilePath(), err)
		}
		for _, e := range entries {
			df := e.DataFile()
			if df.ContentType() != iceberg.EntryContentData {
				return fmt.Errorf("it has delete file %s, which streamcast never writes; read it with an Iceberg engine", df.FilePath())
			}
			f := pfile{path: df.FilePath(), rows: df.Count(), lower: df.LowerBoundValues(), upper: df.UpperBoundValues()}
			var okLo, okHi bool
			f.lo, okLo = boundInt64(f.lower[offF.ID])
			f.hi, okHi = boundInt64(f.upper[offF.ID])
			if !okLo || !okHi {
				return fmt.Errorf("data file %s has no %s bounds in its manifest", f.path, logstore.OffsetColumn)
			}
			f.tsLo, okLo = boundInt64(f.lower[tsF.ID])
			f.tsHi, okHi = boundInt64(f.upper[tsF.ID])
			if !okLo || !okHi {
				f.tsLo, f.tsHi = math.MinInt64, math.MaxInt64
			}
			p.files = append(p.files, f)
		}
	}
	slices.SortFunc(p.files, func(a, b pfile) int { return cmp.Compare(a.lo, b.lo) })
	if n := len(p.files); n > 0 {
		p.pubEnd = p.files[n-1].hi + 1
	}
	if v, ok := tbl.Properties()[warehouse.PropPublishedThrough]; ok {
		through, err := strconv.ParseInt(v, 10, 64)
		if err == nil && through+1 != p.pubEnd && len(p.files) > 0 {
			return fmt.Errorf("its property %s says it holds offsets through %d, but its files end at %d", warehouse.PropPublishedThrough, through, p.pubEnd-1)
		}
	}
	return nil
}

// boundInt64 decodes an Iceberg single-value bound of a long.
func boundInt64(b []byte) (int64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	return int64(binary.LittleEndian.Uint64(b)), true
}

// check verifies that the part's files hold every row of [from, to) once:
// they tile it with no gap, and each holds as many rows as offsets. It is
// the refusal of a table that holds fewer rows than the log (a retired or
// sealed log whose table lost rows, or a range no tier holds).
func (p *part) check(from, to int64) error {
	next := from
	for _, f := range p.files {
		if f.hi < from || f.lo >= to {
			continue
		}
		if f.lo > next {
			return p.short(from, to, next, f.lo)
		}
		if f.rows != f.hi-f.lo+1 {
			return &Refusal{Why: WhyShortTable, Msg: fmt.Sprintf("log %s: published file %s covers offsets %d to %d but holds %d rows where %d were written; its table is damaged, so rows %d to %d cannot be read exactly; restore the file from a backup",
				p.lg.Name, f.path, f.lo, f.hi, f.rows, f.hi-f.lo+1, f.lo, f.hi)}
		}
		next = max(next, f.hi+1)
	}
	if next < to {
		return p.short(from, to, next, to)
	}
	return nil
}

// short is the refusal of rows [gapLo, gapHi) missing from the table.
func (p *part) short(from, to, gapLo, gapHi int64) error {
	held := int64(0)
	for _, f := range p.files {
		lo, hi := max(f.lo, from), min(f.hi+1, to)
		if hi > lo {
			held += hi - lo
		}
	}
	what := "log " + p.lg.Name
	why := WhyNoTier
	if p.lg.State == meta.Retired || p.lg.State == meta.Sealed {
		what = string(p.lg.State) + " log " + p.lg.Name
		why = WhyShortTable
	}
	return &Refusal{Why: why, Msg: fmt.Sprintf("%s: its published table holds %d of the %d rows in offsets [%d,%d); rows %d to %d are in no published file, so the history cannot be read exactly (docs/design.md I6); restore the missing files from a backup, or read from offset %d on",
		what, held, to-from, from, to, gapLo, gapHi-1, gapHi)}
}
