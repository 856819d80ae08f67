//go:build unix

package testscript_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"syscall"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/streamcast/streamcast/pkg/broker"
)

// platformCmds are the script commands only unix has: signals to serve.
func platformCmds() map[string]func(ts *testscript.TestScript, neg bool, args []string) {
	return map[string]func(ts *testscript.TestScript, neg bool, args []string){
		"signal":    signalServer,
		"waitstats": waitStats,
	}
}

// signalServer sends a signal to the serve process listening at ADDR,
// found through its /stats (testscript's kill knows only INT and KILL):
//
//	signal HUP $ADDR
func signalServer(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: signal HUP|TERM|USR1 ADDR")
	}
	sig, ok := map[string]syscall.Signal{"HUP": syscall.SIGHUP, "TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1}[args[0]]
	if !ok {
		ts.Fatalf("signal: unknown signal %s", args[0])
	}
	body, err := getStats(args[1])
	ts.Check(err)
	var st broker.Stats
	ts.Check(json.Unmarshal(body, &st))
	if st.Process.PID <= 0 {
		ts.Fatalf("signal: /stats at %s names no pid", args[1])
	}
	ts.Check(syscall.Kill(st.Process.PID, sig))
}

// waitStats waits (up to 30 s) until the /stats document of the server at
// ADDR matches REGEX:
//
//	waitstats $ADDR '"name":"orders"'
func waitStats(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: [!] waitstats ADDR REGEX")
	}
	re, err := regexp.Compile(args[1])
	ts.Check(err)
	deadline := time.Now().Add(30 * time.Second)
	var last []byte
	for time.Now().Before(deadline) {
		if body, err := getStats(args[0]); err == nil {
			last = body
			if re.Match(body) != neg {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	ts.Fatalf("waitstats: /stats did not come to %smatch %s within 30s; last: %s", map[bool]string{true: "not "}[neg], args[1], last)
}

func getStats(addr string) ([]byte, error) {
	resp, err := http.Get("http://" + addr + "/stats")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /stats: %s", resp.Status)
	}
	return io.ReadAll(resp.Body)
}
