package testscript_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/wire/txbox"
)

// The same tail command line, as cron or a systemd timer runs it, killed
// (SIGKILL) at a random point five times (twice locally; STREAMCAST_SOAK=full
// runs all five) while rows are published, then run once more to the
// frontier. A saved position always wins over --offset earliest, so no run
// starts over; --cursor with --output and --into hold every row once.

const killRowsPerRound = 300

// killRounds is how many killed runs precede the last one.
func killRounds() int { return testkit.SoakCount(2, 5) }

func TestTailCursorWithOutputRerunAfterSIGKILLWritesEveryRowOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a server and a dozen processes")
	}
	dir, url := startKillServer(t)
	cursor, output := filepath.Join(dir, "tail.cursor"), filepath.Join(dir, "tail.ndjson")
	args := []string{"tail", "--cursor", cursor, "--output", output, "--offset", "earliest", url}
	cuts := 0
	for round := 0; round <= killRounds(); round++ {
		var out bytes.Buffer
		var errs string
		if round < killRounds() {
			var published <-chan error
			errs = runKilled(t, dir, args, &out, func() {
				published = startPublish(dir, url, round)
				if round%2 == 0 {
					// Killed while the rows arrive, once some are
					// written but not saved.
					waitUnsaved(cursor, output)
					return
				}
				if err := <-published; err != nil {
					t.Fatal(err)
				}
				published = nil
				randomMoment()
			})
			if published != nil {
				if err := <-published; err != nil {
					t.Fatal(err)
				}
			}
		} else {
			errs = runToFrontier(t, dir, args, &out)
		}
		if out.Len() > 0 {
			t.Fatalf("run %d printed %d bytes on stdout; --output must get every line", round+1, out.Len())
		}
		cuts += strings.Count(errs, "cut the last")
	}
	b, err := os.ReadFile(output)
	if err != nil {
		t.Fatal(err)
	}
	// Exactly once: every line whole, offsets 1 to the last, each once, in
	// order. A kill after lines the cursor had not saved yet (saves are
	// throttled to once a second) leaves them past the recorded length,
	// and the next run cuts them before it sends them again.
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	want := int64(killRounds() * killRowsPerRound)
	for i, line := range lines {
		var frame []json.RawMessage
		if err := json.Unmarshal([]byte(line), &frame); err != nil || len(frame) != 3 {
			t.Fatalf("line %d of %s is not a frame: %.80q", i+1, output, line)
		}
		if o, _ := strconv.ParseInt(string(frame[0]), 10, 64); o != int64(i+1) {
			t.Fatalf("line %d of %s holds offset %d; want %d: each row once, in order (%d lines, %d rows published)", i+1, output, o, i+1, len(lines), want)
		}
	}
	if int64(len(lines)) != want {
		t.Fatalf("%s holds %d lines; want %d, each row once", output, len(lines), want)
	}
	t.Logf("%d rows once in %s after %d killed runs; %d reruns cut lines written after the last save", want, output, killRounds(), cuts)
}

func TestTailIntoRerunAfterSIGKILLLandsEveryRowOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a server and a dozen processes")
	}
	dir, url := startKillServer(t)
	dsn := "sqlite://" + filepath.Join(dir, "app.db")
	args := []string{"tail", "--into", dsn, "--table", "trades", "--offset", "earliest", url}
	for round := 0; round <= killRounds(); round++ {
		var out bytes.Buffer
		if round < killRounds() {
			runKilled(t, dir, args, &out, func() { publishRows(t, dir, url, round); randomMoment() })
		} else {
			runToFrontier(t, dir, args, &out)
		}
	}
	db, _, err := txbox.OpenDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n, distinct, lo, hi int64
	if err := db.QueryRow(`SELECT count(*), count(DISTINCT streamcast_offset), min(streamcast_offset), max(streamcast_offset) FROM trades`).Scan(&n, &distinct, &lo, &hi); err != nil {
		t.Fatal(err)
	}
	if want := int64(killRounds() * killRowsPerRound); n != want || distinct != want || lo != 1 || hi != want {
		t.Fatalf("table holds %d rows (%d distinct) from offset %d to %d; want each of 1 to %d once", n, distinct, lo, hi, want)
	}
}

// startKillServer serves a durable stream "trades" from a temp dir and
// returns the dir and the stream's URL; the server is stopped at cleanup.
func startKillServer(t *testing.T) (dir, url string) {
	t.Helper()
	dir = t.TempDir()
	yaml := `listen: 127.0.0.1:0
root: ./data
maintain: false
streams:
  - name: trades
    durable: true
    max_replay: null
    schema:
      type: object
      properties:
        event_ts: {type: integer}
        symbol: {type: string}
        price: {type: number}
        amount: {type: number}
        side: {type: integer, format: int32}
        trade_id: {type: ["string", "null"]}
      required: [event_ts, symbol, price, amount, side]
`
	if err := os.WriteFile(filepath.Join(dir, "serve.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := exec.Command("streamcast", "serve", "--config", "serve.yaml", "--addr-file", "addr")
	srv.Dir = dir
	var logs testkit.SyncBuffer
	srv.Stderr = &logs
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { srv.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			srv.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(dir, "addr"))
		if err == nil && bytes.HasSuffix(b, []byte("\n")) {
			return dir, "ws://" + strings.TrimSpace(string(b)) + "/trades"
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve wrote no address in 30 s: %s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runKilled starts the command, runs during (which publishes and waits
// for the moment to kill) and kills the command with SIGKILL. It returns
// what the command said on stderr.
func runKilled(t *testing.T, dir string, args []string, out *bytes.Buffer, during func()) string {
	t.Helper()
	c := exec.Command("streamcast", args...)
	c.Dir, c.Stdout = dir, out
	var errs testkit.SyncBuffer
	c.Stderr = &errs
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	during()
	c.Process.Kill()
	c.Wait()
	if ws, ok := c.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("%s exited (%v) before it was killed: %s", strings.Join(args, " "), c.ProcessState, errs.String())
	}
	return errs.String()
}

// randomMoment waits up to 1.5 s: past a second now and then, so some
// runs save the cursor again after their first save (saves are throttled
// to once a second), and a kill may land in the middle of a write.
func randomMoment() {
	time.Sleep(time.Duration(rand.IntN(1500)) * time.Millisecond)
}

// waitUnsaved waits until output holds lines past the length cursor
// recorded: the moment a kill leaves lines for the next run to cut. After
// 5 s it gives up waiting (a save got in first each time), which only
// makes the kill an ordinary one.
func waitUnsaved(cursor, output string) {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		info, err := os.Stat(output)
		b, cerr := os.ReadFile(cursor)
		if err != nil || cerr != nil {
			continue
		}
		_, mark, _ := strings.Cut(string(b), "\n")
		var m struct{ Bytes int64 }
		if json.Unmarshal([]byte(mark), &m) == nil && info.Size() > m.Bytes {
			return
		}
	}
}

// runToFrontier runs the command with --until-caught-up to its end and
// returns what it said on stderr.
func runToFrontier(t *testing.T, dir string, args []string, out *bytes.Buffer) string {
	t.Helper()
	full := append(append([]string{}, args[:len(args)-1]...), "--until-caught-up", args[len(args)-1])
	c := exec.Command("streamcast", full...)
	c.Dir, c.Stdout = dir, out
	var errs testkit.SyncBuffer
	c.Stderr = &errs
	if err := c.Run(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(full, " "), err, errs.String())
	}
	return errs.String()
}

// publishRows publishes the round's killRowsPerRound rows in small batches,
// so they arrive while the tail runs.
func publishRows(t *testing.T, dir, url string, round int) {
	t.Helper()
	if err := <-startPublish(dir, url, round); err != nil {
		t.Fatal(err)
	}
}

// startPublish publishes the round's rows in the background; the channel
// gets the outcome.
func startPublish(dir, url string, round int) <-chan error {
	done := make(chan error, 1)
	var b []byte
	for i := round * killRowsPerRound; i < (round+1)*killRowsPerRound; i++ {
		b = fmt.Appendf(b, `{"event_ts":%d,"symbol":"BTC-USD","price":85000.5,"amount":0.015,"side":%d}`+"\n", 1790038800000000+i, i%2)
	}
	file := filepath.Join(dir, fmt.Sprintf("round%d.ndjson", round))
	if err := os.WriteFile(file, b, 0o644); err != nil {
		done <- err
		return done
	}
	go func() {
		out, err := exec.Command("streamcast", "publish", "--batch-size", "10", url, file).CombinedOutput()
		if err != nil {
			err = fmt.Errorf("publish: %v: %s", err, out)
		}
		done <- err
	}()
	return done
}
