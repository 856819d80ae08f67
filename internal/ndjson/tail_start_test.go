package ndjson

import (
	"bytes"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/pkg/wire"

	"github.com/streamcast/streamcast/internal/testkit"
)

// freeAddr returns a 127.0.0.1 address with nothing listening on it.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// serveAt runs script for each connection to a server listening on addr
// until the test ends.
func serveAt(t *testing.T, addr string, script func(c *websocket.Conn)) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s again: %v", addr, err)
	}
	var wg sync.WaitGroup
	up := websocket.Upgrader{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		wg.Add(1)
		defer wg.Done()
		defer c.Close()
		script(c)
	})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-served
		wg.Wait()
	})
}

func (l *recordLogger) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.records {
		if r.msg == msg {
			n++
		}
	}
	return n
}

func TestTailReconnectWaitsForAServerThatIsDownAtStart(t *testing.T) {
	addr := freeAddr(t)
	url := "ws://" + addr + "/trades"

	// Without --reconnect, a server that is down is an error at once.
	if _, err := Tail(ctxT(t), url, &bytes.Buffer{}, DefaultTailOptions()); err == nil {
		t.Fatal("a tail of a server that is down succeeded without --reconnect")
	}

	log := &recordLogger{}
	var out bytes.Buffer
	type result struct {
		res TailResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := Tail(ctxT(t), url, &out, tailDefaults(TailOptions{Offset: wire.At(1), Reconnect: true, Logger: log,
			MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}))
		done <- result{res, err}
	}()
	// The tail keeps trying, and says so each time, while nothing listens.
	waitUntil(t, "three logged connection attempts", func() bool { return log.count("connect failed; retrying") >= 3 })
	select {
	case r := <-done:
		t.Fatalf("the tail gave up while the server was down: %+v, %v", r.res, r.err)
	default:
	}

	serveAt(t, addr, func(c *websocket.Conn) {
		testkit.SendText(t, c, greeting(4, &wire.Range{Start: 1, End: 4}))
		for o := int64(1); o < 4; o++ {
			testkit.SendText(t, c, dataFrame(o))
		}
		testkit.CloseWithCode(c, wire.CloseNormal, "")
	})
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := dataFrame(1) + "\n" + dataFrame(2) + "\n" + dataFrame(3) + "\n"
	if out.String() != want || r.res.Rows != 3 || r.res.Frontier != 4 {
		t.Errorf("result %+v, output\n%s\nwant rows 1 to 3 once", r.res, out.String())
	}
}
