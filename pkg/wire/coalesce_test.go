package wire

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamcast/streamcast/internal/testkit"
)

func okServer(t *testing.T) string {
	return publishServer(t, func(i int, _ string) string { return string(AppendOK(nil, int64(i+1), 1)) })
}

func TestCoalescedFramesShareOneSocketWrite(t *testing.T) {
	const frames = 20
	for _, tc := range []struct {
		coalesce   time.Duration
		wantWrites int64
	}{
		{0, frames},    // a write per frame, nothing held
		{time.Hour, 1}, // held until Flush: one write
	} {
		t.Run("coalesce="+tc.coalesce.String(), func(t *testing.T) {
			url := okServer(t)
			ctx := ctxT(t)
			var writes atomic.Int64
			p, err := Publish(ctx, url+"/t", PublishOptions{
				DialOptions: DialOptions{Dialer: testkit.CountingDialer(&writes)},
				MaxInFlight: 64,
				Coalesce:    tc.coalesce,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			before := writes.Load() // the handshake
			var acks []*Ack
			for i := 0; i < frames; i++ {
				a, err := p.Submit(ctx, []byte(`{"x":1}`))
				if err != nil {
					t.Fatal(err)
				}
				acks = append(acks, a)
			}
			p.Flush()
			if got := writes.Load() - before; got != tc.wantWrites {
				t.Errorf("%d frames went out in %d socket writes; want %d", frames, got, tc.wantWrites)
			}
			for i, a := range acks {
				<-a.Done()
				if offs, err := a.Wait(ctx); err != nil || len(offs) != 1 || offs[0] != int64(i+1) {
					t.Fatalf("frame %d: offsets %v, %v; want [%d]", i, offs, err, i+1)
				}
			}
		})
	}
}

func TestACoalescingPublisherSendsWhatItHoldsBeforeWaitingForRoom(t *testing.T) {
	// The server answers only frames it has: a full window must not
	// wait on frames the publisher holds.
	url := okServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := Publish(ctx, url+"/t", PublishOptions{MaxInFlight: 4, Coalesce: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var acks []*Ack
	for i := 0; i < 12; i++ {
		a, err := p.Submit(ctx, []byte(`{"x":1}`))
		if err != nil {
			t.Fatalf("submit %d with a window of 4: %v (the publisher waited for room while holding the frames that would make it)", i+1, err)
		}
		acks = append(acks, a)
	}
	for i, a := range acks[:8] { // sent by the window's flushes, not by a Wait
		select {
		case <-a.Done():
		case <-ctx.Done():
			t.Fatalf("frame %d was never answered", i+1)
		}
	}
}

func TestAHeldFrameNobodyFlushesIsSentByTheTimer(t *testing.T) {
	url := okServer(t)
	ctx := ctxT(t)
	p, err := Publish(ctx, url+"/t", PublishOptions{Coalesce: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	a, err := p.Submit(ctx, []byte(`{"x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	select { // Done never flushes
	case <-a.Done():
	case <-ctx.Done():
		t.Fatal("a frame held for 10 ms was still unanswered after 10 s: nothing sent it")
	}
}

func TestCloseSendsTheHeldFramesFirst(t *testing.T) {
	url := okServer(t)
	ctx := ctxT(t)
	p, err := Publish(ctx, url+"/t", PublishOptions{Coalesce: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var acks []*Ack
	for i := 0; i < 3; i++ {
		a, err := p.Submit(ctx, []byte(`{"x":1}`))
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, a)
	}
	closeCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := p.CloseContext(closeCtx); err != nil {
		t.Fatal(err)
	}
	for i, a := range acks {
		<-a.Done()
		if _, err := a.Wait(ctx); err != nil {
			t.Errorf("frame %d: %v; Close must send held frames and wait for their replies", i+1, err)
		}
	}
}

func TestHeldBytesLeaveInOrderAheadOfOtherWrites(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(server)
		got <- b
	}()
	c := &heldConn{Conn: client, flushAfter: time.Hour}
	c.setHold(true)
	for _, s := range []string{"a1", "a2"} { // the publisher's frames
		if _, err := c.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	c.setHold(false)
	if _, err := c.Write([]byte("|pong|")); err != nil { // gorilla's control frame, from the reader
		t.Fatal(err)
	}
	c.setHold(true)
	if _, err := c.Write([]byte("b1")); err != nil {
		t.Fatal(err)
	}
	c.setHold(false)
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if b := string(<-got); b != "a1a2|pong|b1" {
		t.Errorf("the peer read %q; want the held frames first, then the control frame, then the rest: %q", b, "a1a2|pong|b1")
	}
}

func TestAFailedFlushFailsEveryLaterWrite(t *testing.T) {
	client, server := net.Pipe()
	server.Close()
	c := &heldConn{Conn: client, flushAfter: time.Hour}
	defer c.Close()
	c.setHold(true)
	if _, err := c.Write([]byte("frame")); err != nil {
		t.Fatalf("a held write failed: %v", err)
	}
	c.setHold(false)
	ferr := c.Flush()
	if !errors.Is(ferr, io.ErrClosedPipe) {
		t.Fatalf("Flush to a closed peer: %v; want %v", ferr, io.ErrClosedPipe)
	}
	c.setHold(true)
	if _, err := c.Write([]byte("next")); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("a write after the failed flush: %v; want the flush's error, not a frame held for a dead socket", err)
	}
}
