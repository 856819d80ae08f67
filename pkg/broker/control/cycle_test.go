package control_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/internal/testkit"
)

// TestStartStopCyclesLeakNothingWhileANeighbourIsUnderLoad starts and
// stops one registered stream over and over while a publisher and a
// subscriber keep the neighbour busy. The neighbour's subscriber sees
// every offset once, in order, and no 1001; afterwards the goroutines,
// the open files and the child processes are back where they started.
// This server runs no maintenance children (the count stays zero);
// TestStartStopCyclesLeakNoMaintenanceChildren cycles with real ones.
func TestStartStopCyclesLeakNothingWhileANeighbourIsUnderLoad(t *testing.T) {
	// The 100, locally and in CI; the race run's 30 are enough for
	// a leak to show.
	cycles := testkit.SoakCountShort(30, 100, 100)
	f := start(t)
	f.create(t, "cycled")
	// Warm up: one cycle, so what a first start allocates for good (pools,
	// the registry's connection) is in the baseline.
	f.setDesired(t, "cycled", "serving")
	f.setDesired(t, "cycled", "stopped")
	g0 := countGoroutines()
	fds0 := openFiles(t)
	kids0 := children(t)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var pubErr, subErr error
	var received int64
	sub, _, err := websocket.DefaultDialer.Dial(f.ws+"/neighbour?offset=0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := sub.ReadMessage(); err != nil { // greeting
		t.Fatal(err)
	}
	wg.Add(2)
	go func() { // the neighbour's subscriber: dense offsets from 1
		defer wg.Done()
		next := int64(1)
		for {
			_, b, err := sub.ReadMessage()
			if err != nil {
				if ctx.Err() == nil {
					subErr = fmt.Errorf("the neighbour's subscriber ended: %w", err)
				}
				return
			}
			var fr []json.RawMessage
			var off int64
			if json.Unmarshal(b, &fr) != nil || len(fr) != 3 || json.Unmarshal(fr[0], &off) != nil {
				continue // not a data frame
			}
			if off != next {
				subErr = fmt.Errorf("the neighbour's subscriber got offset %d after %d: a gap or a duplicate", off, next-1)
				return
			}
			next++
			received = next - 1
		}
	}()
	pub, _, err := websocket.DefaultDialer.Dial(f.ws+"/neighbour?publish", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := pub.ReadMessage(); err != nil {
		t.Fatal(err)
	}
	var sent int64
	go func() { // the neighbour's publisher: one row at a time, each acknowledged
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			if err := pub.WriteMessage(websocket.TextMessage, []byte(fmt.Sprintf(`{"id":%d,"sym":"n"}`, i))); err != nil {
				if ctx.Err() == nil {
					pubErr = err
				}
				return
			}
			_, b, err := pub.ReadMessage()
			if err != nil && ctx.Err() != nil {
				return // the test closed it
			}
			if err != nil || !strings.HasPrefix(string(b), `{"ok":`) {
				pubErr = fmt.Errorf("the neighbour's publisher: %s %v", b, err)
				return
			}
			sent = int64(i + 1)
		}
	}()

	for i := 0; i < cycles; i++ {
		f.setDesired(t, "cycled", "serving")
		if i%5 == 0 {
			if rep := publish(t, f.ws, "cycled", i, i+1); rep["ok"] == nil {
				t.Fatalf("cycle %d: the started stream refused a row: %v", i, rep)
			}
		}
		f.setDesired(t, "cycled", "stopped")
	}
	cancel()
	_ = pub.Close()
	_ = sub.Close()
	wg.Wait()
	if pubErr != nil || subErr != nil {
		t.Fatalf("under load: publisher %v, subscriber %v", pubErr, subErr)
	}
	if sent == 0 || received == 0 {
		t.Fatalf("the neighbour was not under load: %d sent, %d received", sent, received)
	}
	t.Logf("%d start/stop cycles; the neighbour took %d rows meanwhile", cycles, sent)

	// The connections just closed take a moment to end on the server's
	// side: wait for the counts to come back, with a cap.
	deadline := time.Now().Add(10 * time.Second)
	for {
		g, fds, kids := countGoroutines(), openFiles(t), children(t)
		if g <= g0 && fds <= fds0 && kids <= kids0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d cycles: %d goroutines (were %d), %d open files (were %d), %d children (were %d)", cycles, g, g0, fds, fds0, kids, kids0)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func countGoroutines() int {
	// Idle keep-alive connections of the test's HTTP client are the
	// client's, not the server's: drop them first.
	http.DefaultClient.CloseIdleConnections()
	return runtime.NumGoroutine()
}

func openFiles(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd here")
	}
	return len(ents)
}

// children counts the processes whose parent is this one.
func children(t *testing.T) int {
	return len(childPIDs(t, os.Getpid()))
}

// childPIDs lists the processes whose parent is ppid, read from /proc.
func childPIDs(t *testing.T, ppid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc here")
	}
	parent := strconv.Itoa(ppid)
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces, so split after ')'.
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 {
			if fs := strings.Fields(s[i+1:]); len(fs) > 1 && fs[1] == parent {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
