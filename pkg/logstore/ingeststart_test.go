package logstore

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestAdvanceNextRefusesAStaleStartOrAMaintainer: the transaction that
// records an ingested file moves the next offset only from where it is,
// only on the Writer handle, and a refusal leaves the offset and the
// transaction's writes untouched.
func TestAdvanceNextRefusesAStaleStartOrAMaintainer(t *testing.T) {
	l := createLog(t, schemaAny(), Config{})
	ctx := context.Background()
	next, err := l.IngestStart(ctx)
	if err != nil || next != 1 {
		t.Fatalf("IngestStart = %d, %v; want 1", next, err)
	}
	ran := false
	record := func(tx *recordTx) error {
		ran = true
		_, err := tx.ExecContext(ctx, `INSERT INTO meta(k, v) VALUES ('probe', '1')`)
		return err
	}
	if err := l.AdvanceNext(ctx, next+5, next+10, record); !errors.Is(err, ErrCorrupt) || ran {
		t.Fatalf("AdvanceNext from a stale start: %v (fn ran: %v); want ErrCorrupt before fn", err, ran)
	}
	m := openLog(t, l.Dir(), Maintainer)
	if err := m.AdvanceNext(ctx, next, next+10, record); !errors.Is(err, ErrNotWriter) || ran {
		t.Fatalf("AdvanceNext on a Maintainer handle: %v (fn ran: %v); want ErrNotWriter", err, ran)
	}
	// The next offset is still 1: an append takes it.
	if first, err := l.Append(ctx, [][]byte{[]byte(`{"n":1}`)}, time.Now().UnixMicro(), nil); err != nil || first != next {
		t.Fatalf("append after refusals: %d, %v; want %d", first, err, next)
	}
	// From where it is, it moves: buffered rows are in no file now.
	if err := l.AdvanceNext(ctx, next+1, next+10, record); err != nil || !ran {
		t.Fatalf("AdvanceNext: %v (fn ran: %v)", err, ran)
	}
	if first, err := l.Append(ctx, [][]byte{[]byte(`{"n":2}`)}, time.Now().UnixMicro(), nil); err != nil || first != next+10 {
		t.Fatalf("append after AdvanceNext: %d, %v; want %d", first, err, next+10)
	}
	if _, err := l.IngestStart(ctx); !errors.Is(err, ErrUnsealed) {
		t.Fatalf("IngestStart over buffered rows: %v; want ErrUnsealed", err)
	}
}
