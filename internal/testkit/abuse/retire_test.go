package abuse

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestArrivalsDuringARetirementAreToldToRetry registers a stream, serves
// it, and retires it through the control API while subscribers keep
// arriving. The retirement stops the stream and serves it again for
// replay; no arrival in between may be told that the stream does not
// exist (4404, which clients take as final): they get 1001 with why
// stream_retiring, and reconnect.
func TestArrivalsDuringARetirementAreToldToRetry(t *testing.T) {
	t.Parallel() // its own server process; see TestMain
	s := startControl(t, false, false)
	create := s.do(t, "", http.MethodPut, "/control/v1/streams/r.one", ctlDecl(0), "*")
	s.waitOperation(t, create)
	serving := s.do(t, "", http.MethodPut, "/control/v1/streams/r.one/desired", `{"state":"serving"}`, create.hdr.Get("ETag"))
	s.waitOperation(t, serving)
	acked := publishTo(t, s.server, "/r.one?publish", 20)

	var stop atomic.Bool
	var mu sync.Mutex
	outcomes := map[string]int{}
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				outcome := arrive(s.server, "/r.one?offset=1")
				mu.Lock()
				outcomes[outcome]++
				mu.Unlock()
			}
		}()
	}
	retire := s.do(t, "", http.MethodPut, "/control/v1/streams/r.one/desired", `{"state":"retired"}`, serving.hdr.Get("ETag"))
	s.waitOperation(t, retire)
	stop.Store(true)
	wg.Wait()
	t.Logf("arrivals while the stream was retired: %v", outcomes)
	if n := outcomes["4404"]; n > 0 {
		t.Errorf("%d arrivals were told the stream does not exist (4404) during its retirement", n)
	}
	if outcomes["1001 stream_retiring"] == 0 {
		t.Errorf("no arrival fell between the stop and the start (outcomes %v); the test did not test the gap", outcomes)
	}
	if acked != 20 {
		t.Errorf("%d of 20 rows acknowledged before the retirement", acked)
	}
}

// arrive subscribes to path and reports how it went: "greeting", or the
// close code (with its why for a 1001).
func arrive(s *server, path string) string {
	ws, _, err := dialer(0).Dial(s.url(path), nil)
	if err != nil {
		return "dial: " + err.Error()
	}
	defer ws.Close()
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, msg, err := ws.ReadMessage()
	if err == nil && strings.Contains(string(msg), "end_offset") {
		return "greeting"
	}
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		if ce.Code == websocket.CloseGoingAway {
			var r struct {
				Why string `json:"why"`
			}
			_ = json.Unmarshal([]byte(ce.Text), &r)
			return "1001 " + r.Why
		}
		return fmt.Sprint(ce.Code)
	}
	return fmt.Sprintf("other: %v %.60s", err, msg)
}

// publishTo publishes n rows {"id": i} on path, one frame, and returns
// how many were acknowledged.
func publishTo(t testing.TB, s *server, path string, n int) int {
	t.Helper()
	ws, _ := subscribe(t, s, path, 0)
	defer ws.Close()
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d}`, i)
	}
	b.WriteByte(']')
	if err := ws.WriteMessage(websocket.TextMessage, []byte(b.String())); err != nil {
		t.Fatal(err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, msg, err := ws.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		OK []*int64 `json:"ok"`
	}
	_ = json.Unmarshal(msg, &r)
	acked := 0
	for _, o := range r.OK {
		if o != nil {
			acked++
		}
	}
	return acked
}
