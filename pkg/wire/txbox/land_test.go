package txbox

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/wire"
)

// kindsSchema has a column of every kind SQLType maps.
const kindsSchema = `{"type":"object","properties":{
 "i":{"type":"integer"},
 "i32":{"type":"integer","format":"int32"},
 "f":{"type":"number"},
 "f32":{"type":"number","format":"float"},
 "ok":{"type":"boolean"},
 "s":{"type":["string","null"]},
 "hex":{"type":"string","contentEncoding":"base16"},
 "b64":{"type":"string","contentEncoding":"base64"},
 "obj":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]},
 "list":{"type":"array","items":{"type":"integer"}}
},"required":["i","i32","f","f32","ok","hex","b64","obj","list"]}`

// TestLandMapsEveryColumnKind lands a row of every column kind and reads
// each value back typed by the table's column types, on both dialects; a
// rerun lands nothing twice.
func TestLandMapsEveryColumnKind(t *testing.T) {
	eachInboxDB(t, func(t *testing.T, db *sql.DB, d Dialect, dsn string) {
		ctx := inboxCtx(t)
		b := startInboxBroker(t, t.TempDir())
		kinds := config.DefaultStream("kinds")
		kinds.Schema = config.RawJSON(kindsSchema)
		b.cfg.Streams = append(b.cfg.Streams, kinds)
		b.restart()
		p, err := wire.Publish(ctx, b.Base+"/kinds", wire.PublishOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rows := [][]byte{
			[]byte(`{"i":9007199254740993,"i32":-7,"f":0.1,"f32":1.5,"ok":true,"s":"é\"x","hex":"00ff","b64":"AAE=","obj":{"x":1},"list":[1,2]}`),
			[]byte(`{"i":1,"i32":2,"f":3.0,"f32":4.0,"ok":false,"s":null,"hex":"","b64":"","obj":{"x":2},"list":[]}`),
		}
		if _, err := p.SendBatch(ctx, rows); err != nil {
			t.Fatal(err)
		}
		p.Close()
		for run := range 2 {
			res, err := Land(ctx, db, d, b.Base+"/kinds", "kinds", LandOptions{Offset: offsetOnFirst(run), UntilCaughtUp: true})
			if err != nil {
				t.Fatal(err)
			}
			if want := int64(2 * (1 - run)); res.Rows != want || res.Last != 2 {
				t.Fatalf("run %d landed %d rows up to %d, want %d up to 2", run+1, res.Rows, res.Last, want)
			}
		}
		var (
			off, ts     int64
			i           int64
			i32         int32
			f           float64
			f32         float64
			ok          bool
			s           sql.NullString
			hex, b64    []byte
			obj, list   string
			nullS       sql.NullString
			ok2         bool
			hex2        []byte
			tsNotBefore = time.Now().Add(-time.Hour).UnixMicro()
		)
		err = db.QueryRow(`SELECT streamcast_offset, streamcast_ts, i, i32, f, f32, ok, s, hex, b64, obj, list FROM kinds WHERE streamcast_offset = 1`).
			Scan(&off, &ts, &i, &i32, &f, &f32, &ok, &s, &hex, &b64, &obj, &list)
		if err != nil {
			t.Fatal(err)
		}
		got := fmt.Sprintf("%d %v %d %d %v %v %v %q %x %x %s %s", off, ts > tsNotBefore, i, i32, f, f32, ok, s.String, hex, b64, obj, list)
		want := `1 true 9007199254740993 -7 0.1 1.5 true "é\"x" 00ff 0001 {"x":1} [1,2]`
		if got != want {
			t.Errorf("row 1 reads back as\n%s\nwant\n%s", got, want)
		}
		if err := db.QueryRow(`SELECT s, ok, hex FROM kinds WHERE streamcast_offset = 2`).Scan(&nullS, &ok2, &hex2); err != nil {
			t.Fatal(err)
		}
		if nullS.Valid || ok2 || len(hex2) != 0 {
			t.Errorf("row 2: s %v, ok %v, hex %x; want NULL, false, empty", nullS, ok2, hex2)
		}
	})
}

func offsetOnFirst(run int) *int64 {
	if run == 0 {
		return wire.At(0)
	}
	return nil
}

// TestLandRefusesATableWithoutTheStreamsColumns: an existing table that
// lacks a column is one clear error at the start.
func TestLandRefusesATableWithoutTheStreamsColumns(t *testing.T) {
	eachInboxDB(t, func(t *testing.T, db *sql.DB, d Dialect, dsn string) {
		b := startInboxBroker(t, t.TempDir())
		b.publish(0, 1)
		if _, err := db.Exec("CREATE TABLE trades (streamcast_offset BIGINT PRIMARY KEY, streamcast_ts BIGINT, price DOUBLE PRECISION)"); err != nil {
			t.Fatal(err)
		}
		_, err := Land(context.Background(), db, d, b.url(), "trades", LandOptions{Offset: wire.At(0), UntilCaughtUp: true})
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte("lacks the columns event_ts, symbol, amount, side, trade_id")) {
			t.Fatalf("Land into a narrower table: %v", err)
		}
	})
}

// TestLandLetsSavedStateWinOverOffsetAndResetMovesIt: the same call
// repeated (cron) resumes where the table is, whatever Offset says; Reset
// moves the table's place back, deleting the rows above it so they land
// again once.
func TestLandLetsSavedStateWinOverOffsetAndResetMovesIt(t *testing.T) {
	eachInboxDB(t, func(t *testing.T, db *sql.DB, d Dialect, dsn string) {
		ctx := inboxCtx(t)
		b := startInboxBroker(t, t.TempDir())
		b.publish(0, 5)
		land := func(opts LandOptions) (LandResult, LandStart) {
			t.Helper()
			var start LandStart
			opts.UntilCaughtUp, opts.Started = true, func(s LandStart) { start = s }
			res, err := Land(ctx, db, d, b.url(), "trades", opts)
			if err != nil {
				t.Fatal(err)
			}
			return res, start
		}
		if res, start := land(LandOptions{Offset: wire.At(0)}); res.Rows != 5 || start.Saved != wire.Null {
			t.Fatalf("first run: %d rows, saved %d; want 5 rows and no saved state", res.Rows, start.Saved)
		}
		b.publish(5, 2)
		if res, start := land(LandOptions{Offset: wire.At(0)}); res.Rows != 2 || res.Last != 7 || start.Saved != 5 || start.Moved {
			t.Fatalf("rerun with Offset 0: %d rows up to %d, start %+v; want 2 rows up to 7 from saved 5", res.Rows, res.Last, start)
		}
		if res, start := land(LandOptions{Offset: wire.At(0), Reset: wire.At(3)}); res.Rows != 5 || res.Last != 7 || start != (LandStart{Saved: 7, Last: 2, Moved: true}) {
			t.Fatalf("Reset 3: %d rows up to %d, start %+v; want 5 rows up to 7, moved from 7 to 2", res.Rows, res.Last, start)
		}
		var n, distinct int64
		if err := db.QueryRow(`SELECT count(*), count(DISTINCT streamcast_offset) FROM trades`).Scan(&n, &distinct); err != nil {
			t.Fatal(err)
		}
		if n != 7 || distinct != 7 {
			t.Fatalf("table holds %d rows (%d distinct) after the reset, want each of 7 once", n, distinct)
		}
		if res, start := land(LandOptions{Reset: wire.At(wire.Null)}); res.Rows != 0 || start.Last != 7 {
			t.Fatalf("Reset to the frontier: %d rows, start %+v; want none, at 7", res.Rows, start)
		}
	})
}

// TestLandOnADatabaseItMayNotWriteReturnsAStateErrorWithTheStatement: a
// caller that words errors for people who never made the state table (the
// command line) needs to know what failed and the statement to hand on.
func TestLandOnADatabaseItMayNotWriteReturnsAStateErrorWithTheStatement(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ro.db")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	db, d, err := OpenDSN("sqlite://" + path + "?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = Land(inboxCtx(t), db, d, "ws://127.0.0.1:1/trades", "trades", LandOptions{})
	var se *StateError
	if !errors.As(err, &se) || se.Op != StateCreate || !strings.HasPrefix(se.DDL, "CREATE TABLE IF NOT EXISTS "+InboxStateTable) || se.Err == nil {
		t.Fatalf("Land on a read-only database: %v (%#v); want a StateError of StateCreate carrying the statement and the database's error", err, se)
	}
	if strings.Contains(err.Error(), "txbox.DDL") {
		t.Errorf("%q names a Go identifier", err)
	}
}
