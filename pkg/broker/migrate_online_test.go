package broker

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/pkg/broker/control"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/wire"
)

// TestMigrateStreamKeepsSubscribersAndHoldsNewConnections drives
// MigrateStream with a migrate step that holds until the test lets it go
// (and migrates nothing, so the same log is opened again at the same end).
// While it holds: the publisher has been closed with 1001 stream_migrating,
// the attached subscriber is not closed, and a subscriber replaying from
// offset 1 is not greeted (the log is closed; it waits for the swap). Once
// it returns, both subscribers get the next row at the seam, on the
// connections they opened.
func TestMigrateStreamKeepsSubscribersAndHoldsNewConnections(t *testing.T) {
	srv := startServer(t, testConfig(t))
	st := srv.reg.Get("trades")
	st.storage = &srv.cfg // as a registered stream: the control API may migrate it
	sv := control.Serve{Stream: st.cfg, Schema: st.sch, Limits: st.limits, Storage: srv.cfg}

	sub, _ := mustDial(t, wsURL(srv, "/trades"))
	defer sub.Close()
	pub := dialPublisher(t, srv, "trades")
	defer pub.ws.Close()
	if r := pub.roundTrip(batch(1, 3)); r.Error != "" {
		t.Fatalf("publish: %+v", r)
	}
	for want := int64(1); want <= 3; want++ {
		if f, err := readFrame(t, sub); err != nil || f.Offset != want {
			t.Fatalf("row %d before the migration: %+v %v", want, f, err)
		}
	}

	entered, proceed := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := ctlRuntime{srv}.MigrateStream(context.Background(), sv, func(context.Context, *logstore.Log, []logstore.Option) (*logstore.Log, error) {
			close(entered)
			<-proceed
			return nil, nil
		})
		done <- err
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the migration never reached its migrate step")
	}
	if _, err := pub.reply(); err == nil {
		t.Fatal("the publisher got a reply while the stream migrates; want 1001")
	} else if code, reason := closeOf(err); code != websocket.CloseGoingAway || !strings.Contains(reason, wire.WhyStreamMigrating) {
		t.Fatalf("the publisher's close: %d %q; want 1001 %s", code, reason, wire.WhyStreamMigrating)
	}

	late, _, err := websocket.DefaultDialer.Dial(wsURL(srv, "/trades?offset=1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	greeted := make(chan []byte, 1)
	go func() {
		_, g, _ := late.ReadMessage()
		greeted <- g
	}()
	// A bounded wait for something that must not happen: the greeting
	// reads the log, which is closed until the swap.
	select {
	case g := <-greeted:
		t.Fatalf("a subscriber was greeted while the log was swapped: %s", g)
	case <-time.After(300 * time.Millisecond):
	}
	close(proceed)
	if err := <-done; err != nil {
		t.Fatalf("MigrateStream: %v", err)
	}
	var g wire.Greeting
	select {
	case b := <-greeted:
		if err := json.Unmarshal(b, &g); err != nil || g.EndOffset != 4 {
			t.Fatalf("the late subscriber's greeting: %s %v; want end_offset 4", b, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the late subscriber was never greeted after the swap")
	}
	for want := int64(1); want <= 3; want++ {
		if f, err := readFrame(t, late); err != nil || f.Offset != want {
			t.Fatalf("the late subscriber's replay, row %d: %+v %v", want, f, err)
		}
	}

	pub2 := dialPublisher(t, srv, "trades")
	defer pub2.ws.Close()
	if r := pub2.roundTrip(batch(4, 1)); r.Error != "" {
		t.Fatalf("publish after the migration: %+v", r)
	}
	for i, ws := range []*websocket.Conn{sub, late} {
		if f, err := readFrame(t, ws); err != nil || f.Offset != 4 {
			t.Fatalf("subscriber %d after the seam: %+v %v; want offset 4 on the same connection", i, f, err)
		}
	}
}
