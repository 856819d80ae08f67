package logstore

import (
	"fmt"

	"github.com/apache/arrow-go/v18/parquet/metadata"

	"github.com/streamcast/streamcast/pkg/logstore/parquetfile"
)

// CheckFooter checks a data file's footer against its record, the range
// buffer.db or the published table's manifest says the file holds:
// offsets [start, end), in rows rows (0 when the record keeps no count).
// The file's row groups, in order, must each hold a contiguous run of
// offsets, as many as it has rows, and together tile [start, end). It
// returns each row group's range.
//
// Every reader of a data file (replay, compaction, sql, snapshot, catch-up)
// runs this one check before it trusts a row of the file: another valid
// file of the same log, copied over this one, passes every other check and
// would answer with rows from the wrong offsets (I6). The error names the
// numbers, not the file: the caller knows which file it opened.
func CheckFooter(md *metadata.FileMetaData, start, end, rows int64) ([]Span, error) {
	col := md.Schema.ColumnIndexByName(OffsetColumn)
	if col < 0 {
		return nil, fmt.Errorf("it has no %s column", OffsetColumn)
	}
	groups := make([]Span, 0, md.NumRowGroups())
	next, n := start, int64(0)
	for i := range md.NumRowGroups() {
		rg := md.RowGroup(i)
		lo, hi, err := parquetfile.MinMaxInt64(rg, col)
		if err != nil {
			return nil, fmt.Errorf("row group %d: %w", i, err)
		}
		if lo != next || hi-lo+1 != rg.NumRows() {
			return nil, fmt.Errorf("row group %d holds offsets [%d,%d] in %d rows where [%d,…) was expected", i, lo, hi, rg.NumRows(), next)
		}
		groups = append(groups, Span{Start: lo, End: hi + 1})
		next = hi + 1
		n += rg.NumRows()
	}
	if next != end || n != end-start || (rows != 0 && rows != n) {
		return nil, fmt.Errorf("it holds offsets [%d,%d) in %d rows where [%d,%d) was recorded", start, next, n, start, end)
	}
	return groups, nil
}

// CheckRowOffsets checks the streamcast_offset values of the rows read
// from a row group whose footer says it holds g: each offset of g once,
// nothing else. It returns nil when the rows are in offset order, else
// perm, with perm[off-g.Start] the row holding off (a sort_by log's rows).
// Footer statistics are the writer's word; this is the rows' own.
func CheckRowOffsets(vals []int64, g Span) (perm []int32, err error) {
	n := g.End - g.Start
	if int64(len(vals)) != n {
		return nil, fmt.Errorf("it holds %d rows where its footer says %d for offsets [%d,%d)", len(vals), n, g.Start, g.End)
	}
	inOrder := true
	for k, v := range vals {
		if v != g.Start+int64(k) {
			inOrder = false
			break
		}
	}
	if inOrder {
		return nil, nil
	}
	perm = make([]int32, n)
	seen := make([]bool, n)
	for k, v := range vals {
		j := v - g.Start
		if j < 0 || j >= n || seen[j] {
			return nil, fmt.Errorf("offset %d is outside its row group's range [%d,%d) or appears twice", v, g.Start, g.End)
		}
		seen[j] = true
		perm[j] = int32(k)
	}
	return perm, nil
}
