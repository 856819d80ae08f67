package wiretest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamcast/streamcast/internal/testkit/brokertest"
	"github.com/streamcast/streamcast/pkg/broker"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/wire"
)

// serve runs a broker with a durable "trades" stream (the demo schema) and a
// live-only "live" one until the test ends, and returns its ws:// base URL.
func serve(t *testing.T, tweak func(*config.Config)) string {
	t.Helper()
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.Root = t.TempDir()
	cfg.Maintain.Enabled = false // no seal/publish children: the rows stay in the buffer
	trades := config.DefaultStream("trades")
	trades.Schema = config.RawJSON(config.DemoSchema)
	live := config.DefaultStream("live")
	live.Durable = false
	live.Schema = config.RawJSON(config.DemoSchema)
	cfg.Streams = []config.Stream{trades, live}
	if tweak != nil {
		tweak(&cfg)
	}
	return brokertest.Start(t, cfg)
}

func trade(i int) []byte {
	return fmt.Appendf(nil, `{"event_ts":%d,"symbol":"BTC-USD","price":%d.5,"amount":0.015,"side":%d}`, 1790038800000000+i, 85000+i, i%2)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestPublishedRowsReachSubscribersWithTheirAckedOffsets(t *testing.T) {
	base := serve(t, nil)
	ctx := ctxT(t)
	live, err := wire.Subscribe(ctx, base+"/trades", wire.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	p, err := wire.Publish(ctx, base+"/trades", wire.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Greeting().Durable || p.Greeting().Replay != nil || len(p.Greeting().Schema) == 0 {
		t.Errorf("publisher greeting %+v", p.Greeting())
	}
	var acked []int64
	var acks []*wire.Ack
	for i := 0; i < 100; i++ {
		a, err := p.Submit(ctx, trade(i))
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, a)
	}
	for _, a := range acks {
		offs, err := a.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		acked = append(acked, offs...)
	}
	batch, err := p.SendBatch(ctx, [][]byte{trade(100), trade(101), trade(102)})
	if err != nil {
		t.Fatal(err)
	}
	acked = append(acked, batch...)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for i, want := range acked {
		m, err := live.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.Offset != want {
			t.Fatalf("frame %d has offset %d, acked %d", i, m.Offset, want)
		}
		row, err := m.Decode()
		if err != nil {
			t.Fatal(err)
		}
		if row["event_ts"] != int64(1790038800000000+i) || row["side"] != int64(i%2) || row["price"] != float64(85000+i)+0.5 {
			t.Fatalf("row %d decoded as %#v", i, row)
		}
	}

	// A replay from the first offset gets the same frames.
	replay, err := wire.Subscribe(ctx, base+"/trades", wire.SubscribeOptions{FromEarliest: true})
	if err != nil {
		t.Fatal(err)
	}
	defer replay.Close()
	if r := replay.Greeting().Replay; r == nil || r.End != acked[len(acked)-1]+1 {
		t.Fatalf("replay window %+v", r)
	}
	for _, want := range acked {
		m, err := replay.Recv(ctx)
		if err != nil || m.Offset != want {
			t.Fatalf("replayed %v %v, want %d", m, err, want)
		}
	}
}

func TestRefusalsArriveAsTypedErrors(t *testing.T) {
	base := serve(t, nil)
	ctx := ctxT(t)
	p, err := wire.Publish(ctx, base+"/trades", wire.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(ctx, trade(0)); err != nil {
		t.Fatal(err)
	}
	_, err = p.Send(ctx, []byte(`{"event_ts":1,"symbol":"x","price":"high","amount":1.0,"side":0}`))
	var rj *wire.Rejected
	if !errors.As(err, &rj) || !strings.Contains(rj.Detail, "price") {
		t.Errorf("a bad row: %v", err)
	}
	if _, err := p.Send(ctx, trade(1)); err != nil {
		t.Errorf("the connection should survive a rejected row: %v", err)
	}
	p.Close()

	cases := []struct {
		url  string
		opts wire.SubscribeOptions
		want any
		why  string
	}{
		{url: "/nope", want: &wire.StreamNotFound{}},
		{url: "/trades?bogus=1", want: &wire.BadRequest{}},
		{url: "/trades", opts: wire.SubscribeOptions{Offset: wire.At(1 << 40)}, want: &wire.NotReplayable{}, why: wire.WhyAhead},
		{url: "/live", opts: wire.SubscribeOptions{Offset: wire.At(0)}, want: &wire.NotReplayable{}, why: wire.WhyNotDurable},
	}
	for _, c := range cases {
		_, err := wire.Subscribe(ctx, base+c.url, c.opts)
		switch want := c.want.(type) {
		case *wire.StreamNotFound:
			if !errors.As(err, &want) || want.Stream != "nope" || len(want.Serves) != 2 {
				t.Errorf("%s: %v", c.url, err)
			}
		case *wire.BadRequest:
			if !errors.As(err, &want) || !strings.Contains(want.Detail, "bogus") {
				t.Errorf("%s: %v", c.url, err)
			}
		case *wire.NotReplayable:
			if !errors.As(err, &want) || want.Why != c.why {
				t.Errorf("%s %+v: %v", c.url, c.opts, err)
			}
		}
	}
}

func TestASlowSubscriberResumesWhereTooSlowSays(t *testing.T) {
	base := serve(t, func(c *config.Config) { c.Limits.MaxBacklog = 16 })
	ctx := ctxT(t)
	slow, err := wire.Subscribe(ctx, base+"/trades", wire.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	p, err := wire.Publish(ctx, base+"/trades", wire.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var rows [][]byte
	for i := 0; i < 500; i++ {
		rows = append(rows, trade(i))
	}
	offs, err := p.SendBatch(ctx, rows)
	if err != nil {
		t.Fatal(err)
	}
	// Everything before the 4429 is a contiguous prefix; resuming at its
	// offset delivers the rest.
	var got []int64
	var slowErr *wire.TooSlow
	for {
		m, err := slow.Recv(ctx)
		if errors.As(err, &slowErr) {
			break
		}
		if err != nil {
			t.Fatalf("after %d frames: %v", len(got), err)
		}
		got = append(got, m.Offset)
	}
	if slowErr.Offset != offs[0]+int64(len(got)) {
		t.Fatalf("TooSlow at %d after %d frames from %d", slowErr.Offset, len(got), offs[0])
	}
	rest, err := wire.Subscribe(ctx, base+"/trades", wire.SubscribeOptions{Offset: wire.At(slowErr.Offset)})
	if err != nil {
		t.Fatal(err)
	}
	defer rest.Close()
	for len(got) < len(offs) {
		m, err := rest.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m.Offset)
	}
	for i := range offs {
		if got[i] != offs[i] {
			t.Fatalf("frame %d: offset %d, want %d", i, got[i], offs[i])
		}
	}
}

func TestSubscribersEndWithGoingAwayWhenTheServerStops(t *testing.T) {
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.Root = t.TempDir()
	cfg.Maintain.Enabled = false
	trades := config.DefaultStream("trades")
	trades.Schema = config.RawJSON(config.DemoSchema)
	cfg.Streams = []config.Stream{trades}
	srv, err := broker.New(cfg, broker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Run(context.Background()) }()
	<-srv.Ready()
	ctx := ctxT(t)
	s, err := wire.Subscribe(ctx, "ws://"+srv.Addr().String()+"/trades", wire.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = srv.Close()
	}()
	_, err = s.Recv(ctx)
	var ga *wire.GoingAway
	if !errors.As(err, &ga) || ga.Offset != s.Greeting().EndOffset {
		t.Errorf("got %v", err)
	}
	wg.Wait()
	if err := <-errc; err != nil {
		t.Error(err)
	}
	if _, err := s.Recv(ctx); err == io.EOF || err == nil {
		t.Errorf("Recv after the end: %v", err)
	}
}
