package broker

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestRecycledJobsKeepEveryRowIntact: a plain publisher's jobs, and the
// storage their rows are decoded into, are reused for later frames once
// their replies are queued. Reused too early, a later frame's bytes would
// overwrite rows still on their way to the log or to subscribers. One
// pipelined publisher (64 in flight) sends single-row frames of varying
// length, with a batch now and then, while a live subscriber reads; every
// row must reach the subscriber, and then a replay from the log, exactly
// as it was sent.
func TestRecycledJobsKeepEveryRowIntact(t *testing.T) {
	srv := startServer(t, testConfig(t))
	live, _ := mustDial(t, wsURL(srv, "/trades"))
	defer live.Close()
	p := dialPublisher(t, srv, "trades")

	const frames, window = 3000, 64
	var sent []int // the trade number of every row, in send order
	msgs := make([]string, frames)
	for i := range msgs {
		n := len(sent)
		if i%97 == 0 {
			msgs[i] = batch(n, 5)
			for k := 0; k < 5; k++ {
				sent = append(sent, n+k)
			}
			continue
		}
		// Numbers of 1 to 6 digits: rows of several lengths share the
		// recycled storage.
		msgs[i] = trade(n * (1 + i%3) * 37 % 1000000)
		sent = append(sent, n*(1+i%3)*37%1000000)
	}
	errs := make(chan error, 1)
	sem := make(chan struct{}, window)
	go func() {
		for i := 0; i < frames; i++ {
			r, err := p.reply()
			if err == nil && r.Error != "" {
				err = fmt.Errorf("frame %d answered %s: %s", i, r.Error, r.Detail)
			}
			if err != nil {
				errs <- err
				return
			}
			<-sem
		}
		errs <- nil
	}()
	// A reply that never comes fails the test rather than hanging it.
	_ = p.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	for _, m := range msgs {
		select {
		case sem <- struct{}{}:
		case err := <-errs:
			t.Fatalf("the replies stopped early: %v", err)
		}
		if err := p.send(m); err != nil {
			t.Fatal(err)
		}
	}

	check := func(what string, ws *websocket.Conn) {
		t.Helper()
		_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
		for i, n := range sent {
			f, err := readFrame(t, ws)
			if err != nil {
				t.Fatalf("%s: row %d of %d: %v", what, i, len(sent), err)
			}
			var row struct {
				EventTS int64   `json:"event_ts"`
				Symbol  string  `json:"symbol"`
				Price   float64 `json:"price"`
			}
			if err := json.Unmarshal(f.Row, &row); err != nil {
				t.Fatalf("%s: row %d: %s: %v", what, i, f.Row, err)
			}
			if f.Offset != int64(i+1) || row.EventTS != 1700000000000000+int64(n) ||
				row.Symbol != fmt.Sprintf("S%d", n%7) || row.Price != float64(n)+0.5 {
				t.Fatalf("%s: offset %d holds %s; want trade %d at offset %d", what, f.Offset, f.Row, n, i+1)
			}
		}
	}
	check("live subscriber", live)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	replay, _ := mustDial(t, wsURL(srv, "/trades?offset=1"))
	defer replay.Close()
	check("replay", replay)
}
