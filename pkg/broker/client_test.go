package broker

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/wire"
)

// TestGoClientSeesTypedRefusals drives the server through pkg/wire's client:
// each refusal comes back as its typed error with the server's numbers.
func TestGoClientSeesTypedRefusals(t *testing.T) {
	cfg := testConfig(t)
	mr := int64(3)
	cfg.Streams[0].MaxReplay = &mr
	srv := startServer(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	base := "ws://" + srv.Addr().String()

	pub, err := wire.Publish(ctx, base+"/trades", wire.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	for i := 0; i < 10; i++ {
		if _, err := pub.Send(ctx, []byte(trade(i))); err != nil {
			t.Fatal(err)
		}
	} // end 11
	var rej *wire.Rejected
	if _, err := pub.Send(ctx, []byte(`{"event_ts":1}`)); !errors.As(err, &rej) {
		t.Fatalf("missing columns: %v, want *wire.Rejected", err)
	}
	if offs, err := pub.SendBatch(ctx, [][]byte{[]byte(trade(1)), []byte(trade(2))}); err != nil || offs[0] != 11 || offs[1] != 12 {
		t.Fatalf("batch after a rejection: %v %v", offs, err)
	}

	sub := func(url string, opts wire.SubscribeOptions) error {
		s, err := wire.Subscribe(ctx, url, opts)
		if err == nil {
			s.Close()
		}
		return err
	}
	var nr *wire.NotReplayable
	if err := sub(base+"/trades", wire.SubscribeOptions{Offset: wire.At(14)}); !errors.As(err, &nr) || nr.Why != wire.WhyAhead || nr.EndOffset != 13 {
		t.Errorf("ahead: %v", err)
	}
	if err := sub(base+"/trades", wire.SubscribeOptions{Offset: wire.At(2)}); !errors.As(err, &nr) || nr.Why != wire.WhyTooOld || nr.MaxReplay != 3 {
		t.Errorf("too_old: %v", err)
	}
	if err := sub(base+"/live", wire.SubscribeOptions{Offset: wire.At(1)}); !errors.As(err, &nr) || nr.Why != wire.WhyNotDurable {
		t.Errorf("not_durable: %v", err)
	}
	var nf *wire.StreamNotFound
	if err := sub(base+"/nope", wire.SubscribeOptions{}); !errors.As(err, &nf) || len(nf.Serves) != 3 {
		t.Errorf("no such stream: %v", err)
	}
	var br *wire.BadRequest
	if err := sub(base+"/trades", wire.SubscribeOptions{Where: json.RawMessage(`{"nope":1}`)}); !errors.As(err, &br) {
		t.Errorf("where on an unknown column: %v", err)
	}
	var eo *wire.ExactlyOnceUnavailable
	if _, err := wire.Publish(ctx, base+"/trades", wire.PublishOptions{Publisher: "p1"}); !errors.As(err, &eo) || eo.Why != "stream" {
		t.Errorf("exactly-once: %v", err)
	}

	// A resume within max_replay replays, then goes live.
	s, err := wire.Subscribe(ctx, base+"/trades", wire.SubscribeOptions{Offset: wire.At(11)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := pub.Send(ctx, []byte(trade(3))); err != nil {
		t.Fatal(err)
	}
	for want := int64(11); want <= 13; want++ {
		m, err := s.Recv(ctx)
		if err != nil || m.Offset != want {
			t.Fatalf("recv: %+v %v, want offset %d", m, err, want)
		}
	}
}
