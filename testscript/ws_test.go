package testscript_test

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"strconv"
	"time"

	"github.com/gorilla/websocket"
	"github.com/rogpeppe/go-internal/testscript"
)

// wsRaw is a raw WebSocket client for scripts, so they show the protocol as
// any client sees it, with no streamcast code on the client side. It dials
// URL, sends each line of SENDFILE (if given) as one text frame once the
// greeting has arrived, and prints every text frame it receives, one per
// line, until it has printed N frames (the greeting counts). A close from the
// server prints `close CODE REASON` and ends it early:
//
//	ws ws://$ADDR/trades?publish 3 rows.ndjson
//	ws ws://$ADDR/trades?offset=2 3
func wsRaw(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: ws URL N [SENDFILE]")
	}
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 1 {
		ts.Fatalf("ws: N %q is not a positive count", args[1])
	}
	var send [][]byte
	if len(args) == 3 {
		b, err := os.ReadFile(ts.MkAbs(args[2]))
		ts.Check(err)
		for _, line := range bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n")) {
			send = append(send, line)
		}
	}
	conn, _, err := websocket.DefaultDialer.Dial(args[0], nil)
	if err != nil {
		ts.Fatalf("ws: dial %s: %v", args[0], err)
	}
	defer conn.Close()
	out := bufio.NewWriter(ts.Stdout())
	defer out.Flush()
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	for got := 0; got < n; got++ {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				out.WriteString("close " + strconv.Itoa(ce.Code) + " " + ce.Text + "\n")
				return
			}
			ts.Fatalf("ws: after %d frames: %v", got, err)
		}
		out.Write(msg)
		out.WriteByte('\n')
		if got == 0 {
			for _, frame := range send {
				ts.Check(conn.WriteMessage(websocket.TextMessage, frame))
			}
		}
	}
	_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
}
