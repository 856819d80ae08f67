package broker

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAClaimedWriteNeverWaitsOnAFullSocket: whoever answers a publisher
// (the committer or the deliverer) writes its replies itself when the
// connection's writer is idle (wsConn.writeClaimed). That write must
// return at once when the peer does not read, handing what the kernel did
// not take to a writer goroutine, or one publisher that stops reading
// would stop every answer on its stream. The batch here is far larger
// than the socket's buffers, so the kernel takes only part of it, often
// cutting a frame in two; once the peer reads, every byte must arrive
// once and in order, the cut frame's rest included.
//
// A control frame queued while the claimed write runs (a pong) must then
// wait for the cut frame's rest: written between its halves, it would
// corrupt the stream.
//
// Both ways writevNow writes are covered: an iovec per frame for a large
// batch, and one copied buffer for a commit group's few replies, written
// into a socket already filled.
func TestAClaimedWriteNeverWaitsOnAFullSocket(t *testing.T) {
	for _, tc := range []struct {
		name    string
		bytes   int  // the batch's size
		prefill bool // fill the socket before the claimed write
	}{
		{"an iovec per frame", 4 << 20, false},
		{"frames copied into one buffer", maxCoalesced - 1000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claimedWriteOnAFullSocket(t, tc.bytes, tc.prefill)
		})
	}
}

func claimedWriteOnAFullSocket(t *testing.T, size int, prefill bool) {
	ctrl := []byte("a control frame\n")
	var (
		claimed atomic.Pointer[wsConn]
		once    sync.Once
	)
	srv := startServerWith(t, testConfig(t), Options{}, func(s *Server) {
		s.opts.writeHook = func(c *wsConn, n int, _ bool) {
			if c == claimed.Load() {
				once.Do(func() { c.enqueueCtrl(ctrl) }) // inside the claimed write, before its writev
			}
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.(*net.TCPConn).SetWriteBuffer(1) // the kernel's smallest
	c := &wsConn{srv: srv, nc: nc, raw: nc, direct: rawConnOf(nc)}
	if c.direct == nil {
		t.Skip("this platform has no writes that do not wait; every write goes through the writer")
	}

	var want bytes.Buffer
	if prefill {
		// Until the kernel takes no more: the peer reads these first.
		chunk := bytes.Repeat([]byte{'x'}, 64<<10)
		_ = nc.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
		for {
			n, err := nc.Write(chunk)
			want.Write(chunk[:n])
			if err != nil {
				break
			}
		}
		_ = nc.SetWriteDeadline(time.Time{})
	}
	prefix := want.Len()
	// 999-byte frames: a frame boundary seldom meets the point where the
	// kernel stops taking bytes.
	var frames [][]byte
	for i := 0; want.Len()-prefix+999 <= size; i++ {
		f := fmt.Appendf(nil, "%-998d\n", i)
		frames = append(frames, f)
		want.Write(f)
	}
	claimed.Store(c)
	if !c.enqueueClaiming(frames...) {
		t.Fatal("an idle connection's socket was not claimed")
	}
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		c.writeClaimed()
	}()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("the claimed write waited for a peer that does not read")
	}
	c.mu.Lock()
	left, skip := c.out.Len(), c.headWritten
	c.mu.Unlock()
	t.Logf("after %d bytes filled the socket, the claimed write left %d of %d frames to the writer, %d bytes of the first already sent",
		prefix, left, len(frames), skip)
	if skip == 0 {
		t.Log("the kernel stopped at a frame boundary this time: the control frame's order is not exercised")
	}

	got := make([]byte, want.Len()+len(ctrl))
	_ = peer.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(peer, got); err != nil {
		t.Fatalf("reading what was written: %v", err)
	}
	at := bytes.Index(got, ctrl)
	if at < prefix || (at > prefix && got[at-1] != '\n') {
		t.Fatalf("the control frame is at byte %d, not between two data frames", at)
	}
	got = append(got[:at:at], got[at+len(ctrl):]...)
	if i := firstDifference(got, want.Bytes()); i >= 0 {
		t.Fatalf("byte %d of %d differs: got %q, want %q (a frame the kernel cut was not resumed where it stopped)",
			i, want.Len(), got[i:min(i+20, len(got))], want.Bytes()[i:min(i+20, want.Len())])
	}
	c.wg.Wait() // the writer that took over has ended with its queue empty
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writing || c.out.Len() != 0 {
		t.Fatalf("after the peer read everything: writing=%v, %d frames queued", c.writing, c.out.Len())
	}
}

func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}
