package sqlview

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/streamcast/streamcast/pkg/meta/history"
)

// csvWriter writes CSV as Write's csv format prints it: a header line of
// the column names, then one line per row, each cell as textValue prints
// it (NULL empty), quoted as encoding/csv quotes. Write and CSV share it,
// so `sql --format csv` and `snapshot --format csv` print a cell alike.
type csvWriter struct {
	cw  *csv.Writer
	rec []string
}

func newCSVWriter(w io.Writer, names []string) (*csvWriter, error) {
	c := &csvWriter{cw: csv.NewWriter(w), rec: make([]string, len(names))}
	copy(c.rec, names)
	if err := c.cw.Write(c.rec); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *csvWriter) row(vals []any) error {
	for i, v := range vals {
		c.rec[i] = textValue(v, "")
	}
	return c.cw.Write(c.rec)
}

func (c *csvWriter) flush() error {
	c.cw.Flush()
	return c.cw.Error()
}

// CSV writes a stream's record batches, as a Table's Scan returns them,
// as CSV: the same header and cells as Write prints in FormatCSV for
// SELECT * FROM log over the same rows (integers, floats in their
// shortest form, booleans as 1 and 0, binary as base64, struct, list and
// map columns as their JSON), without going through SQLite.
type CSV struct {
	w    *csvWriter
	cols []column
	gets []getter
	vals []any
}

// NewCSV starts a CSV of the columns of s, writing the header line to w.
func NewCSV(w io.Writer, s *arrow.Schema) (*CSV, error) {
	cols, err := columnsOf(s)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.field.Name
	}
	cw, err := newCSVWriter(w, names)
	if err != nil {
		return nil, err
	}
	return &CSV{w: cw, cols: cols, gets: make([]getter, len(cols)), vals: make([]any, len(cols))}, nil
}

// Write writes every row of rec, whose columns are those of NewCSV's
// schema, in order.
func (c *CSV) Write(rec arrow.RecordBatch) error {
	arrs := rec.Columns()
	for j := range c.cols {
		g, err := getterFor(&c.cols[j], arrs[j])
		if err != nil {
			return err
		}
		c.gets[j] = g
	}
	for i := range int(rec.NumRows()) {
		for j, g := range c.gets {
			if arrs[j].IsNull(i) {
				c.vals[j] = nil
			} else {
				c.vals[j] = g(i)
			}
		}
		if err := c.w.row(c.vals); err != nil {
			return err
		}
	}
	return nil
}

// Flush writes what is buffered and reports the first write error.
func (c *CSV) Flush() error { return c.w.flush() }

// ExportCSV is history's Export for CSV (snapshot --format csv): the rows
// of t in [o.From, o.To), in offset order, as CSV (the cells of CSV) to
// o.Out, or to o.Path, a new file (never over an existing one), removed
// again when the export fails. A directory (o.Dir) is not offered: CSV is
// one file, and the formats that split into parts are Export's.
func ExportCSV(ctx context.Context, t Table, o history.ExportOptions) (res history.ExportResult, err error) {
	if o.Dir != "" {
		return res, errors.New("csv is written to one file or to stdout, not into a directory of parts; give -o FILE, or --format parquet for parts")
	}
	rr, err := t.Scan(ctx, history.ScanRequest{From: o.From, To: o.To})
	if err != nil {
		return res, err
	}
	defer rr.Release()
	out := o.Out
	if o.Path != "" {
		f, err := os.OpenFile(o.Path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			return res, fmt.Errorf("%s exists; an export never overwrites a file: remove it or give another name", o.Path)
		}
		if err != nil {
			return res, err
		}
		defer func() {
			err = errors.Join(err, f.Sync(), f.Close())
			if err != nil {
				_ = os.Remove(o.Path)
				res.Files = nil
			}
		}()
		res.Files = []string{o.Path}
		out = f
	}
	bw := bufio.NewWriterSize(out, 1<<20)
	c, err := NewCSV(bw, t.Schema())
	if err != nil {
		return res, err
	}
	for rr.Next() {
		rec := rr.RecordBatch()
		if err := c.Write(rec); err != nil {
			return res, fmt.Errorf("write the export: %w", err)
		}
		res.Rows += rec.NumRows()
		if o.Progress != nil {
			o.Progress(res.Rows)
		}
	}
	if err := rr.Err(); err != nil {
		return res, err
	}
	if err := c.Flush(); err != nil {
		return res, fmt.Errorf("write the export: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return res, fmt.Errorf("write the export: %w", err)
	}
	return res, nil
}
