package broker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/charmbracelet/log"

	"github.com/streamcast/streamcast/pkg/broker/backlog"
	"github.com/streamcast/streamcast/pkg/wire"
)

// directPair is a wsConn over the server side of a real loopback TCP
// connection whose buffers are as small as the kernel allows, and the peer
// side, which reads only when the test says so.
func directPair(t *testing.T) (*wsConn, *net.TCPConn, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err := net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	// Small buffers on both sides, so a few KiB of frames the peer does
	// not read leave the kernel unable to take a direct write whole.
	if err := nc.(*net.TCPConn).SetWriteBuffer(4096); err != nil {
		t.Fatal(err)
	}
	if err := peer.SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	srv := &Server{logger: log.New(io.Discard), reclaim: backlog.NewReclaimer(log.New(io.Discard))}
	ctx, cancel := context.WithCancel(context.Background())
	c := &wsConn{srv: srv, nc: nc, raw: nc, ctx: ctx, cancel: cancel}
	rc, err := nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	c.rc = rc
	var written atomic.Int64
	c.afterWrite = func(n int) { written.Add(int64(n)) }
	t.Cleanup(c.finish)
	return c, peer, &written
}

// TestDirectWriteKeepsOrderWhenTheKernelTakesPart: a deliverer's direct
// write of replies to a peer that is not reading meets a full socket; the
// frames the kernel did not take, the one it took part of among them, go
// out ahead of the frames queued meanwhile, each exactly once, and the
// writer counts every frame as written once the peer reads.
func TestDirectWriteKeepsOrderWhenTheKernelTakesPart(t *testing.T) {
	if !directWrites {
		t.Skip("no direct writes on this platform")
	}
	c, peer, written := directPair(t)
	var want bytes.Buffer
	frames := func(from, n int) [][]byte {
		var out [][]byte
		for i := from; i < from+n; i++ {
			f := []byte(fmt.Sprintf("{\"frame\":%d,\"pad\":\"%s\"}\n", i, bytes.Repeat([]byte("x"), 200)))
			want.Write(f)
			out = append(out, f)
		}
		return out
	}
	// One direct write far larger than the socket takes, and frames queued
	// by others while the deliverer holds the socket, as the reader's
	// refusals are.
	batch := frames(0, 300)
	if !c.enqueueOrClaim(batch) {
		t.Fatal("an idle connection's socket was not claimable")
	}
	if c.enqueueOrClaim(frames(300, 10)) {
		t.Fatal("claimed a socket already claimed")
	}
	c.enqueue(frames(310, 10)...)
	var iov iovecs
	c.writeClaimed(batch, &iov)
	sent := 320
	c.mu.Lock()
	partial := c.writing // a tail went to a writer: the kernel did not take it all
	c.mu.Unlock()
	if !partial {
		t.Fatal("the kernel took the whole direct write; the test never reached a partial one")
	}
	got := make([]byte, want.Len())
	_ = peer.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(peer, got); err != nil {
		t.Fatalf("read %d bytes: %v", want.Len(), err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		i := 0
		for i < len(got) && got[i] == want.Bytes()[i] {
			i++
		}
		t.Fatalf("the peer read the frames out of order or altered: first difference at byte %d of %d", i, len(got))
	}
	deadline := time.Now().Add(10 * time.Second)
	for written.Load() != int64(sent) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // the writer counts after its write returns
	}
	if n := written.Load(); n != int64(sent) {
		t.Fatalf("%d frames counted as written, want %d", n, sent)
	}
}

// TestRepliesBehindABusyWriterGoOutOnce: when a publisher's writer is busy
// as its commit group is answered, the deliverer cannot claim the socket and
// its replies queue behind the writer's frames, once. The writer is held
// inside the write of a refusal (answered by the reader) while the next
// frame commits and is answered; then every reply arrives in send order,
// none twice.
func TestRepliesBehindABusyWriterGoOutOnce(t *testing.T) {
	var armed atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	srv := startServerWith(t, testConfig(t), Options{}, func(s *Server) {
		s.opts.writeHook = func(c *wsConn, n int) {
			if c.pub == nil || !armed.CompareAndSwap(true, false) {
				return
			}
			close(entered)
			select {
			case <-release:
			case <-time.After(30 * time.Second):
			}
		}
	})
	p := dialPublisher(t, srv, "trades")
	armed.Store(true)
	if err := p.send(`[]`); err != nil { // refused by the reader: its writer starts
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the refusal's write never started")
	}
	if err := p.send(trade(1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the frame committed and answered behind the held writer", 10*time.Second, func() bool {
		e := streamStats(srv, "trades").EndOffset
		return e != nil && *e == 2 && inboxRows(srv, "trades") == 0
	})
	close(release)
	if err := p.send(trade(2)); err != nil {
		t.Fatal(err)
	}
	want := []wire.Reply{{Error: wire.ReplyBadFrame}, {OK: []int64{1}}, {OK: []int64{2}}}
	for i, w := range want {
		r, err := p.reply()
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if r.Error != w.Error || !equalInts(r.OK, w.OK) {
			t.Fatalf("reply %d: %+v, want error %q ok %v", i, r, w.Error, w.OK)
		}
	}
}
