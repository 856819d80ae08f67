package txbox

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/wire"
)

// The crash tests re-execute this test binary as the application: a
// consumer applying inbox rows to its table ("inbox"), or `tail --into`'s
// engine sink the stream in a table ("land"). The parent kills it with
// SIGKILL at random points, restarts the broker between kills, and checks
// the table at the end.
const (
	crashRoleEnv = "TXBOX_CRASH_ROLE"
	crashDSNEnv  = "TXBOX_CRASH_DSN"
	crashURLEnv  = "TXBOX_CRASH_URL"
)

// crashChild is the application's main: it runs until it is killed.
func crashChild(role string) int {
	ctx := context.Background()
	db, d, err := OpenDSN(os.Getenv(crashDSNEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	url := os.Getenv(crashURLEnv)
	fast := InboxOptions{MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, PollEvery: 10 * time.Millisecond}
	switch role {
	case "inbox":
		opts := fast
		opts.Offset = wire.At(0)
		opts.Window = Window{MaxRows: 64, ResumeAt: 0.5} // pauses and resumes under the kills too
		opts.BatchRows = 16
		in, err := NewInbox(ctx, db, d, url, "crash", opts)
		var og *OffsetGiven
		if errors.As(err, &og) {
			opts.Offset = nil
			in, err = NewInbox(ctx, db, d, url, "crash", opts)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for {
			m, tx, err := in.Next(ctx)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			var row struct{ Price float64 }
			if err := m.Unmarshal(&row); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			if _, err := tx.ExecContext(ctx, d.Rebind("INSERT INTO applied (stream_offset, price) VALUES (?, ?)"), m.Offset, row.Price); err != nil {
				fmt.Fprintln(os.Stderr, "apply:", err)
				return 1
			}
		}
	case "land":
		_, err := Land(ctx, db, d, url, "trades", LandOptions{Offset: wire.At(0), BatchRows: 16, MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
		var og *OffsetGiven
		if errors.As(err, &og) {
			_, err = Land(ctx, db, d, url, "trades", LandOptions{BatchRows: 16, MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown crash role %q\n", role)
	return 2
}

// inboxCrashLoop starts the application, lets it make progress (progress
// reports its rows so far), kills it with SIGKILL at a random point, and
// repeats kills times; every kills/restarts kills it restarts the broker
// too.
func inboxCrashLoop(t *testing.T, b *inboxBroker, role, dsn string, kills, restarts int, progress func() int64) {
	t.Helper()
	every := max(1, kills/max(1, restarts))
	for k := range kills {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashRoleEnv+"="+role, crashDSNEnv+"="+dsn, crashURLEnv+"="+b.url())
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		// Kill once the application made progress, or at once when it has
		// nothing left to do (everything published so far has landed).
		before := progress()
		deadline := time.Now().Add(20 * time.Second)
		for progress() == before && before < streamEnd(t, b)-1 {
			select {
			case <-exited:
				t.Fatalf("kill %d: the application exited before it was killed: %s", k, stderr.String())
			default:
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				<-exited
				t.Fatalf("kill %d: no progress in 20s: %s", k, stderr.String())
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
		_ = cmd.Process.Kill()
		<-exited
		if (k+1)%every == 0 && restarts > 0 {
			b.restart()
			restarts--
		}
	}
}

// crashPublisher publishes n trades in small batches in the background,
// so the kills fall on replayed and live rows alike. It returns a wait for
// the end.
func crashPublisher(t *testing.T, b *inboxBroker, n int) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		sent := 0
		for sent < n && ctx.Err() == nil {
			p, err := wire.Publish(ctx, b.url(), wire.PublishOptions{})
			if err != nil {
				time.Sleep(10 * time.Millisecond) // the broker is restarting
				continue
			}
			for sent < n {
				var rows [][]byte
				for i := sent; i < min(n, sent+50); i++ {
					rows = append(rows, inboxTrade(i))
				}
				if _, err := p.SendBatch(ctx, rows); err != nil {
					// Not acknowledged: the broker went away. A batch is
					// all or nothing, but it may have committed before
					// the ack was lost; the check below counts rows by
					// the stream's own end offset, so either is fine.
					break
				}
				sent += len(rows)
			}
			p.Close()
		}
		done <- nil
	}()
	return func() {
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			cancel()
			t.Fatal("publishing did not finish in 60s")
		}
		cancel()
	}
}

// streamEnd is the stream's end offset: the rows it holds are 1..end-1.
func streamEnd(t *testing.T, b *inboxBroker) int64 {
	for _, s := range b.srv.Stats().Streams {
		if s.Name == "trades" && s.EndOffset != nil {
			return *s.EndOffset
		}
	}
	t.Fatal("no end offset for trades")
	return 0
}

// checkExactlyOnce fails unless table holds offsets 1..end-1, each once.
func checkExactlyOnce(t *testing.T, db *sql.DB, table string, col string, end int64) {
	t.Helper()
	var n, distinct, lo, hi int64
	q := fmt.Sprintf("SELECT count(*), count(DISTINCT %s), coalesce(min(%s), 0), coalesce(max(%s), 0) FROM %s", col, col, col, table)
	if err := db.QueryRow(q).Scan(&n, &distinct, &lo, &hi); err != nil {
		t.Fatal(err)
	}
	if n != end-1 || distinct != n || lo != 1 || hi != end-1 {
		t.Fatalf("%s holds %d rows (%d distinct offsets, %d..%d); want every offset 1..%d once", table, n, distinct, lo, hi, end-1)
	}
}

// TestInboxUnderCrashesAppliesEveryRowOnce kills a consumer that applies
// inbox rows to its table at random points while rows are published and
// the broker restarts: the table ends with every row exactly once.
func TestInboxUnderCrashesAppliesEveryRowOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	rows, kills, restarts := testkit.SoakCount(800, 20_000), testkit.SoakCount(4, 25), testkit.SoakCount(2, 5)
	eachInboxDB(t, func(t *testing.T, db *sql.DB, d Dialect, dsn string) {
		b := startInboxBroker(t, t.TempDir())
		inboxApplied(t, db)
		wait := crashPublisher(t, b, rows)
		applied := func() int64 { return inboxCount(t, db, "SELECT count(*) FROM applied") }
		inboxCrashLoop(t, b, "inbox", dsn, kills, restarts, applied)
		wait()
		end := streamEnd(t, b)

		// Bounded by the rows left to process (about a thousand a second,
		// one commit each), not by inboxCtx's minute: the full soak has
		// most of its 20k rows left when the kills stop.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second+time.Duration(rows)*5*time.Millisecond)
		defer cancel()
		in, err := NewInbox(ctx, db, d, b.url(), "crash", InboxOptions{Offset: wire.At(0)})
		var og *OffsetGiven
		if errors.As(err, &og) {
			in, err = NewInbox(ctx, db, d, b.url(), "crash", InboxOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		// Counted once: a count per row would make the full soak's last
		// run quadratic.
		for done, left := applied(), end-1-applied(); left > 0; left-- {
			m, tx, err := in.Next(ctx)
			if err != nil {
				t.Fatalf("Next with %d of %d applied: %v", done, end-1, err)
			}
			done++
			if _, err := tx.Exec(d.Rebind("INSERT INTO applied (stream_offset, price) VALUES (?, 0)"), m.Offset); err != nil {
				t.Fatalf("offset %d applied twice: %v", m.Offset, err)
			}
			if err := in.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		checkExactlyOnce(t, db, "applied", "stream_offset", end)
		if n := inboxCount(t, db, "SELECT count(*) FROM "+InboxTable); n != 0 {
			t.Errorf("%d rows are left in the inbox after every row was applied", n)
		}
	})
}

// TestLandUnderCrashesHoldsEveryRowOnce kills `tail --into`'s engine at
// random points while rows are published and the broker restarts, then
// reruns it to the frontier: the table holds every row exactly once, with
// its values.
func TestLandUnderCrashesHoldsEveryRowOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	rows, kills, restarts := testkit.SoakCount(800, 20_000), testkit.SoakCount(4, 20), testkit.SoakCount(2, 5)
	eachInboxDB(t, func(t *testing.T, db *sql.DB, d Dialect, dsn string) {
		b := startInboxBroker(t, t.TempDir())
		wait := crashPublisher(t, b, rows)
		landed := func() int64 {
			var n int64
			if err := db.QueryRow("SELECT count(*) FROM trades").Scan(&n); err != nil {
				return 0 // not created yet
			}
			return n
		}
		inboxCrashLoop(t, b, "land", dsn, kills, restarts, landed)
		wait()
		end := streamEnd(t, b)
		// The children's first run binds the table at the earliest row;
		// this run takes the same start unless one of them got that far.
		_, err := Land(inboxCtx(t), db, d, b.url(), "trades", LandOptions{Offset: wire.At(0), UntilCaughtUp: true})
		var og *OffsetGiven
		if errors.As(err, &og) {
			_, err = Land(inboxCtx(t), db, d, b.url(), "trades", LandOptions{UntilCaughtUp: true})
		}
		if err != nil {
			t.Fatal(err)
		}
		checkExactlyOnce(t, db, "trades", OffsetColumn, end)
		var bad int64
		if err := db.QueryRow("SELECT count(*) FROM trades WHERE price <> 85000.5 + (event_ts - 1790038800000000) OR symbol <> 'BTC-USD' OR trade_id IS NOT NULL").Scan(&bad); err != nil {
			t.Fatal(err)
		}
		if bad != 0 {
			t.Errorf("%d rows hold values other than those published", bad)
		}
	})
}
