//go:build linux

package lifecycle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/logstore/replica"
	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
	"github.com/streamcast/streamcast/pkg/wire"
)

// TestLostRootComesBackFromTheReplicaOutsideIt is the disaster a replica
// exists for, end to end with the real command: serve replicates a stream
// to a destination outside its root while a publisher's rows are
// acknowledged; once the replica has shipped through some offset S, serve
// is SIGKILLed and the whole data directory removed. `streamcast restore`
// with the same config brings back every acknowledged row below S at its
// offset, loses only rows at or above S (the replication lag), and the
// stream resumes 2^20 past the replica's end, past every offset the lost
// writer acknowledged.
func TestLostRootComesBackFromTheReplicaOutsideIt(t *testing.T) {
	exe := testkit.Streamcast(t)
	dir := t.TempDir()
	root := filepath.Join(dir, "data")
	cfg := filepath.Join(dir, "streamcast.yaml")
	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
root: %s
published: %s
maintain: false
replicate:
  destination: %s
  sync_interval: 50ms
streams:
  - name: trades
    replicate: true
    schema: {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
`, root, filepath.Join(dir, "backup", "published"), filepath.Join(dir, "backup", "replica"))
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}

	srv := startServe(t, exe, cfg)
	replicator := srv.childPID(t, "replicate")
	pub := startPublisher(t, srv.url+"/trades")
	// S: every offset below it is in the replica, by the replicator's own
	// report after a round, while rows keep arriving.
	logDir := filepath.Join(root, "trades", "trades")
	var s int64
	waitUntil(t, "the replica to ship past offset 30 under load", func() bool {
		p, ok, err := replica.ReadProgress(logDir)
		if err != nil {
			t.Fatal(err)
		}
		s = p.ShippedEnd
		return ok && s > 30
	})
	srv.kill(t)
	acked := pub.stop()
	waitUntil(t, "the replicate child to die with serve", func() bool {
		return errors.Is(syscall.Kill(replicator, 0), syscall.ESRCH)
	})
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}

	out, err := exec.Command(exe, "restore", "--config", cfg, "trades").Output()
	if err != nil {
		t.Fatalf("streamcast restore: %v\n%s", err, stderrOf(err))
	}
	var r struct {
		From      string `json:"from"`
		ReplicaAt string `json:"replica_at"`
		R         int64  `json:"replica_end"`
		Resume    int64  `json:"resume"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("restore printed %q: %v", out, err)
	}
	var top int64
	for off := range acked {
		top = max(top, off)
	}
	switch {
	case r.From != lifecycle.FromReplica || r.ReplicaAt != filepath.Join(dir, "backup", "replica", "trades", "trades"):
		t.Fatalf("restored %s, want from the replica under the destination", out)
	case r.R < s:
		t.Fatalf("the replica ends at %d, but the replicator had shipped every offset below %d", r.R, s)
	case r.Resume != r.R+lifecycle.FenceReplica || r.Resume <= top:
		t.Fatalf("the stream resumes at %d; want the replica's end %d + 2^20, past %d, the last offset acknowledged", r.Resume, r.R, top)
	}

	srv = startServe(t, exe, cfg)
	got := readStream(t, srv.url+"/trades")
	lost := 0
	for off, row := range acked {
		switch back, ok := got[off]; {
		case ok && back != row:
			t.Fatalf("offset %d was acknowledged as %s, the restored stream holds %s", off, row, back)
		case !ok && off < s:
			t.Fatalf("offset %d was acknowledged and shipped (below %d), and is gone after the restore", off, s)
		case !ok:
			lost++
		}
	}
	for off := range got {
		if off >= r.R {
			t.Fatalf("the restored stream holds offset %d, at or past the replica's end %d", off, r.R)
		}
	}
	p, err := wire.Publish(context.Background(), srv.url+"/trades", wire.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if off, err := p.Send(context.Background(), []byte(`{"id":0}`)); err != nil || off != r.Resume {
		t.Fatalf("the first row after the restore went to offset %d (%v), want %d", off, err, r.Resume)
	}
	t.Logf("%d rows acknowledged up to offset %d; the replica had shipped below %d and held below %d; %d rows lost, all at or above %d",
		len(acked), top, s, r.R, lost, s)
}

// serveProc is `streamcast serve` in a process of its own.
type serveProc struct {
	cmd    *exec.Cmd
	url    string // ws://host:port
	stderr testkit.SyncBuffer
	done   chan struct{}
}

func startServe(t *testing.T, exe, cfg string) *serveProc {
	t.Helper()
	addr := filepath.Join(t.TempDir(), "addr")
	p := &serveProc{done: make(chan struct{})}
	p.cmd = exec.Command(exe, "serve", "--config", cfg, "--addr-file", addr)
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.kill(t) })
	waitUntil(t, "serve to listen", func() bool {
		select {
		case <-p.done:
			t.Fatalf("serve exited: %s", p.stderr.String())
		default:
		}
		b, err := os.ReadFile(addr)
		p.url = "ws://" + string(bytes.TrimSpace(b))
		return err == nil && len(b) > 0
	})
	return p
}

// kill SIGKILLs serve and waits for it to be gone.
func (p *serveProc) kill(t *testing.T) {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// childPID is the pid of serve's child of role, from /stats.
func (p *serveProc) childPID(t *testing.T, role string) int {
	t.Helper()
	var pid int
	waitUntil(t, "serve's "+role+" child to be ready", func() bool {
		var st struct {
			Children []struct {
				Role  string `json:"role"`
				PID   *int   `json:"pid"`
				Ready bool   `json:"ready"`
			} `json:"children"`
		}
		resp, err := http.Get("http" + p.url[len("ws"):] + "/stats")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			return false
		}
		for _, c := range st.Children {
			if c.Role == role && c.Ready && c.PID != nil {
				pid = *c.PID
				return true
			}
		}
		return false
	})
	return pid
}

// publisher sends single-row frames until stopped, noting each
// acknowledged offset and its row.
type publisher struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	acked  map[int64]string
}

func startPublisher(t *testing.T, url string) *publisher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p, err := wire.Publish(ctx, url, wire.PublishOptions{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	pub := &publisher{cancel: cancel, acked: map[int64]string{}}
	pub.wg.Add(1)
	go func() {
		defer pub.wg.Done()
		defer p.Close()
		for i := 1; ; i++ {
			row := fmt.Sprintf(`{"id":%d}`, i)
			off, err := p.Send(ctx, []byte(row))
			if err != nil {
				return // serve is gone, or the test stopped it
			}
			pub.mu.Lock()
			pub.acked[off] = row
			pub.mu.Unlock()
		}
	}()
	t.Cleanup(func() { pub.stop() })
	return pub
}

// stop ends the publisher and returns what it was acknowledged.
func (p *publisher) stop() map[int64]string {
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acked
}

// readStream reads every row the stream holds, by offset.
func readStream(t *testing.T, url string) map[int64]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := wire.Subscribe(ctx, url, wire.SubscribeOptions{FromEarliest: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out := map[int64]string{}
	g := s.Greeting()
	if g.Replay == nil {
		return out
	}
	for {
		m, err := s.Recv(ctx)
		if err != nil {
			t.Fatalf("read the stream back (up to %d): %v", g.Replay.End, err)
		}
		if _, dup := out[m.Offset]; dup {
			t.Fatalf("offset %d shown twice", m.Offset)
		}
		out[m.Offset] = string(m.Row)
		if m.Offset >= g.Replay.End-1 {
			return out
		}
	}
}

// waitUntil polls cond until it holds, failing the test after a minute.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s after a minute", what)
		}
	}
}

// stderrOf is what a failed command printed on stderr.
func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}
