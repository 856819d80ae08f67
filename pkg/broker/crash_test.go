package broker

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/wire"
)

// child is a server running in a child process (this test binary, re-executed).
type child struct {
	cmd    *exec.Cmd
	addr   string
	stderr *bytes.Buffer
	done   chan struct{}
}

func startChild(t *testing.T, cfg config.Config) *child {
	t.Helper()
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	addrFile := filepath.Join(t.TempDir(), "addr")
	c := &child{stderr: &bytes.Buffer{}, done: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(os.Environ(), childEnv+"="+string(cfgJSON), childAddrEnv+"="+addrFile)
	c.cmd.Stderr = c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.done
	})
	waitFor(t, "the child server", 30*time.Second, func() bool {
		select {
		case <-c.done:
			t.Fatalf("child exited: %s", c.stderr)
		default:
		}
		b, err := os.ReadFile(addrFile)
		if err != nil {
			return false
		}
		c.addr = string(b)
		return true
	})
	return c
}

// TestKilledServerLosesNothingAnyoneSaw is I3: SIGKILL the server while
// publishers and subscribers run; after a restart every offset a publisher
// saw acknowledged, and every frame a subscriber received, is in the log.
func TestKilledServerLosesNothingAnyoneSaw(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	cfg := testConfig(t)
	cfg.Streams = cfg.Streams[:1]
	cfg.Streams[0].MaxReplay = nil
	cfg.Limits.MaxBacklog = 1 << 20
	ch := startChild(t, cfg)
	url := "ws://" + ch.addr + "/trades"

	var mu sync.Mutex
	acked := map[int64]int64{}
	seen := map[int64][]byte{}
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		ws, _ := mustDial(t, url)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				f, err := readFrame(t, ws)
				if err != nil {
					return
				}
				mu.Lock()
				seen[f.Offset] = f.Raw
				mu.Unlock()
			}
		}()
	}
	var seq atomic.Int64
	never := make(chan struct{})
	for k := 0; k < 4; k++ {
		ws, g := mustDial(t, url+"?publish")
		p := &pubConn{t: t, ws: ws, g: g}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pipeline(t, p, never, func() string {
				return batch(int(seq.Add(2)), 2)
			}, func(f string, r wire.Reply) {
				ts := eventTimes(t, f)
				mu.Lock()
				for j, o := range r.OK {
					acked[o] = ts[j]
				}
				mu.Unlock()
			})
		}()
	}
	waitFor(t, "rows acknowledged", 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) > 2000
	})
	if err := ch.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-ch.done
	wg.Wait()

	ch2 := startChild(t, cfg)
	srv := &Server{} // verifyAcked only needs the address
	addr, err := net.ResolveTCPAddr("tcp", ch2.addr)
	if err != nil {
		t.Fatal(err)
	}
	srv.addr.Store(ptrAddr(addr))
	mu.Lock()
	defer mu.Unlock()
	verifyAcked(t, srv, acked, seen)
	t.Logf("%d rows acknowledged, %d frames delivered before the kill", len(acked), len(seen))

	// And the restarted server keeps assigning offsets after them.
	ws, g := mustDial(t, "ws://"+ch2.addr+"/trades?publish")
	p := &pubConn{t: t, ws: ws, g: g}
	if r := p.roundTrip(trade(1)); r.Error != "" || r.OK[0] != g.EndOffset {
		t.Fatalf("after restart: %+v, end was %d", r, g.EndOffset)
	}
	_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(1000, ""), time.Now().Add(time.Second))
}

func ptrAddr(a net.Addr) *net.Addr { return &a }

// TestSIGTERMClosesWith1001AndExitsZero: a terminated server closes every
// connection with 1001, acknowledges what it accepted, and exits 0.
func TestSIGTERMClosesWith1001AndExitsZero(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	cfg := testConfig(t)
	ch := startChild(t, cfg)
	url := "ws://" + ch.addr + "/trades"
	sub, _ := mustDial(t, url)
	ws, g := mustDial(t, url+"?publish")
	p := &pubConn{t: t, ws: ws, g: g}
	if r := p.roundTrip(trade(1)); r.Error != "" {
		t.Fatal(r)
	}
	if _, err := readFrame(t, sub); err != nil {
		t.Fatal(err)
	}
	if err := ch.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for name, ws := range map[string]*websocket.Conn{"subscriber": sub, "publisher": ws} {
		_, _, err := ws.ReadMessage()
		if code, _ := closeOf(err); code != wire.CloseGoingAway {
			t.Errorf("%s: %v, want close 1001", name, err)
		}
	}
	select {
	case <-ch.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not exit")
	}
	if code := ch.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d: %s", code, ch.stderr)
	}
}
