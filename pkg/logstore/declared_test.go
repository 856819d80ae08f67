package logstore

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/streamcast/streamcast/pkg/schema"
)

// tradeSchema is the six-column trade row of the hot-path benchmarks.
const tradeSchema = `{"type":"object","properties":{
	"event_ts":{"type":"integer"},
	"symbol":{"type":"string"},
	"price":{"type":"number"},
	"amount":{"type":"number"},
	"side":{"type":"integer","format":"int32"},
	"trade_id":{"type":"string"}},
	"required":["event_ts","symbol","price","amount","side","trade_id"]}`

var symbols = []string{"BTC-USD", "ETH-USD", "SOL-USD", "XRP-USD"}

// tradeRow is the i-th trade of a plausible feed, as a publisher sends it.
func tradeRow(i int) []byte {
	b := []byte(`{"event_ts":`)
	b = strconv.AppendInt(b, 1735689600000000+int64(i)*1375, 10)
	b = append(b, `,"symbol":"`...)
	b = append(b, symbols[(i/7)%len(symbols)]...)
	b = append(b, `","price":`...)
	b = strconv.AppendFloat(b, 85565.12+float64(i%997)*0.01, 'f', -1, 64)
	b = append(b, `,"amount":`...)
	b = strconv.AppendFloat(b, 0.00012*float64(1+i%50), 'f', -1, 64)
	b = append(b, `,"side":`...)
	b = strconv.AppendInt(b, int64(i%2), 10)
	b = append(b, `,"trade_id":"`...)
	b = strconv.AppendInt(b, 700000000+int64(i), 10)
	return append(b, `"}`...)
}

// richSchema has a column of every kind the schema layer stores.
const richSchema = `{"type":"object","properties":{
	"i64":{"type":"integer"},
	"i32":{"type":["integer","null"],"format":"int32"},
	"f64":{"type":"number"},
	"f32":{"type":["number","null"],"format":"float"},
	"ok":{"type":"boolean"},
	"s":{"type":["string","null"]},
	"hex":{"type":"string","contentEncoding":"base16"},
	"b64":{"type":["string","null"],"contentEncoding":"base64"},
	"fix":{"type":"string","contentEncoding":"base16","format":"bytes4"},
	"st":{"type":["object","null"],"properties":{"a":{"type":"integer"},"b":{"type":["string","null"]}},"required":["a"]},
	"m":{"type":"object","additionalProperties":{"type":"number"}},
	"l":{"type":["array","null"],"items":{"type":"string"}}},
	"required":["i64","f64","ok","hex","fix","m"]}`

func richRow(i int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"i64":%d,"f64":%g,"ok":%t,"hex":"%02x%02x","fix":"%08x","m":{"k%d":%d.5}`, int64(i)*-7919, float64(i)/3, i%2 == 0, i%256, (i*7)%256, i*2654435761%(1<<32), i%3, i)
	if i%3 != 0 {
		fmt.Fprintf(&b, `,"i32":%d,"f32":%d.25,"s":"ü\"%d\\","b64":"aGVsbG8=","st":{"a":%d,"b":null},"l":["x","%d"]`, i-100, i, i, i, i)
	}
	b.WriteString("}")
	return b.Bytes()
}

func mustCompile(tb testing.TB, doc string) *schema.Schema {
	tb.Helper()
	s, err := schema.Compile([]byte(doc))
	if err != nil {
		tb.Fatalf("compile schema: %v", err)
	}
	return s
}

// canonical validates raw rows as the publish path does.
func canonical(tb testing.TB, sch *schema.Schema, raw [][]byte) [][]byte {
	tb.Helper()
	out := make([][]byte, len(raw))
	for i, r := range raw {
		c, err := sch.AppendCanonical(nil, r)
		if err != nil {
			tb.Fatalf("row %s: %v", r, err)
		}
		out[i] = c
	}
	return out
}

// TestRowsReadFromFilesAreByteIdentical seals rows of every column kind,
// with and without sort_by, and checks that scans across files and buffer
// return the exact appended bytes in offset order (I4).
func TestRowsReadFromFilesAreByteIdentical(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		doc    string
		row    func(int) []byte
		sortBy []string
	}{
		{"trade", tradeSchema, tradeRow, nil},
		{"trade sorted by symbol then price", tradeSchema, tradeRow, []string{"symbol", "price"}},
		{"every kind", richSchema, richRow, nil},
		{"every kind sorted by a nullable string", richSchema, richRow, []string{"s", "ok"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sch := mustCompile(t, tc.doc)
			l := createLog(t, sch, Config{SortBy: tc.sortBy, TargetSealBytes: 16 << 10})
			exp := expectation{}
			k := 0
			for g := range 60 {
				raw := make([][]byte, 1+g%13)
				for i := range raw {
					raw[i] = tc.row(k)
					k++
				}
				rows := canonical(t, sch, raw)
				first, err := l.Append(ctx, rows, int64(1000+g), nil)
				if err != nil {
					t.Fatal(err)
				}
				exp.add(first, int64(1000+g), rows)
			}
			n, err := l.Seal(ctx, false)
			if err != nil || n == 0 {
				t.Fatalf("Seal = %d, %v", n, err)
			}
			if _, err := l.Evict(ctx); err != nil {
				t.Fatal(err)
			}
			_, end, _ := l.Extent(ctx)
			var fileEnd int64
			l.rdb.QueryRow(`SELECT max(end_offset) FROM files`).Scan(&fileEnd)
			if fileEnd <= 1 || fileEnd >= end {
				t.Fatalf("files end at %d of %d: the scans would not cross tiers", fileEnd, end)
			}
			for _, r := range [][2]int64{{1, end}, {2, fileEnd + 3}, {fileEnd - 1, end - 1}, {fileEnd, fileEnd + 1}, {3, 4}} {
				if err := exp.check(scanAll(t, l, r[0], r[1]), r[0], r[1]); err != nil {
					t.Fatal(err)
				}
			}
			// With sort_by the files really are out of offset order.
			files, _ := l.filesIn(ctx, 1, end)
			reordered := false
			for _, fr := range files {
				err := l.eachGroup(ctx, fr, fr.start, fr.end, func(d *fileData, lo, hi int64) error {
					reordered = reordered || d.perm != nil
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			if reordered != (len(tc.sortBy) > 0) {
				t.Fatalf("files reordered = %v with sort_by %v", reordered, tc.sortBy)
			}
			// ScanArrow: offset order, and the same rows.
			next := int64(2)
			err = l.ScanArrow(ctx, 2, end, func(rec arrow.Record) error {
				offs := rec.Column(0).(*array.Int64)
				cols := rec.Columns()[2:]
				for i := range int(rec.NumRows()) {
					if offs.Value(i) != next {
						return fmt.Errorf("ScanArrow yielded offset %d where %d was expected", offs.Value(i), next)
					}
					if got := sch.AppendJSON(nil, cols, i); string(got) != exp[next].row {
						return fmt.Errorf("ScanArrow offset %d: %s, want %s", next, got, exp[next].row)
					}
					next++
				}
				return nil
			})
			if err != nil || next != end {
				t.Fatalf("ScanArrow: %v (reached %d of %d)", err, next, end)
			}
		})
	}
}

func TestFilteredScansSkipFilesAndMatchRows(t *testing.T) {
	ctx := context.Background()
	sch := mustCompile(t, tradeSchema)
	l := createLog(t, sch, Config{SortBy: []string{"symbol"}, TargetSealBytes: 4 << 10})
	// Symbols change every 7 rows, so files of a few dozen rows hold
	// several; a file made only of early trade ids is prunable by trade_id.
	exp := expectation{}
	for g := range 100 {
		raw := make([][]byte, 5)
		for i := range raw {
			raw[i] = tradeRow(g*5 + i)
		}
		rows := canonical(t, sch, raw)
		first, err := l.Append(ctx, rows, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		exp.add(first, 1, rows)
	}
	if _, err := l.Seal(ctx, false); err != nil {
		t.Fatal(err)
	}
	f, err := sch.CompileFilter([]byte(`{"symbol":["ETH-USD","SOL-USD"],"trade_id":"700000450"}`))
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	err = l.Scan(ctx, 1, 501, f, func(off, ts int64, row []byte) error {
		got = append(got, off)
		if row := exp[off].row; row != string(row) {
			return fmt.Errorf("offset %d: %s", off, row)
		}
		return nil
	})
	// trade 450 is offset 451, symbol index (450/7)%4 = 0 → BTC: no match.
	if err != nil || len(got) != 0 {
		t.Fatalf("filtered scan = %v, %v; want no rows", got, err)
	}
	f, _ = sch.CompileFilter([]byte(`{"trade_id":["700000014","700000460"]}`))
	got = nil
	err = l.Scan(ctx, 1, 501, f, func(off, ts int64, row []byte) error {
		if string(row) != exp[off].row {
			return fmt.Errorf("offset %d: %s, want %s", off, row, exp[off].row)
		}
		got = append(got, off)
		return nil
	})
	if err != nil || len(got) != 2 || got[0] != 15 || got[1] != 461 {
		t.Fatalf("filtered scan = %v, %v; want offsets 15 and 461", got, err)
	}
	// Pruning: the files hold trade ids in ascending ranges, so only the
	// files spanning the two ids are read.
	files, _ := l.filesIn(ctx, 1, 501)
	read := 0
	for _, fr := range files {
		if fr.mayMatch(f) {
			read++
		}
	}
	if read == 0 || read > 2 || len(files) < 4 {
		t.Fatalf("%d of %d files may match; want at most the 2 holding the ids", read, len(files))
	}
}

func TestSchemaAndSortByAreStoredAndReadBack(t *testing.T) {
	sch := mustCompile(t, richSchema)
	l := createLog(t, sch, Config{SortBy: []string{"s", "i64"}})
	l.Close()
	r := openLog(t, l.Dir(), ReadOnly)
	if got, want := string(r.Schema().JSON()), string(sch.JSON()); got != want {
		t.Fatalf("reopened schema %s, want %s", got, want)
	}
	if got := r.Config().SortBy; len(got) != 2 || got[0] != "s" || got[1] != "i64" {
		t.Fatalf("reopened sort_by %v", got)
	}
	for _, bad := range [][]string{{"nope"}, {"st"}, {"m"}, {"s", "s"}} {
		if _, err := Create(t.TempDir()+"/l", sch, named(Config{SortBy: bad})); err == nil {
			t.Errorf("Create with sort_by %v succeeded", bad)
		}
	}
}
