package history

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/schema"
)

// Scan returns the rows in offset order, projected to req.Columns.
//
// The records are produced by a goroutine the returned reader owns: its
// Release stops it and waits for it, so a caller that stops reading early
// must Release (as every RecordReader's user must).
func (r *Reader) Scan(ctx context.Context, req ScanRequest) (array.RecordReader, error) {
	bs, err := compileBounds(req.Bounds)
	if err != nil {
		return nil, err
	}
	from, to, err := r.span(req.From, req.To)
	if err != nil {
		return nil, err
	}
	cols := req.Columns
	if cols == nil {
		for _, f := range r.schema.Fields() {
			cols = append(cols, f.Name)
		}
	}
	fields := make([]arrow.Field, 0, len(cols))
	for _, c := range cols {
		i := r.schema.FieldIndices(c)
		if len(i) == 0 {
			return nil, fmt.Errorf("stream %q has no column %q; its columns are %v", r.md.Stream, c, fieldNames(r.schema))
		}
		fields = append(fields, r.schema.Field(i[0]))
	}
	out := arrow.NewSchema(fields, nil)
	return startScan(ctx, out, func(ctx context.Context, send func(arrow.RecordBatch) bool) error {
		return r.produce(ctx, out, bs, from, to, send)
	}), nil
}

// startScan runs produce on a goroutine the returned reader owns, handing
// the records it sends to the reader's Next: decoding runs alongside
// whatever the caller does with each record. send takes over the record
// and reports false once the reader was released (produce then returns).
func startScan(ctx context.Context, sc *arrow.Schema, produce func(ctx context.Context, send func(arrow.RecordBatch) bool) error) *scanReader {
	ctx, cancel := context.WithCancel(ctx)
	sr := &scanReader{schema: sc, ch: make(chan arrow.RecordBatch, 2), cancel: cancel, done: make(chan struct{})}
	sr.refs.Store(1)
	go func() {
		defer close(sr.done)
		defer close(sr.ch)
		sr.err = produce(ctx, func(rec arrow.RecordBatch) bool {
			select {
			case sr.ch <- rec:
				return true
			case <-ctx.Done():
				rec.Release()
				return false
			}
		})
	}()
	return sr
}

func fieldNames(sc *arrow.Schema) []string {
	var names []string
	for _, f := range sc.Fields() {
		names = append(names, f.Name)
	}
	return names
}

// produce reads every part the bounds do not rule out and sends records of
// schema out: each part's columns by name, a column it lacks as nulls.
func (r *Reader) produce(ctx context.Context, out *arrow.Schema, bs []bound, from, to int64, send func(arrow.RecordBatch) bool) error {
	for _, p := range r.parts {
		if p.end <= from || p.start >= to {
			continue
		}
		if skipPart(p, bs) {
			if p.start < p.end {
				r.count(func(s *ScanStats) { s.LogsSkipped++ })
			}
			continue
		}
		// The columns this part has, plus the offset (to cut by) and, under
		// AsOfTS, the stamp.
		names := []string{logstore.OffsetColumn}
		if r.asOfTS != maxInt64 {
			names = append(names, logstore.TSColumn)
		}
		for _, f := range out.Fields() {
			if len(p.fileSc.FieldIndices(f.Name)) == 1 && f.Name != logstore.OffsetColumn && !(f.Name == logstore.TSColumn && r.asOfTS != maxInt64) {
				names = append(names, f.Name)
			}
		}
		err := r.eachRecord(ctx, p, names, from, to, bs, true, func(rec arrow.RecordBatch) error {
			o, err := reshape(out, rec)
			if err != nil {
				return err
			}
			if !send(o) {
				return errStopped
			}
			return nil
		})
		if errors.Is(err, errStopped) || (err != nil && ctx.Err() != nil) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// errStopped ends a producer whose reader was released.
var errStopped = errors.New("scan released")

// reshape builds a record of schema out from rec's columns by name, a
// column rec lacks as nulls.
func reshape(out *arrow.Schema, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	n := rec.NumRows()
	cols := make([]arrow.Array, out.NumFields())
	var made []arrow.Array
	defer func() {
		for _, a := range made {
			a.Release()
		}
	}()
	for i, f := range out.Fields() {
		if j := rec.Schema().FieldIndices(f.Name); len(j) == 1 {
			cols[i] = rec.Column(j[0])
			continue
		}
		a := array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, int(n))
		made = append(made, a)
		cols[i] = a
	}
	return array.NewRecordBatch(out, cols, n), nil
}

// scanReader is the RecordReader Scan returns.
type scanReader struct {
	refs   atomic.Int64
	schema *arrow.Schema
	ch     chan arrow.RecordBatch
	cancel context.CancelFunc
	done   chan struct{}
	err    error // set by the producer before done closes
	cur    arrow.RecordBatch
}

func (s *scanReader) Retain()               { s.refs.Add(1) }
func (s *scanReader) Schema() *arrow.Schema { return s.schema }

// Release stops the producer and waits for it once the last reference
// goes.
func (s *scanReader) Release() {
	if s.refs.Add(-1) != 0 {
		return
	}
	if s.cur != nil {
		s.cur.Release()
		s.cur = nil
	}
	s.cancel()
	for rec := range s.ch {
		rec.Release()
	}
	<-s.done
}

// Next moves to the next record; false at the end or on an error (Err).
func (s *scanReader) Next() bool {
	if s.cur != nil {
		s.cur.Release()
		s.cur = nil
	}
	rec, ok := <-s.ch
	if !ok {
		<-s.done // so Err sees the producer's error
		return false
	}
	s.cur = rec
	return true
}

func (s *scanReader) RecordBatch() arrow.RecordBatch { return s.cur }

// Record is RecordBatch.
//
// Deprecated: use RecordBatch.
func (s *scanReader) Record() arrow.RecordBatch { return s.cur }

// Err is the error that ended the scan, once Next returned false.
func (s *scanReader) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Rows calls fn for every row of the cut in [from, to) that where matches
// (nil or empty matches all), in offset order, with its offset, stamp and
// canonical JSON: the row as its log's schema encodes it, byte-identical to
// what the server sent for it (I4). where is the server's filter (a JSON
// object of column to value), applied with the server's filter code; a log
// that lacks a column where names holds no matching row (the column reads
// null there). row is valid only during fn.
//
// from and to are as ScanRequest's From and To: zero means the cut's
// start or end, a from below the stream's first held offset is refused
// (WhyBelowFloor), and so is a to past the cut's end (WhyUnpublished).
func (r *Reader) Rows(ctx context.Context, from, to int64, where json.RawMessage, fn func(offset, ts int64, row []byte) error) error {
	from, to, err := r.span(from, to)
	if err != nil {
		return err
	}
	var buf []byte
	for _, p := range r.parts {
		if p.end <= from || p.start >= to {
			continue
		}
		f, skip, err := partFilter(p, where)
		if err != nil {
			return err
		}
		if skip {
			continue
		}
		all := f == nil || f.All()
		isAny := p.sch.IsAny()
		names := make([]string, 0, p.fileSc.NumFields())
		for _, fl := range p.fileSc.Fields() {
			names = append(names, fl.Name)
		}
		// Parquet is decoded on the scan's goroutine while this one
		// encodes. Broker rows are passed on below as the server sent them.
		sr := startScan(ctx, project(p.fileSc, names), func(ctx context.Context, send func(arrow.RecordBatch) bool) error {
			err := r.eachRecord(ctx, p, names, from, to, nil, false, func(rec arrow.RecordBatch) error {
				rec.Retain()
				if !send(rec) {
					return errStopped
				}
				return nil
			})
			if errors.Is(err, errStopped) {
				return nil
			}
			return err
		})
		err = eachScanned(sr, func(rec arrow.RecordBatch) error {
			offs := rec.Column(0).(*array.Int64).Int64Values()
			ts := rec.Column(1).(*array.Int64).Int64Values()
			decl := rec.Columns()[2:]
			for i := range offs {
				if isAny {
					b := decl[0].(*array.String).Value(i)
					if !all && !f.MatchCanonical([]byte(b)) {
						continue
					}
					if err := fn(offs[i], ts[i], []byte(b)); err != nil {
						return err
					}
					continue
				}
				if !all && !f.MatchArrow(decl, i) {
					continue
				}
				buf = p.sch.AppendJSON(buf[:0], decl, i)
				if err := fn(offs[i], ts[i], buf); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, t := range p.tail {
			if t.offset < from || t.offset >= to || t.offset < p.start || t.offset >= p.end {
				continue
			}
			if !all && !f.MatchCanonical(t.row) {
				continue
			}
			if err := fn(t.offset, t.ts, t.row); err != nil {
				return err
			}
		}
	}
	return nil
}

// partFilter compiles where against a part's schema, as the server
// compiles it against the log it serves. A column the log lacks reads null
// there: a term on it matches every row when it lists null and none when
// it does not (skip), so it is dropped or ends the part. A null for a
// column the log never holds null in matches nothing there (skip).
func partFilter(p *part, where json.RawMessage) (f *schema.Filter, skip bool, err error) {
	if len(bytes.TrimSpace(where)) == 0 {
		return nil, false, nil
	}
	if !p.sch.IsAny() {
		var terms map[string]json.RawMessage
		if err := json.Unmarshal(where, &terms); err != nil {
			return nil, false, fmt.Errorf("where %s is not a JSON object of column to value: %w", where, err)
		}
		kept := map[string]json.RawMessage{}
		changed := false
		for col, v := range terms {
			i := p.fileSc.FieldIndices(col)
			switch {
			case len(i) == 0:
				if !listsNull(v) {
					return nil, true, nil
				}
				changed = true
			case !p.fileSc.Field(i[0]).Nullable && listsNull(v):
				// Never null in this log: the null alternative matches
				// nothing here, the others still may.
				rest, ok := withoutNull(v)
				if !ok {
					return nil, true, nil
				}
				kept[col], changed = rest, true
			default:
				kept[col] = v
			}
		}
		if changed {
			if where, err = json.Marshal(kept); err != nil {
				return nil, false, err
			}
		}
	}
	f, err = p.sch.CompileFilter(where)
	if err != nil {
		return nil, false, fmt.Errorf("log %s: %w", p.lg.Name, err)
	}
	return f, false, nil
}

// listsNull reports whether a where value is null or a list holding null.
func listsNull(v json.RawMessage) bool {
	if string(bytes.TrimSpace(v)) == "null" {
		return true
	}
	var l []json.RawMessage
	if json.Unmarshal(v, &l) != nil {
		return false
	}
	for _, x := range l {
		if string(bytes.TrimSpace(x)) == "null" {
			return true
		}
	}
	return false
}

// withoutNull is a where value with its null alternatives left out; false
// when none is left.
func withoutNull(v json.RawMessage) (json.RawMessage, bool) {
	var l []json.RawMessage
	if json.Unmarshal(v, &l) != nil {
		return nil, false
	}
	var rest []json.RawMessage
	for _, x := range l {
		if string(bytes.TrimSpace(x)) != "null" {
			rest = append(rest, x)
		}
	}
	if len(rest) == 0 {
		return nil, false
	}
	b, err := json.Marshal(rest)
	return b, err == nil
}

// span resolves a requested [from, to) against the cut: zero is the cut's
// start or end; what the cut cannot hold is refused with both numbers.
func (r *Reader) span(from, to int64) (int64, int64, error) {
	if from == 0 {
		from = r.start
	}
	if to == 0 {
		to = r.end
	}
	switch {
	case from < r.start:
		return 0, 0, &Refusal{Why: WhyBelowFloor, Msg: fmt.Sprintf("stream %q: offset %d is below %d, the first offset the stream still holds (its retention floor or first row): rows %d to %d were deleted; start at %d, or leave the start out to read from there",
			r.md.Stream, from, r.start, from, r.start-1, r.start)}
	case to > r.end:
		return 0, 0, &Refusal{Why: WhyUnpublished, Msg: fmt.Sprintf("stream %q: offsets up to %d were asked for, but this read holds offsets below %d (the published end, or the fixed point); end at %d, or read past the published end with --as-of-offset and --broker",
			r.md.Stream, to-1, r.end, r.end)}
	case to < from:
		return 0, 0, fmt.Errorf("the end offset %d is below the start offset %d; give an end above the start", to, from)
	}
	return from, to, nil
}

// eachScanned calls fn with each record of sr, then releases it; the
// first error (fn's or the scan's) is returned.
func eachScanned(sr *scanReader, fn func(rec arrow.RecordBatch) error) error {
	defer sr.Release()
	for sr.Next() {
		if err := fn(sr.RecordBatch()); err != nil {
			return err
		}
	}
	return sr.Err()
}
