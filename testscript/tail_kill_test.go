package testscript_test

import (
	"bufio"
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
// starts over.

const killRowsPerRound = 300

// killRounds is how many killed runs precede the last one.
func killRounds() int { return testkit.SoakCount(2, 5) }

func TestTailCursorRerunAfterSIGKILLSkipsNothingAndNeverStartsOver(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a server and a dozen processes")
	}
	dir, url := startKillServer(t)
	cursor := filepath.Join(dir, "tail.cursor")
	args := []string{"tail", "--cursor", cursor, "--offset", "earliest", url}
	var printed []int64
	for round := 0; round <= killRounds(); round++ {
		saved := int64(-1)
		if b, err := os.ReadFile(cursor); err == nil {
			saved, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		}
		var out bytes.Buffer
		if round < killRounds() {
			runKilled(t, dir, args, &out, func() { publishRows(t, dir, url, round) })
		} else {
			runToFrontier(t, dir, args, &out)
		}
		offs := frameOffsets(t, out.Bytes())
		if len(offs) > 0 && saved >= 0 && offs[0] != saved+1 {
			t.Fatalf("run %d started at offset %d with %d saved in the cursor; want %d: the saved position must win over --offset earliest", round+1, offs[0], saved, saved+1)
		}
		printed = append(printed, offs...)
	}
	// At least once: a killed run may have printed rows its cursor had not
	// saved yet (saves are throttled to once a second), never skipped one.
	seen := map[int64]bool{}
	for _, o := range printed {
		seen[o] = true
	}
	for o := int64(1); o <= int64(killRounds()*killRowsPerRound); o++ {
		if !seen[o] {
			t.Fatalf("offset %d was never printed across %d runs", o, killRounds()+1)
		}
	}
	t.Logf("%d rows printed, %d of them again after a kill", len(printed), len(printed)-len(seen))
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
			runKilled(t, dir, args, &out, func() { publishRows(t, dir, url, round) })
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

// runKilled starts the command, runs during (which publishes), waits a
// random moment and kills the command with SIGKILL.
func runKilled(t *testing.T, dir string, args []string, out *bytes.Buffer, during func()) {
	t.Helper()
	c := exec.Command("streamcast", args...)
	c.Dir, c.Stdout = dir, out
	var errs testkit.SyncBuffer
	c.Stderr = &errs
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	during()
	// Past a second now and then, so some runs save the cursor again
	// after their first save (saves are throttled to once a second).
	time.Sleep(time.Duration(rand.IntN(1500)) * time.Millisecond)
	c.Process.Kill()
	c.Wait()
	if ws, ok := c.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("%s exited (%v) before it was killed: %s", strings.Join(args, " "), c.ProcessState, errs.String())
	}
}

// runToFrontier runs the command with --until-caught-up to its end.
func runToFrontier(t *testing.T, dir string, args []string, out *bytes.Buffer) {
	t.Helper()
	full := append(append([]string{}, args[:len(args)-1]...), "--until-caught-up", args[len(args)-1])
	c := exec.Command("streamcast", full...)
	c.Dir, c.Stdout = dir, out
	var errs testkit.SyncBuffer
	c.Stderr = &errs
	if err := c.Run(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(full, " "), err, errs.String())
	}
}

// publishRows publishes the round's killRowsPerRound rows in small batches,
// so they arrive while the tail runs.
func publishRows(t *testing.T, dir, url string, round int) {
	t.Helper()
	var b []byte
	for i := round * killRowsPerRound; i < (round+1)*killRowsPerRound; i++ {
		b = fmt.Appendf(b, `{"event_ts":%d,"symbol":"BTC-USD","price":85000.5,"amount":0.015,"side":%d}`+"\n", 1790038800000000+i, i%2)
	}
	file := filepath.Join(dir, fmt.Sprintf("round%d.ndjson", round))
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("streamcast", "publish", "--batch-size", "10", url, file).CombinedOutput(); err != nil {
		t.Fatalf("publish: %v: %s", err, out)
	}
}

// frameOffsets reads the offsets of [offset,ts,row] lines, checking they
// rise.
func frameOffsets(t *testing.T, out []byte) []int64 {
	t.Helper()
	var offs []int64
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var frame []json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &frame); err != nil || len(frame) != 3 {
			// A SIGKILL may cut the last line short.
			continue
		}
		o, err := strconv.ParseInt(string(frame[0]), 10, 64)
		if err != nil {
			t.Fatalf("line %q: offset: %v", sc.Text(), err)
		}
		if len(offs) > 0 && o <= offs[len(offs)-1] {
			t.Fatalf("offset %d after %d within one run", o, offs[len(offs)-1])
		}
		offs = append(offs, o)
	}
	return offs
}
