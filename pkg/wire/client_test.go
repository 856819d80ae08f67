package wire

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"

	"github.com/streamcast/streamcast/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func greeting(end int64, replay *Range) string {
	g := Greeting{Stream: "trades", EndOffset: end, Replay: replay, Durable: true}
	return string(g.AppendJSON(nil))
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestSubscribeReturnsARefusalBeforeTheGreeting(t *testing.T) {
	url := testkit.FakeServer(t, func(t *testing.T, c *websocket.Conn, r *http.Request) {
		if r.URL.Query().Get("offset") != "100" {
			t.Errorf("query %q", r.URL.RawQuery)
		}
		e := &NotReplayable{Why: WhyTooOld, Offset: 100, EndOffset: 250000, MaxReplay: 100000, Earliest: Null}
		testkit.CloseWithCode(c, e.Code(), e.Reason())
	})
	_, err := Subscribe(ctxT(t), url+"/trades", SubscribeOptions{Offset: At(100)})
	var nr *NotReplayable
	if !errors.As(err, &nr) || nr.Why != WhyTooOld || nr.Offset != 100 || nr.EndOffset != 250000 || nr.MaxReplay != 100000 {
		t.Fatalf("got %v", err)
	}
	if !strings.Contains(err.Error(), "resume from offset 150000") {
		t.Errorf("sentence: %s", err)
	}
}

func TestSubscribeNamesTheMissingStream(t *testing.T) {
	url := testkit.FakeServer(t, func(t *testing.T, c *websocket.Conn, r *http.Request) {
		e := &StreamNotFound{Serves: []string{"demo", "trades"}}
		testkit.CloseWithCode(c, e.Code(), e.Reason())
	})
	_, err := Subscribe(ctxT(t), url+"/tardes", SubscribeOptions{})
	var nf *StreamNotFound
	if !errors.As(err, &nf) || nf.Stream != "tardes" || len(nf.Serves) != 2 {
		t.Fatalf("got %v", err)
	}
}

func TestSubscribeRefusesAnOffsetGivenTwice(t *testing.T) {
	_, err := Subscribe(ctxT(t), "ws://127.0.0.1:1/t?offset=3", SubscribeOptions{Offset: At(4)})
	if err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("got %v", err)
	}
}

func TestSubscribeRefusesANonGreeting(t *testing.T) {
	url := testkit.FakeServer(t, func(t *testing.T, c *websocket.Conn, r *http.Request) {
		testkit.SendText(t, c, `{"hello":"world"}`)
		testkit.CloseWithCode(c, CloseNormal, "")
	})
	_, err := Subscribe(ctxT(t), url+"/t", SubscribeOptions{})
	var pe *ProtocolError
	if !errors.As(err, &pe) {
		t.Fatalf("got %v", err)
	}
}

func TestRecvDeliversFramesThenTheTypedClose(t *testing.T) {
	url := testkit.FakeServer(t, func(t *testing.T, c *websocket.Conn, r *http.Request) {
		testkit.SendText(t, c, greeting(13, &Range{10, 13}))
		testkit.SendText(t, c, `[10,100,{"a":1}]`)
		testkit.SendText(t, c, `[12,101,{"a":2}]`)
		e := &TooSlow{Offset: 13, Behind: 8192}
		testkit.CloseWithCode(c, e.Code(), e.Reason())
	})
	ctx := ctxT(t)
	s, err := Subscribe(ctx, url+"/trades?offset=10", SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if g := s.Greeting(); g.Replay == nil || *g.Replay != (Range{10, 13}) || g.Stream != "trades" {
		t.Fatalf("greeting %+v", g)
	}
	for _, want := range []int64{10, 12} {
		m, err := s.Recv(ctx)
		if err != nil || m.Offset != want {
			t.Fatalf("Recv = %v, %v; want offset %d", m, err, want)
		}
	}
	_, err = s.Recv(ctx)
	var ts *TooSlow
	if !errors.As(err, &ts) || ts.Offset != 13 || ts.Behind != 8192 {
		t.Fatalf("got %v", err)
	}
	if _, err2 := s.Recv(ctx); err2 != err {
		t.Errorf("a second Recv returned %v, want the same terminal error", err2)
	}
	if s.Resume() != 13 {
		t.Errorf("Resume = %d", s.Resume())
	}
}

func TestRecvFillsTheResumeOffsetOfATrimmedTooSlow(t *testing.T) {
	url := testkit.FakeServer(t, func(t *testing.T, c *websocket.Conn, r *http.Request) {
		testkit.SendText(t, c, greeting(5, nil))
		testkit.SendText(t, c, `[5,1,{}]`)
		testkit.SendText(t, c, `[6,1,{}]`)
		testkit.CloseWithCode(c, CloseTooSlow, `{"error":"too_slow"}`)
	})
	ctx := ctxT(t)
	s, err := Subscribe(ctx, url+"/t", SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var last error
	for last == nil {
		_, last = s.Recv(ctx)
	}
	var ts *TooSlow
	if !errors.As(last, &ts) || ts.Offset != 7 {
		t.Fatalf("got %#v", last)
	}
}

func TestRecvRefusesOffsetsThatDoNotIncrease(t *testing.T) {
	cases := map[string][]string{
		"repeated":    {`[10,1,{}]`, `[10,1,{}]`},
		"backwards":   {`[11,1,{}]`, `[10,1,{}]`},
		"below start": {`[9,1,{}]`},
		"not a frame": {`[10,1]`},
	}
	for name, frames := range cases {
		t.Run(name, func(t *testing.T) {
			url := testkit.FakeServer(t, func(t *testing.T, c *websocket.Conn, r *http.Request) {
				testkit.SendText(t, c, greeting(20, &Range{10, 20}))
				for _, f := range frames {
					testkit.SendText(t, c, f)
				}
				testkit.CloseWithCode(c, CloseNormal, "")
			})
			ctx := ctxT(t)
			s, err := Subscribe(ctx, url+"/t", SubscribeOptions{Offset: At(10)})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for {
				_, err = s.Recv(ctx)
				if err != nil {
					break
				}
			}
			var pe *ProtocolError
			if !errors.As(err, &pe) {
				t.Fatalf("got %v, want a *ProtocolError", err)
			}
		})
	}
}

func TestRecvEndsCleanlyOn1000AndResumablyOn1001(t *testing.T) {
	for _, code := range []int{CloseNormal, CloseGoingAway} {
		url := testkit.FakeServer(t, func(t *testing.T, c *websocket.Conn, r *http.Request) {
			testkit.SendText(t, c, greeting(3, nil))
			testkit.SendText(t, c, `[3,1,{"a":null}]`)
			testkit.CloseWithCode(c, code, "server shutting down")
		})
		ctx := ctxT(t)
		s, err := Subscribe(ctx, url+"/t", SubscribeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(ctx); err != nil {
			t.Fatal(err)
		}
		_, err = s.Recv(ctx)
		if code == CloseNormal && err != io.EOF {
			t.Errorf("1000: got %v, want io.EOF", err)
		}
		var ga *GoingAway
		if code == CloseGoingAway && (!errors.As(err, &ga) || ga.Offset != 4) {
			t.Errorf("1001: got %#v", err)
		}
		s.Close()
	}
}

func TestRecvReturnsWhenItsContextEnds(t *testing.T) {
	release := make(chan struct{})
	url := testkit.FakeServer(t, func(t *testing.T, c *websocket.Conn, r *http.Request) {
		testkit.SendText(t, c, greeting(0, nil))
		<-release
	})
	defer close(release)
	s, err := Subscribe(ctxT(t), url+"/t", SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.Recv(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
}

func TestAnEndedPerCallContextDoesNotBreakTheNextRecv(t *testing.T) {
	url := testkit.FakeServer(t, func(t *testing.T, c *websocket.Conn, r *http.Request) {
		testkit.SendText(t, c, greeting(0, nil))
		testkit.SendText(t, c, `[0,1,{}]`)
		time.Sleep(50 * time.Millisecond)
		testkit.SendText(t, c, `[1,1,{}]`)
		testkit.CloseWithCode(c, CloseNormal, "")
	})
	s, err := Subscribe(ctxT(t), url+"/t", SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < 2; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m, err := s.Recv(ctx)
		cancel()
		if err != nil || m.Offset != int64(i) {
			t.Fatalf("Recv %d = %v, %v", i, m, err)
		}
	}
}

func TestCloseUnblocksARecv(t *testing.T) {
	release := make(chan struct{})
	url := testkit.FakeServer(t, func(t *testing.T, c *websocket.Conn, r *http.Request) {
		testkit.SendText(t, c, greeting(0, nil))
		<-release // no frame ever comes: only Close can end the Recv
	})
	defer close(release)
	s, err := Subscribe(ctxT(t), url+"/t", SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	recvCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := s.Recv(recvCtx)
		done <- err
	}()
	// Close must run while Recv waits in the read, not before it starts (a
	// Close before Recv also yields ErrClosed and would prove nothing). Recv
	// holds readMu for as long as it reads, so a failed TryLock is the
	// observed sign that it is in; the server sends nothing, so it is
	// blocked there.
	waitUntil(t, "Recv to start reading", func() bool {
		if s.readMu.TryLock() {
			s.readMu.Unlock()
			return false
		}
		return true
	})
	select {
	case err := <-done:
		t.Fatalf("Recv returned %v before Close, with nothing to read", err)
	default:
	}
	s.Close()
	select {
	case err := <-done:
		if err != ErrClosed {
			t.Fatalf("Recv blocked when Close ran returned %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Recv is still blocked 10 s after Close")
	}
}

// waitUntil polls cond until it holds, failing the test after 5 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestDecodeTypesPlainRows(t *testing.T) {
	m := Message{Offset: 1, Row: []byte(`{"i":12,"f":1.5,"g":85565.0,"s":"x","n":null,"o":{"k":[1,2.5]}}`)}
	row, err := m.Decode()
	if err != nil {
		t.Fatal(err)
	}
	if row["i"] != int64(12) || row["f"] != 1.5 || row["g"] != 85565.0 || row["s"] != "x" || row["n"] != nil {
		t.Errorf("row %#v", row)
	}
	if l := row["o"].(map[string]any)["k"].([]any); l[0] != int64(1) || l[1] != 2.5 {
		t.Errorf("nested %#v", l)
	}
	var v struct{ I int }
	if err := m.Unmarshal(&v); err != nil || v.I != 12 {
		t.Errorf("Unmarshal %v %v", v, err)
	}
}

// publishServer answers each publish frame with reply(frame), in order.
func publishServer(t *testing.T, reply func(i int, frame string) string) string {
	return testkit.FakeServer(t, func(t *testing.T, c *websocket.Conn, r *http.Request) {
		if _, ok := r.URL.Query()["publish"]; !ok {
			t.Errorf("publisher URL %q lacks publish", r.URL.RawQuery)
		}
		testkit.SendText(t, c, `{"streamcast":4,"stream":"t","end_offset":0,"replay":null,"durable":true}`)
		for i := 0; ; i++ {
			_, data, err := c.ReadMessage()
			if err != nil {
				return
			}
			testkit.SendText(t, c, reply(i, string(data)))
		}
	})
}

func TestPublisherMatchesPipelinedRepliesInOrder(t *testing.T) {
	// Coalescing frames for an hour leaves the window's room and Wait
	// as the only flushes: every frame must still be answered, in order.
	for _, co := range []time.Duration{0, time.Hour} {
		t.Run("coalesce="+co.String(), func(t *testing.T) { testPipelinedReplies(t, co) })
	}
}

func testPipelinedReplies(t *testing.T, coalesce time.Duration) {
	url := publishServer(t, func(i int, frame string) string {
		if strings.HasPrefix(frame, "[") {
			n, _ := countElements([]byte(frame))
			return string(AppendOK(nil, int64(i*1000), n))
		}
		if strings.Contains(frame, "bad") {
			return string((&Rejected{Detail: `column "x": bad`}).AppendReply(nil))
		}
		return string(AppendOK(nil, int64(i*1000), 1))
	})
	ctx := ctxT(t)
	p, err := Publish(ctx, url+"/t", PublishOptions{MaxInFlight: 4, Coalesce: coalesce})
	if err != nil {
		t.Fatal(err)
	}
	var acks []*Ack
	for i := 0; i < 50; i++ {
		var a *Ack
		switch {
		case i%10 == 3:
			a, err = p.Submit(ctx, []byte(`{"x":"bad"}`))
		case i%10 == 5:
			a, err = p.SubmitBatch(ctx, [][]byte{[]byte(`{"x":1}`), []byte(`{"x":2}`)})
		default:
			a, err = p.Submit(ctx, []byte(`{"x":1}`))
		}
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, a)
	}
	for i, a := range acks {
		offs, err := a.Wait(ctx)
		switch {
		case i%10 == 3:
			var rj *Rejected
			if !errors.As(err, &rj) {
				t.Errorf("frame %d: got %v, want Rejected", i, err)
			}
		case i%10 == 5:
			if err != nil || len(offs) != 2 || offs[0] != int64(i*1000) || offs[1] != int64(i*1000+1) {
				t.Errorf("frame %d: %v %v", i, offs, err)
			}
		default:
			if err != nil || len(offs) != 1 || offs[0] != int64(i*1000) {
				t.Errorf("frame %d: %v %v", i, offs, err)
			}
		}
	}
	off, err := p.Send(ctx, []byte(`{"x":9}`))
	if err != nil || off != 50000 {
		t.Errorf("Send = %d, %v", off, err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := p.Submit(ctx, []byte(`{}`)); err != ErrClosed {
		t.Errorf("Submit after Close: %v", err)
	}
}

func TestPublisherCloseWaitsForOwedReplies(t *testing.T) {
	url := testkit.FakeServer(t, func(t *testing.T, c *websocket.Conn, r *http.Request) {
		testkit.SendText(t, c, `{"streamcast":4,"stream":"t","end_offset":0}`)
		var n int
		for n < 3 {
			if _, _, err := c.ReadMessage(); err != nil {
				return
			}
			n++
		}
		time.Sleep(100 * time.Millisecond) // a slow commit
		for i := 0; i < n; i++ {
			testkit.SendText(t, c, string(AppendOK(nil, int64(i), 1)))
		}
		for {
			if _, _, err := c.ReadMessage(); err != nil {
				return
			}
		}
	})
	ctx := ctxT(t)
	p, err := Publish(ctx, url+"/t", PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var acks []*Ack
	for i := 0; i < 3; i++ {
		a, err := p.Submit(ctx, []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, a)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for i, a := range acks {
		select {
		case <-a.Done():
		default:
			t.Fatalf("ack %d still open after Close", i)
		}
		if offs, err := a.Wait(ctx); err != nil || offs[0] != int64(i) {
			t.Errorf("ack %d: %v %v", i, offs, err)
		}
	}
}

func TestPublisherFailsOwedAcksWhenTheServerGoesAway(t *testing.T) {
	url := testkit.FakeServer(t, func(t *testing.T, c *websocket.Conn, r *http.Request) {
		testkit.SendText(t, c, `{"streamcast":4,"stream":"t","end_offset":0}`)
		if _, _, err := c.ReadMessage(); err != nil {
			return
		}
		testkit.CloseWithCode(c, CloseGoingAway, "server shutting down")
	})
	ctx := ctxT(t)
	p, err := Publish(ctx, url+"/t", PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := p.Submit(ctx, []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Wait(ctx)
	var ga *GoingAway
	if !errors.As(err, &ga) {
		t.Fatalf("got %v", err)
	}
	if err := p.Close(); !errors.As(err, &ga) {
		t.Errorf("Close = %v, want the GoingAway that ended the connection", err)
	}
}

func TestExactlyOncePublisherNumbersFramesFromTheMark(t *testing.T) {
	var mu sync.Mutex
	var frames []string
	url := testkit.FakeServer(t, func(t *testing.T, c *websocket.Conn, r *http.Request) {
		if r.URL.Query().Get("publisher") != "loader" {
			t.Errorf("query %q", r.URL.RawQuery)
		}
		g := Greeting{Stream: "t", EndOffset: 0, Publisher: &PublisherMark{ID: "loader", LastSeq: 41, LastOffset: 7}}
		testkit.SendText(t, c, string(g.AppendJSON(nil)))
		for i := 0; ; i++ {
			_, data, err := c.ReadMessage()
			if err != nil {
				return
			}
			mu.Lock()
			frames = append(frames, string(data))
			mu.Unlock()
			var f []json.RawMessage
			_ = json.Unmarshal(data, &f)
			n := 1
			if strings.HasPrefix(string(f[1]), "[") {
				n, _ = countElements(f[1])
			}
			testkit.SendText(t, c, string(AppendOK(nil, int64(100+i*10), n)))
		}
	})
	ctx := ctxT(t)
	p, err := Publish(ctx, url+"/t", PublishOptions{Publisher: "loader"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(ctx, []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.SendBatch(ctx, [][]byte{[]byte(`{"a":2}`), []byte(`{"a":3}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(ctx, []byte(`{"a":4}`)); err != nil {
		t.Fatal(err)
	}
	p.Close()
	mu.Lock()
	defer mu.Unlock()
	want := []string{`[42,{"a":1}]`, `[43,[{"a":2},{"a":3}]]`, `[45,{"a":4}]`}
	if strings.Join(frames, " ") != strings.Join(want, " ") {
		t.Errorf("frames %v, want %v", frames, want)
	}
}
