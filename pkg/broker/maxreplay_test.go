package broker

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/logstore"
)

// TestMaxReplayCountsRowsNotOffsets subscribes over a real WebSocket to a
// log whose replay window holds fewer rows than its offset distance. Today
// only a hole makes the two differ (restore records one when it resumes
// past a fence), so the test records one in buffer.db's holes table, the
// record CountRows subtracts. A restore's hole holds no rows; this one lies
// over rows that exist, so the test checks the admission decision and the
// greeting's window, not the rows.
func TestMaxReplayCountsRowsNotOffsets(t *testing.T) {
	cfg := testConfig(t)
	mr := int64(5)
	cfg.Streams[0].MaxReplay = &mr
	srv := startServer(t, cfg)
	p := dialPublisher(t, srv, "trades")
	for i := range 10 {
		p.roundTrip(trade(i))
	} // offsets 1..10, end 11

	tooOld := func(path string) {
		t.Helper()
		_, _, err := dial(t, wsURL(srv, path))
		if code, reason := closeOf(err); code != 4416 || !strings.Contains(reason, `"why":"too_old"`) {
			t.Fatalf("%s: close %d %q (err %v), want 4416 too_old", path, code, reason, err)
		}
	}
	replays := func(path string, start, end int64) {
		t.Helper()
		_, g := mustDial(t, wsURL(srv, path))
		if g.Replay == nil || g.Replay.Start != start || g.Replay.End != end {
			t.Fatalf("%s: greeting replays %+v, want [%d,%d)", path, g.Replay, start, end)
		}
	}
	tooOld("/trades?offset=2") // 9 offsets, 9 rows

	dbs, err := filepath.Glob(filepath.Join(cfg.Root, "trades", "*", logstore.BufferFile))
	if err != nil || len(dbs) != 1 {
		t.Fatalf("find the log's buffer.db: %v %v", dbs, err)
	}
	db, err := sql.Open("sqlite", dbs[0]+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO holes(start_offset, end_offset) VALUES (3, 8)`); err != nil {
		t.Fatal(err)
	}
	replays("/trades?offset=2", 2, 11) // 9 offsets, 4 rows
	replays("/trades?offset=0", 1, 11) // 10 offsets, 5 rows

	for i := range 3 {
		p.roundTrip(trade(i))
	} // end 14
	tooOld("/trades?offset=2") // 12 offsets, 7 rows
	tooOld("/trades?offset=7") // 7 offsets, 6 rows
	replays("/trades?offset=9", 9, 14)
}

// TestARefusedSubscriberLetsGoOfTheStream: a subscriber refused its replay
// (4416 ahead) holds the stream's swap lock no longer once refused, so a
// migration, which waits for every connection's hold, is not kept waiting
// by it for ever.
func TestARefusedSubscriberLetsGoOfTheStream(t *testing.T) {
	srv := startServer(t, testConfig(t))
	p := dialPublisher(t, srv, "trades")
	p.roundTrip(trade(1))
	ws, _, err := dial(t, wsURL(srv, "/trades?offset=99"))
	if code, reason := closeOf(err); code != 4416 || !strings.Contains(reason, `"why":"ahead"`) {
		t.Fatalf("offset 99 of 1 row: close %d %q (err %v), want 4416 ahead", code, reason, err)
	}
	st := srv.reg.Get("trades")
	deadline := time.Now().Add(10 * time.Second)
	for !st.life.swap.TryLock() {
		if time.Now().After(deadline) {
			t.Fatal("10 s after its refusal the subscriber still holds the stream: a migration would wait for ever")
		}
		time.Sleep(time.Millisecond)
	}
	st.life.swap.Unlock()
	ws.Close()
}
