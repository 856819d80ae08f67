package txbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/wire"
)

// fastOptions polls and retries quickly, so tests observe events soon.
func fastOptions(log *logBuffer) OutboxOptions {
	o := OutboxOptions{PollEvery: 20 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, BatchRows: 16}
	if log != nil {
		o.Logger = log.logger()
	}
	return o
}

func newOutbox(t testing.TB, db *sql.DB, d Dialect, url, id string, opts OutboxOptions) *Outbox {
	t.Helper()
	o, err := NewOutbox(db, d, url, id, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

func flush(t testing.TB, o *Outbox) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := o.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestOutboxShipsCommittedRowsInOrderOnce: rows sent in committed
// transactions of 1 and 7 rows land in commit order, once each; a rolled
// back transaction sends nothing and gives its seqs back; Landed maps each
// seq to the offset that holds its row; nothing stays pending.
func TestOutboxShipsCommittedRowsInOrderOnce(t *testing.T) {
	dialects(t, func(t *testing.T, db *sql.DB, d Dialect) {
		ctx := context.Background()
		url := startBroker(t)
		o := newOutbox(t, db, d, url, "app-1", fastOptions(nil))

		sendRows(t, db, o, 1, 20, 1)
		// A rollback gives its seqs back: the next send takes seq 21 again.
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		seq, err := o.SendMany(ctx, tx, [][]byte{[]byte(`{"n":-1}`), []byte(`{"n":-2}`)})
		if err != nil || seq != 21 {
			t.Fatalf("SendMany in the rolled-back tx = %d, %v; want seq 21", seq, err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		tx, err = db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if seq, err := o.Send(ctx, tx, []byte(`{"n":21}`)); err != nil || seq != 21 {
			t.Fatalf("Send after the rollback = %d, %v; want seq 21 again (gapless)", seq, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		sendRows(t, db, o, 22, 250, 7)
		flush(t, o)

		rows := readStream(t, url, 250)
		if len(rows) != 250 {
			t.Fatalf("the stream holds %d rows, want 250", len(rows))
		}
		for i, r := range rows {
			if r.N != int64(i+1) {
				t.Fatalf("row at offset %d is n=%d, want n=%d (commit order, once each)", r.Offset, r.N, i+1)
			}
			if off, ok := o.Landed(int64(i + 1)); !ok || off != r.Offset {
				t.Fatalf("Landed(%d) = %d, %v; want offset %d", i+1, off, ok, r.Offset)
			}
		}
		if n, err := o.Pending(ctx); err != nil || n != 0 {
			t.Fatalf("Pending after Flush = %d, %v; want 0", n, err)
		}
		if err := o.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		// A later process finds nothing pending: its Flush returns at once.
		o = newOutbox(t, db, d, url, "app-1", fastOptions(nil))
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := o.Flush(fctx); err != nil {
			t.Fatalf("Flush of an outbox emptied by an earlier process: %v", err)
		}
	})
}

// TestOutboxRefusesWhatNoStreamTakes: a row that is not a JSON object is
// refused by Send, before anything is queued.
func TestOutboxRefusesWhatNoStreamTakes(t *testing.T) {
	db, d := openDB(t, SQLite)
	o := newOutbox(t, db, d, "ws://127.0.0.1:1/eo", "app-1", fastOptions(&logBuffer{}))
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, row := range []string{`[1]`, `{"n":`, ``, `7`} {
		if _, err := o.Send(ctx, tx, []byte(row)); err == nil {
			t.Errorf("Send(%q) succeeded; want a refusal", row)
		}
	}
	if _, err := o.SendMany(ctx, tx, nil); err == nil {
		t.Error("SendMany of no rows succeeded; want a refusal")
	}
}

// TestOutboxDeletesLandedRowsUnsent: rows the broker already holds under
// the publisher's mark (sent before a crash, say) are deleted at the
// greeting and never sent again; sending starts right after the mark.
func TestOutboxDeletesLandedRowsUnsent(t *testing.T) {
	dialects(t, func(t *testing.T, db *sql.DB, d Dialect) {
		ctx := context.Background()
		url := startBroker(t)
		// Queue 10 rows while the broker is unreachable.
		o := newOutbox(t, db, d, "ws://"+freePort(t)+"/eo", "app-1", fastOptions(&logBuffer{}))
		sendRows(t, db, o, 1, 10, 5)
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
		// Seqs 1 to 4 land as a crashed sender would have left them.
		p, err := wire.Publish(ctx, url, wire.PublishOptions{Publisher: "app-1"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.SendBatch(ctx, [][]byte{[]byte(`{"n":1}`), []byte(`{"n":2}`), []byte(`{"n":3}`), []byte(`{"n":4}`)}); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var firsts []int64
		opts := fastOptions(nil)
		opts.testSubmitted = func(first int64, n int) {
			mu.Lock()
			firsts = append(firsts, first)
			mu.Unlock()
		}
		o = newOutbox(t, db, d, url, "app-1", opts)
		flush(t, o)
		mu.Lock()
		defer mu.Unlock()
		if len(firsts) == 0 || firsts[0] != 5 {
			t.Fatalf("frames sent from seqs %v; want the first at seq 5, right after the broker's mark 4", firsts)
		}
		rows := readStream(t, url, 10)
		for i, r := range rows {
			if r.N != int64(i+1) {
				t.Fatalf("offset %d holds n=%d, want %d", r.Offset, r.N, i+1)
			}
		}
	})
}

// TestOutboxDeadLettersRefusedRowsKeepingOrder: rows the schema refuses,
// inside a batch and alone, are reported to OnDeadLetter and moved to the
// dead-letter table; every other row lands once, in order, and Flush ends.
func TestOutboxDeadLettersRefusedRowsKeepingOrder(t *testing.T) {
	dialects(t, func(t *testing.T, db *sql.DB, d Dialect) {
		ctx := context.Background()
		url := startBroker(t)
		var mu sync.Mutex
		var letters []DeadLetter
		opts := fastOptions(&logBuffer{})
		opts.OnDeadLetter = func(l DeadLetter) {
			mu.Lock()
			letters = append(letters, l)
			mu.Unlock()
		}
		o := newOutbox(t, db, d, url, "app-1", opts)
		// One transaction of 40 rows: seqs 5 and 23 have a string n.
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var rows [][]byte
		var want []int64
		for s := 1; s <= 40; s++ {
			if s == 5 || s == 23 {
				rows = append(rows, []byte(fmt.Sprintf(`{"n":"bad %d"}`, s)))
				continue
			}
			rows = append(rows, []byte(fmt.Sprintf(`{"n":%d}`, s)))
			want = append(want, int64(s))
		}
		if _, err := o.SendMany(ctx, tx, rows); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		flush(t, o)
		// A refused row later, alone, after the shift: the numbering holds.
		tx, _ = db.BeginTx(ctx, nil)
		if _, err := o.Send(ctx, tx, []byte(`{"n":"bad 41"}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := o.Send(ctx, tx, []byte(`{"n":42}`)); err != nil {
			t.Fatal(err)
		}
		tx.Commit()
		want = append(want, 42)
		flush(t, o)

		got := readStream(t, url, len(want))
		if len(got) != len(want) {
			t.Fatalf("the stream holds %d rows, want %d", len(got), len(want))
		}
		for i, r := range got {
			if r.N != want[i] {
				t.Fatalf("offset %d holds n=%d, want %d", r.Offset, r.N, want[i])
			}
		}
		if off, ok := o.Landed(6); !ok || off != got[4].Offset {
			t.Errorf("Landed(6) = %d, %v; want %d", off, ok, got[4].Offset)
		}
		if _, ok := o.Landed(5); ok {
			t.Error("Landed(5) reports an offset for a dead-lettered row")
		}
		mu.Lock()
		defer mu.Unlock()
		var seqs []int64
		for _, l := range letters {
			seqs = append(seqs, l.Seq)
			if !strings.Contains(string(l.Row), "bad") || l.Reason == "" {
				t.Errorf("dead letter %+v: want the refused row and a reason", l)
			}
		}
		if fmt.Sprint(seqs) != "[5 23 41]" {
			t.Fatalf("OnDeadLetter saw seqs %v, want [5 23 41]", seqs)
		}
		var stored []int64
		rs, err := db.QueryContext(ctx, "SELECT seq FROM "+DeadLetterTable+" ORDER BY seq")
		if err != nil {
			t.Fatal(err)
		}
		for rs.Next() {
			var s int64
			rs.Scan(&s)
			stored = append(stored, s)
		}
		rs.Close()
		if fmt.Sprint(stored) != "[5 23 41]" {
			t.Fatalf("%s holds seqs %v, want [5 23 41]", DeadLetterTable, stored)
		}
	})
}

// TestOutboxReportsAnOutageOnce: while the broker is down the sender
// retries many times and logs one line; it logs one more when it is back,
// and then everything lands.
func TestOutboxReportsAnOutageOnce(t *testing.T) {
	db, d := openDB(t, SQLite)
	cfg := eoConfig(t)
	cfg.Listen = freePort(t)
	url := "ws://" + cfg.Listen + "/eo"
	stop := runBroker(t, cfg)
	log := &logBuffer{}
	var attempts atomic.Int64
	opts := fastOptions(log)
	opts.testAttempt = func(n int) { attempts.Store(int64(n)) }
	o := newOutbox(t, db, d, url, "app-1", opts)
	sendRows(t, db, o, 1, 5, 1)
	flush(t, o)
	stop()
	sendRows(t, db, o, 6, 10, 1)
	waitUntil(t, "ten failed attempts", 30*time.Second, func() bool { return attempts.Load() >= 10 })
	if n := strings.Count(log.String(), "cannot reach the stream"); n != 1 {
		t.Fatalf("%d attempts logged %d outage lines, want 1:\n%s", attempts.Load(), n, log)
	}
	runBroker(t, cfg)
	flush(t, o)
	if n := strings.Count(log.String(), "reached the stream again"); n != 1 {
		t.Fatalf("the recovery was logged %d times, want once:\n%s", n, log)
	}
	if n := strings.Count(log.String(), "cannot reach the stream"); n != 1 {
		t.Fatalf("the outage was logged %d times, want once:\n%s", n, log)
	}
	if rows := readStream(t, url, 10); len(rows) != 10 {
		t.Fatalf("the stream holds %d rows, want 10", len(rows))
	}
}

// TestOutboxCloseStopsWithoutDraining: Close returns while rows are still
// queued for an unreachable broker, and they stay in the outbox.
func TestOutboxCloseStopsWithoutDraining(t *testing.T) {
	db, d := openDB(t, SQLite)
	o := newOutbox(t, db, d, "ws://"+freePort(t)+"/eo", "app-1", fastOptions(&logBuffer{}))
	sendRows(t, db, o, 1, 3, 1)
	if err := o.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case <-o.Done():
	default:
		t.Fatal("Done is open after Close")
	}
	if n, err := o.Pending(context.Background()); err != nil || n != 3 {
		t.Fatalf("Pending after Close = %d, %v; want the 3 rows kept", n, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := o.Flush(ctx); err == nil {
		t.Fatal("Flush of a closed outbox with rows pending returned nil")
	}
}

// stopsWith waits for the sender to stop on its own and returns its error.
func stopsWith(t testing.TB, o *Outbox) error {
	t.Helper()
	select {
	case <-o.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the sender did not stop within 30s")
	}
	return o.Err()
}

// TestOutboxReconciliationRefusals provokes each refusal of the greeting's
// mark with real parts: a broker restored from an older copy of its data
// (acknowledged rows lost), a database that fell behind the broker, and a
// recreated stream. Each stops the sender with an error naming both numbers
// (or ids), and Flush returns it.
func TestOutboxReconciliationRefusals(t *testing.T) {
	t.Run("acknowledged rows lost", func(t *testing.T) {
		dialects(t, func(t *testing.T, db *sql.DB, d Dialect) {
			cfg := eoConfig(t)
			cfg.Listen = freePort(t)
			url := "ws://" + cfg.Listen + "/eo"
			stop := runBroker(t, cfg)
			o := newOutbox(t, db, d, url, "app-1", fastOptions(&logBuffer{}))
			sendRows(t, db, o, 1, 5, 1)
			flush(t, o)
			stop()
			old := t.TempDir()
			copyDir(t, cfg.Root, old)
			stop = runBroker(t, cfg)
			sendRows(t, db, o, 6, 9, 1)
			flush(t, o)
			o.Close()
			stop()
			cfg.Root = old // the broker comes back from the copy made at seq 5
			runBroker(t, cfg)
			o = newOutbox(t, db, d, url, "app-1", fastOptions(&logBuffer{}))
			sendRows(t, db, o, 10, 10, 1)
			err := stopsWith(t, o)
			var lost *AcknowledgedRowsLost
			if !errors.As(err, &lost) || lost.Mark != 5 || lost.Acked != 9 {
				t.Fatalf("the sender stopped with %v; want AcknowledgedRowsLost with mark 5 and acked 9", err)
			}
			if !strings.Contains(err.Error(), "seq 5") || !strings.Contains(err.Error(), "seq 9") {
				t.Fatalf("the message does not name both numbers: %v", err)
			}
			if ferr := o.Flush(context.Background()); !errors.As(ferr, &lost) {
				t.Fatalf("Flush = %v; want the refusal", ferr)
			}
		})
	})
	t.Run("store behind broker", func(t *testing.T) {
		dialects(t, func(t *testing.T, db *sql.DB, d Dialect) {
			ctx := context.Background()
			url := startBroker(t)
			o := newOutbox(t, db, d, url, "app-1", fastOptions(&logBuffer{}))
			sendRows(t, db, o, 1, 3, 1)
			flush(t, o)
			o.Close()
			// Another writer publishes seqs 4 and 5 under the same id.
			p, err := wire.Publish(ctx, url, wire.PublishOptions{Publisher: "app-1"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.SendBatch(ctx, [][]byte{[]byte(`{"n":4}`), []byte(`{"n":5}`)}); err != nil {
				t.Fatal(err)
			}
			p.Close()
			o = newOutbox(t, db, d, url, "app-1", fastOptions(&logBuffer{}))
			sendRows(t, db, o, 4, 4, 1)
			err = stopsWith(t, o)
			var behind *StoreBehindBroker
			if !errors.As(err, &behind) || behind.Mark != 5 || behind.Last != 4 {
				t.Fatalf("the sender stopped with %v; want StoreBehindBroker with mark 5 and last 4", err)
			}
			if !strings.Contains(err.Error(), "seq 5") || !strings.Contains(err.Error(), "seq 4") {
				t.Fatalf("the message does not name both numbers: %v", err)
			}
		})
	})
	t.Run("stream recreated", func(t *testing.T) {
		dialects(t, func(t *testing.T, db *sql.DB, d Dialect) {
			cfg := eoConfig(t)
			cfg.Listen = freePort(t)
			url := "ws://" + cfg.Listen + "/eo"
			stop := runBroker(t, cfg)
			o := newOutbox(t, db, d, url, "app-1", fastOptions(&logBuffer{}))
			sendRows(t, db, o, 1, 2, 1)
			flush(t, o)
			o.Close()
			stop()
			cfg.Root = t.TempDir() // a new stream of the same name
			runBroker(t, cfg)
			o = newOutbox(t, db, d, url, "app-1", fastOptions(&logBuffer{}))
			sendRows(t, db, o, 3, 3, 1)
			err := stopsWith(t, o)
			var mm *StreamMismatch
			if !errors.As(err, &mm) || mm.Stored == "" || mm.Got == "" || mm.Stored == mm.Got {
				t.Fatalf("the sender stopped with %v; want StreamMismatch naming two ids", err)
			}
			if !strings.Contains(err.Error(), mm.Stored) || !strings.Contains(err.Error(), mm.Got) {
				t.Fatalf("the message does not name both ids: %v", err)
			}
			if n, _ := o.Pending(context.Background()); n != 1 {
				t.Fatalf("Pending = %d; the refused row must stay queued", n)
			}
		})
	})
}

// TestOutboxKeepsFramesUnderTheBrokersBound: with the broker's
// max_message_bytes at 4 KiB, batches are cut to fit, and a row that alone
// is larger goes to the dead letters unsent while the rows around it land.
func TestOutboxKeepsFramesUnderTheBrokersBound(t *testing.T) {
	db, d := openDB(t, SQLite)
	cfg := eoConfig(t)
	cfg.Limits.MaxMessageBytes = 4096
	url, _ := brokertestRun(t, cfg)
	var letters []DeadLetter
	var mu sync.Mutex
	opts := fastOptions(&logBuffer{})
	opts.MaxFrameBytes = 4096
	opts.OnDeadLetter = func(l DeadLetter) {
		mu.Lock()
		letters = append(letters, l)
		mu.Unlock()
	}
	o := newOutbox(t, db, d, url+"/eo", "app-1", opts)
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]byte
	for s := 1; s <= 12; s++ {
		pad := strings.Repeat("x", 1500)
		if s == 7 {
			pad = strings.Repeat("y", 5000)
		}
		rows = append(rows, []byte(fmt.Sprintf(`{"n":%d,"pad":%q}`, s, pad)))
	}
	if _, err := o.SendMany(ctx, tx, rows); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	flush(t, o)
	got := readStream(t, url+"/eo", 11)
	want := []int64{1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12}
	if len(got) != len(want) {
		t.Fatalf("the stream holds %d rows, want %d", len(got), len(want))
	}
	for i, r := range got {
		if r.N != want[i] {
			t.Fatalf("offset %d holds n=%d, want %d", r.Offset, r.N, want[i])
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(letters) != 1 || letters[0].Seq != 7 || !strings.Contains(letters[0].Reason, "5016 bytes") {
		for _, l := range letters {
			t.Errorf("dead letter: seq %d, %d bytes, reason %q", l.Seq, len(l.Row), l.Reason)
		}
		t.Fatal("want seq 7 alone, its size (5016 bytes) named")
	}
}
