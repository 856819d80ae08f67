package txbox

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/streamcast/streamcast/internal/testkit"
)

// appArg is an application child's job.
type appArg struct {
	DSN       string
	URL       string
	Publisher string
	Total     int // the loop stops at this many application rows, then flushes
}

// appTable is the application's own table in the crash test.
const appTable = "app_rows"

// runAppChild is the application of the crash test: in one transaction it
// writes its own row and sends the same n through the outbox, until Total
// rows are committed; then it flushes and exits 0. The test kills it with
// SIGKILL anywhere in that loop.
func runAppChild(arg string) int {
	var a appArg
	if err := json.Unmarshal([]byte(arg), &a); err != nil {
		fmt.Fprintln(os.Stderr, "app child:", err)
		return 1
	}
	if err := appLoop(a); err != nil {
		fmt.Fprintln(os.Stderr, "app child:", err)
		return 1
	}
	return 0
}

func appLoop(a appArg) error {
	ctx := context.Background()
	db, d, err := OpenDSN(a.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := CreateTables(ctx, db, d); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+appTable+" (n "+d.BigInt()+" PRIMARY KEY)"); err != nil {
		return err
	}
	o, err := NewOutbox(db, d, a.URL, a.Publisher, OutboxOptions{
		PollEvery: 20 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	defer o.Close()
	var n int64
	if err := db.QueryRowContext(ctx, "SELECT COALESCE(MAX(n), 0) FROM "+appTable).Scan(&n); err != nil {
		return err
	}
	insert := d.Rebind("INSERT INTO " + appTable + " (n) VALUES (?)")
	for n < int64(a.Total) {
		n++
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, insert, n); err != nil {
			tx.Rollback()
			return err
		}
		if _, err := o.Send(ctx, tx, []byte(fmt.Sprintf(`{"n":%d}`, n))); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return o.Flush(fctx)
}

// TestOutboxUnderCrashes: an application loop writes its own row and sends
// it in one transaction; the loop is SIGKILLed at random points and the
// broker (a child process) is SIGKILLed too. At the end the stream holds
// exactly the committed application rows, in commit order, once each.
// STREAMCAST_SOAK=full runs 20,000 rows, 20 application kills and 5
// broker kills: the kills are what the property rests on, and 20,000
// rows keep CI's two dialects within its 30 minutes on a 2-core box.
func TestOutboxUnderCrashes(t *testing.T) {
	if testing.Short() {
		t.Skip("kills child processes")
	}
	total, appKills, brokerKills := 600, 4, 1
	if testkit.SoakFull() {
		total, appKills, brokerKills = 20000, 20, 5
	}
	for _, d := range []Dialect{SQLite, Postgres} {
		t.Run(d.String(), func(t *testing.T) { crashLoop(t, d, total, appKills, brokerKills) })
	}
}

func crashLoop(t *testing.T, d Dialect, total, appKills, brokerKills int) {
	ctx := context.Background()
	dsn := dsnFor(t, d)
	db, _, err := OpenDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	count := func() int64 {
		var n int64
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+appTable).Scan(&n); err != nil {
			return 0 // not made yet
		}
		return n
	}
	cfg := eoConfig(t)
	cfg.Listen = freePort(t)
	url := "ws://" + cfg.Listen + "/eo"
	br, _ := startBrokerChild(t, cfg)
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 16))
	t.Logf("kill points from seed %d", seed)
	// The killed runs never reach their total; each is killed after a
	// random number of commits (about total/(appKills+1) on average) and a
	// random few milliseconds more. The last run commits up to total.
	arg := appArg{DSN: dsn, URL: url, Publisher: "crash-app", Total: 1 << 40}
	step := max(2, 2*total/(appKills+1))
	brokerEvery := max(1, appKills/max(1, brokerKills))
	appKilled, brokerKilled := 0, 0
	// progress waits until the application committed n rows more than it
	// had.
	progress := func(app *child, n int) {
		from := count()
		waitUntil(t, fmt.Sprintf("the application to commit %d more rows", n), 2*time.Minute, func() bool {
			select {
			case <-app.done:
				t.Fatalf("the application exited: %s", app.stderr)
			default:
			}
			return count() >= from+int64(n)
		})
		time.Sleep(time.Duration(rng.IntN(10)) * time.Millisecond)
	}
	for appKilled < appKills {
		app := startChild(t, "app", arg)
		progress(app, 1+rng.IntN(step))
		if brokerKilled < brokerKills && (appKilled+1)%brokerEvery == 0 {
			br.kill(t)
			brokerKilled++
			br, _ = startBrokerChild(t, cfg)
			progress(app, 1+rng.IntN(step))
		}
		app.kill(t)
		appKilled++
	}
	total = max(total, int(count())+20)
	arg.Total = total
	t.Logf("%d rows committed after %d application kills and %d broker kills; the last run goes on to %d", count(), appKilled, brokerKilled, total)
	app := startChild(t, "app", arg)
	select {
	case <-app.done:
	case <-time.After(5 * time.Minute):
		t.Fatalf("the last application run did not finish in 5 minutes: %s", app.stderr)
	}
	if code := app.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("the last application run exited %d: %s", code, app.stderr)
	}
	if n := count(); n != int64(total) {
		t.Fatalf("the application table holds %d rows, want %d", n, total)
	}
	rows := readStream(t, url, total)
	if len(rows) != total {
		t.Fatalf("the stream holds %d rows, want exactly the %d committed", len(rows), total)
	}
	for i, r := range rows {
		if r.N != int64(i+1) {
			t.Fatalf("offset %d holds n=%d, want n=%d: the stream must hold the committed rows in commit order, once each", r.Offset, r.N, i+1)
		}
	}
	_ = br
}
