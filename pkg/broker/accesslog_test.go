package broker

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/logstore"
)

// jsonLines returns the lines of a JSON log whose msg is msg, each as its
// keys and their JSON text.
func jsonLines(t *testing.T, out, msg string) []map[string]json.RawMessage {
	t.Helper()
	var got []map[string]json.RawMessage
	for _, line := range strings.Split(out, "\n") {
		if line == "" {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		if string(m["msg"]) == `"`+msg+`"` {
			got = append(got, m)
		}
	}
	return got
}

func jsonLogger(w *testkit.SyncBuffer) *log.Logger {
	return log.NewWithOptions(w, log.Options{Formatter: log.JSONFormatter, Level: log.InfoLevel})
}

// closeNormally sends a 1000 close and waits for the server's answer.
func closeNormally(t *testing.T, ws *websocket.Conn) {
	t.Helper()
	_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, _, err := ws.ReadMessage(); err != nil {
			return
		}
	}
}

// TestAccessLogWritesALinePerConnectionWithNumbersAsNumbers: with
// log.access on, a publisher, a subscriber and a refused request each get
// one line when they close, naming the stream, the role, the close code
// and who closed, the rows and the duration, the figures as JSON numbers.
func TestAccessLogWritesALinePerConnectionWithNumbersAsNumbers(t *testing.T) {
	var out testkit.SyncBuffer
	cfg := testConfig(t)
	cfg.Log.Access = true
	srv := startServer(t, cfg, Options{Logger: jsonLogger(&out)})

	p := dialPublisher(t, srv, "trades")
	if r := p.roundTrip(batch(0, 3)); r.Error != "" {
		t.Fatalf("publish: %+v", r)
	}
	if r := p.roundTrip(batch(3, 2)); r.Error != "" {
		t.Fatalf("publish: %+v", r)
	}
	closeNormally(t, p.ws)

	sub, _ := mustDial(t, wsURL(srv, "/trades?offset=2"))
	for range 4 {
		if _, err := readFrame(t, sub); err != nil {
			t.Fatalf("replay: %v", err)
		}
	}
	closeNormally(t, sub)

	if _, _, err := dial(t, wsURL(srv, "/nope")); err == nil {
		t.Fatal("a stream that does not exist was served")
	}

	var lines []map[string]json.RawMessage
	waitFor(t, "three access log lines", 10*time.Second, func() bool {
		lines = jsonLines(t, out.String(), "connection closed")
		return len(lines) >= 3
	})
	// The lines come in the order the handlers end, not the order above.
	want := map[string]map[string]string{
		"trades publisher":  {"code": `1000`, "closed_by": `"client"`, "rows": `5`, "user": `""`},
		"trades subscriber": {"code": `1000`, "closed_by": `"client"`, "rows": `4`},
		"nope subscriber":   {"code": `4404`, "closed_by": `"server"`, "rows": `0`},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d access lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for _, line := range lines {
		var stream, role string
		_ = json.Unmarshal(line["stream"], &stream)
		_ = json.Unmarshal(line["role"], &role)
		w, ok := want[stream+" "+role]
		if !ok {
			t.Errorf("an access line for %s %s:\n%s", stream, role, out.String())
			continue
		}
		delete(want, stream+" "+role)
		for k, v := range w {
			if got := string(line[k]); got != v {
				t.Errorf("%s %s: %s is %s, want %s\n%s", stream, role, k, got, v, out.String())
			}
		}
		var d float64
		if err := json.Unmarshal(line["duration_s"], &d); err != nil || d < 0 || d > 30 {
			t.Errorf("%s %s: duration_s %s is not a number of seconds", stream, role, line["duration_s"])
		}
		if !strings.HasPrefix(string(line["remote"]), `"127.0.0.1:`) {
			t.Errorf("%s %s: remote %s", stream, role, line["remote"])
		}
	}
}

// TestAccessLogIsOffByDefault: without log.access, connections that end
// write no line, whoever closes them.
func TestAccessLogIsOffByDefault(t *testing.T) {
	var out testkit.SyncBuffer
	srv := startServer(t, testConfig(t), Options{Logger: jsonLogger(&out)})
	sub, _ := mustDial(t, wsURL(srv, "/trades"))
	closeNormally(t, sub)
	second, _ := mustDial(t, wsURL(srv, "/trades"))
	go func() { // reading answers the server's close at once
		for {
			if _, _, err := second.ReadMessage(); err != nil {
				return
			}
		}
	}()
	_ = srv.Close() // ends the second with 1001, and returns once every handler has
	if lines := jsonLines(t, out.String(), "connection closed"); len(lines) != 0 {
		t.Fatalf("access lines with log.access off:\n%s", out.String())
	}
}

// TestChildLogLinesKeepTheirNumbersInServesJSONLog: a maintenance child
// logs JSON, which serve reads back and logs again; in serve's JSON log
// the child's figures are still numbers (the seal child's "rows").
func TestChildLogLinesKeepTheirNumbersInServesJSONLog(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	var out testkit.SyncBuffer
	cfg := testConfig(t)
	cfg.Maintain = maintainOf(map[logstore.Role]time.Duration{logstore.RoleSeal: 50 * time.Millisecond}, 200*time.Millisecond)
	srv := startServer(t, cfg, Options{Logger: jsonLogger(&out), Executable: streamcastExe(t)})
	p := dialPublisher(t, srv, "trades")
	if r := p.roundTrip(batch(0, 2)); r.Error != "" {
		t.Fatalf("publish: %+v", r)
	}
	var sealed []map[string]json.RawMessage
	waitFor(t, "the seal child's line in serve's log", 20*time.Second, func() bool {
		sealed = jsonLines(t, out.String(), "sealed")
		return len(sealed) > 0
	})
	if got := string(sealed[0]["rows"]); got != "2" {
		t.Errorf(`the seal child's "rows" is %s in serve's log, want the number 2:\n%s`, got, out.String())
	}
	if got := string(sealed[0]["flush"]); got != "true" && got != "false" {
		t.Errorf(`the seal child's "flush" is %s in serve's log, want a JSON boolean`, got)
	}
}
