package logstore

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/streamcast/streamcast/pkg/schema"
)

// TestAppendAtKeepsTheGivenOffsetsAndStamps: a mirrored log holds each row
// at the offset and with the stamp its upstream gave, byte for byte, and
// reopening it finds the same end.
func TestAppendAtKeepsTheGivenOffsetsAndStamps(t *testing.T) {
	l := createLog(t, schema.Any(), Config{})
	ctx := context.Background()
	rows := [][]byte{[]byte(`{"a":1}`), []byte(`{"a":2}`), []byte(`{"a":3}`), []byte(`{"a":4}`)}
	ts := []int64{100, 100, 250, 300}
	if err := l.AppendAt(ctx, 1, rows[:3], ts[:3]); err != nil {
		t.Fatal(err)
	}
	if err := l.AppendAt(ctx, 4, rows[3:], ts[3:]); err != nil {
		t.Fatal(err)
	}
	var got int
	err := l.Scan(ctx, 1, 5, nil, func(off, stamp int64, row []byte) error {
		i := int(off - 1)
		if off != int64(got+1) || stamp != ts[i] || !bytes.Equal(row, rows[i]) {
			t.Errorf("row %d: got offset %d ts %d %s; want offset %d ts %d %s", got, off, stamp, row, got+1, ts[i], rows[i])
		}
		got++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got != len(rows) {
		t.Fatalf("scanned %d rows, want %d", got, len(rows))
	}
	// An Append after mirrored rows continues at their end.
	first, err := l.Append(ctx, rows[:1], 400, nil)
	if err != nil || first != 5 {
		t.Fatalf("Append after AppendAt: first %d, err %v; want 5", first, err)
	}
}

// TestAppendAtRefusesAGapOrAnOverlap is I1 for a mirrored log: rows that do
// not start at the log's next offset commit nothing.
func TestAppendAtRefusesAGapOrAnOverlap(t *testing.T) {
	l := createLog(t, schema.Any(), Config{})
	ctx := context.Background()
	row := [][]byte{[]byte(`{"a":1}`)}
	if err := l.AppendAt(ctx, 1, row, []int64{1}); err != nil {
		t.Fatal(err)
	}
	for _, first := range []int64{1, 3, 0} {
		err := l.AppendAt(ctx, first, row, []int64{2})
		if !errors.Is(err, ErrNotContiguous) {
			t.Errorf("AppendAt at %d after one row: err %v, want ErrNotContiguous", first, err)
		}
	}
	if err := l.AppendAt(ctx, 2, row, nil); err == nil {
		t.Error("AppendAt with no stamps: no error")
	}
	if err := l.AppendAt(ctx, 2, row, []int64{2}); err != nil {
		t.Fatalf("AppendAt at the next offset after refusals: %v", err)
	}
}
