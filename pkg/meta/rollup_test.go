package meta

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/schema"
)

// rolledUpLog is a log named "nulls" of a stream with nullable columns,
// [1,31) sealed into two files and published: s is null in every third
// row (10 nulls), never in every row (30). It returns the closed log's
// directory and its metadata.
func rolledUpLog(t *testing.T) (string, *Metadata) {
	t.Helper()
	ctx := context.Background()
	sch, err := schema.Compile([]byte(`{"type":"object","properties":{
		"n":{"type":"integer"},"s":{"type":["string","null"]},"never":{"type":["integer","null"]}},"required":["n"]}`))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "nulls", "nulls")
	lg, err := logstore.Create(dir, sch, logstore.Config{Stream: "nulls", Log: "nulls"})
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	for g := range 2 {
		var rows [][]byte
		for i := g * 15; i < (g+1)*15; i++ {
			raw := `{"n":` + strconv.Itoa(i) + `}`
			if i%3 != 0 {
				raw = `{"n":` + strconv.Itoa(i) + `,"s":"v` + strconv.Itoa(i) + `"}`
			}
			row, err := sch.AppendCanonical(nil, []byte(raw))
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, row)
		}
		if _, err := lg.Append(ctx, rows, 1000, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := lg.Seal(ctx, true); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := lg.Publish(ctx, true); err != nil {
		t.Fatal(err)
	}
	m, err := New("nulls")
	if err != nil {
		t.Fatal(err)
	}
	d, err := DescribeLog(lg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.AddLog(d, sch); err != nil {
		t.Fatal(err)
	}
	return dir, m
}

func rollUp(t *testing.T, dir string, m *Metadata) map[string]ColumnStats {
	t.Helper()
	lg, err := logstore.Open(dir, logstore.ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	if err := m.RollUp(context.Background(), "nulls", lg); err != nil {
		t.Fatal(err)
	}
	return m.Logs[0].Stats
}

func count(c ColumnStats) string {
	if c.NullCount == nil {
		return "unknown"
	}
	return strconv.FormatInt(*c.NullCount, 10)
}

func TestRollUpFillsEachColumnsNullCountFromTheFileRecords(t *testing.T) {
	dir, m := rolledUpLog(t)
	stats := rollUp(t, dir, m)
	for col, want := range map[string]string{"n": "0", "s": "10", "never": "30"} {
		if got := count(stats[col]); got != want {
			t.Errorf("column %s: null count %s; want %s", col, got, want)
		}
	}
	if c := stats["never"]; c.Min != nil || c.Max != nil {
		t.Errorf("the all-null column has bounds [%s, %s]; want none", c.Min, c.Max)
	}
	b, err := json.Marshal(m.Logs[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"s":{"min":"v1","max":"v8","null_count":10}`) {
		t.Errorf("the log's entry %s; want s with its bounds and 10 nulls", b)
	}
}

func TestRollUpLeavesTheNullCountUnknownForFilesRecordedBeforeCounts(t *testing.T) {
	dir, m := rolledUpLog(t)
	// The first file's record as an older buffer.db holds it.
	db, err := sql.Open("sqlite", filepath.Join(dir, logstore.BufferFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, tbl := range []string{"files", "published"} {
		if _, err := db.Exec(`UPDATE ` + tbl + ` SET stats = '{"n":[0,14],"s":["v1","v8"]}' WHERE start_offset = 1`); err != nil {
			db.Close()
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	stats := rollUp(t, dir, m)
	for _, col := range []string{"n", "s"} {
		if got := count(stats[col]); got != "unknown" {
			t.Errorf("column %s: null count %s; want unknown, never a guess", col, got)
		}
	}
	if c := stats["n"]; string(c.Min) != "0" || string(c.Max) != "29" {
		t.Errorf("n bounds [%s, %s]; want [0, 29] as before", c.Min, c.Max)
	}
	if _, ok := stats["never"]; ok {
		t.Errorf("never: %+v; with neither bounds nor a count it is left out", stats["never"])
	}
}
