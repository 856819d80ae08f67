package logstore

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
)

// countRows returns how many rows a log holds in [from, to), read through q
// (one read transaction; tiers says whether the log has a published tier),
// counted from the records of its tiers (published files, local files, the
// buffer's extent), never by reading rows: a file record is dense over its
// [start, end), so a file partly inside the range counts by arithmetic.
// Rows below the floor are not counted, nor the ranges recorded in the
// holes table. Each tier's rows are one dense run in the common
// case, which three aggregate queries find; a tier with a gap in its
// records (clean took a published local file out of the middle) is read
// record by record.
//
// The holes table lists offset ranges skipped on purpose (restore resumes
// past a fence): no file ever spans one, so the file tiers already leave
// them out, but the buffer's extent [first group, next offset) could span
// one, and the holes are subtracted from the union of the tiers.
func countRows(ctx context.Context, tx querier, tiers bool, from, to int64) (int64, error) {
	var floor, hasHoles int64
	err := tx.QueryRowContext(ctx, `SELECT coalesce((SELECT v FROM meta WHERE k = 'floor'), 0),
		(SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'holes')`).Scan(&floor, &hasHoles)
	if err != nil {
		return 0, err
	}
	from = max(from, floor)
	if from >= to {
		return 0, nil
	}
	// The tiers are asked newest first, each only for the part of the
	// range the tiers above it do not hold as one run reaching the top:
	// the buffer usually holds the top, local files the part below, the
	// published table the rest, so each record is read about once.
	var runs []Span
	hi := to
	take := func(r []Span) {
		runs = append(runs, r...)
		if len(r) == 1 && r[0].End == hi {
			hi = r[0].Start
		}
	}
	// The buffer is dense from its first group to the next offset: seal
	// reads it so, and evict only takes groups off its low end.
	var gmin, gend sql.NullInt64
	err = tx.QueryRowContext(ctx, `SELECT min(first), (SELECT first + n FROM groups ORDER BY first DESC LIMIT 1) FROM groups`).Scan(&gmin, &gend)
	if err != nil {
		return 0, fmt.Errorf("read the buffer's extent: %w", err)
	}
	if gmin.Valid && gend.Valid {
		if s := (Span{max(gmin.Int64, from), min(gend.Int64, hi)}); s.Start < s.End {
			take([]Span{s})
		}
	}
	tables := []string{"files"}
	if tiers {
		tables = append(tables, "published")
	}
	for _, tbl := range tables {
		if from >= hi {
			break
		}
		r, err := fileRuns(ctx, tx, tbl, from, hi)
		if err != nil {
			return 0, err
		}
		take(r)
	}
	runs = union(runs)
	var n int64
	for _, r := range runs {
		n += r.End - r.Start
	}
	if hasHoles > 0 && n > 0 {
		holes, err := spans(ctx, tx, fmt.Sprintf(`SELECT start_offset, end_offset FROM holes WHERE end_offset > %d AND start_offset < %d`, from, to))
		if err != nil {
			return 0, fmt.Errorf("read holes: %w", err)
		}
		for _, h := range holes {
			for _, r := range runs {
				if lo, hi := max(h.Start, r.Start), min(h.End, r.End); lo < hi {
					n -= hi - lo
				}
			}
		}
	}
	return n, nil
}

// fileRuns returns the offsets of [from, to) that the records of one file
// table (files or published) hold, as sorted disjoint runs. Records in one
// table never overlap, so when their clipped lengths add up to the span
// from the first to the last, they hold it all, and one aggregate answers.
func fileRuns(ctx context.Context, tx querier, table string, from, to int64) ([]Span, error) {
	// Only the first record can start before from and only the last end
	// after to, so the clipped sum is the plain sum less two overhangs.
	var cnt, sum int64
	var lo, hi sql.NullInt64
	err := tx.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(end_offset - start_offset), 0), min(start_offset), max(end_offset)
		FROM `+table+` WHERE end_offset > ?1 AND start_offset < ?2`, from, to).Scan(&cnt, &sum, &lo, &hi)
	if err != nil {
		return nil, fmt.Errorf("read %s records: %w", table, err)
	}
	if cnt == 0 {
		return nil, nil
	}
	sum -= max(0, from-lo.Int64) + max(0, hi.Int64-to)
	lo.Int64, hi.Int64 = max(lo.Int64, from), min(hi.Int64, to)
	if sum == hi.Int64-lo.Int64 {
		return []Span{{lo.Int64, hi.Int64}}, nil
	}
	recs, err := spans(ctx, tx, fmt.Sprintf(`SELECT max(start_offset, %d), min(end_offset, %d) FROM %s WHERE end_offset > %d AND start_offset < %d ORDER BY start_offset`, from, to, table, from, to))
	if err != nil {
		return nil, fmt.Errorf("read %s records: %w", table, err)
	}
	return recs, nil
}

// union merges runs into sorted disjoint ones.
func union(runs []Span) []Span {
	if len(runs) < 2 {
		return runs
	}
	slices.SortFunc(runs, func(a, b Span) int { return cmp.Compare(a.Start, b.Start) })
	out := runs[:1]
	for _, r := range runs[1:] {
		last := &out[len(out)-1]
		if r.Start <= last.End {
			last.End = max(last.End, r.End)
			continue
		}
		out = append(out, r)
	}
	return out
}
