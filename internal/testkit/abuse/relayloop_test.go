package abuse

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// reload rewrites the streams: section of the server's config to streams
// and sends SIGHUP.
func (s *server) reload(streams string) {
	s.t.Helper()
	cfg, err := os.ReadFile(s.cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	text := string(cfg)
	i := strings.Index(text, "streams:\n")
	j := strings.Index(text, "log:\n")
	if i < 0 || j < i {
		s.t.Fatalf("no streams: section before log: in\n%s", text)
	}
	text = text[:i] + "streams:\n" + streams + text[j:]
	if err := os.WriteFile(s.cfg, []byte(text), 0o644); err != nil {
		s.t.Fatal(err)
	}
	if err := syscall.Kill(s.pid, syscall.SIGHUP); err != nil {
		s.t.Fatal(err)
	}
}

// TestARelayLoopBuiltByReloadsIsRefused: server A serves x, server B
// relays it as y. A relay of y on A (z) is a chain, not a loop, and
// mirrors. Then two reloads of A make x itself a relay of y: x would
// mirror its own rows round the loop, with no writer anywhere. The relay
// that closes the loop is refused with an error naming it, and is not
// served.
func TestARelayLoopBuiltByReloadsIsRefused(t *testing.T) {
	t.Parallel() // its own server processes; see TestMain
	a := start(t, options{streams: "  - name: x\n    durable: true\n    max_replay: null\n"})
	b := start(t, options{streams: fmt.Sprintf("  - name: y\n    durable: true\n    max_replay: null\n    upstream: ws://%s/x\n", a.addr)})
	waitUntil(t, 20*time.Second, func() (bool, string) {
		st := b.statsText()
		return strings.Contains(st, `"state":"mirroring"`), "B's relay of A's x is not mirroring: " + st
	})

	// A chain: z on A relays y on B, which relays x on A.
	x := "  - name: x\n    durable: true\n    max_replay: null\n"
	z := fmt.Sprintf("  - name: z\n    durable: true\n    max_replay: null\n    upstream: ws://%s/y\n", b.addr)
	a.reload(x + z)
	waitUntil(t, 20*time.Second, func() (bool, string) {
		st := a.statsText()
		return strings.Contains(st, `"state":"mirroring"`), "A's relay z of B's y is not mirroring (a chain is no loop): " + st
	})

	// The loop: x leaves, then comes back as a relay of y.
	a.reload(z)
	waitUntil(t, 20*time.Second, func() (bool, string) {
		return strings.Contains(a.logs.String(), `stream stopped`) || !strings.Contains(a.statsText(), `"name":"x"`), "x has not stopped on A"
	})
	loopX := fmt.Sprintf("  - name: x\n    durable: true\n    max_replay: null\n    upstream: ws://%s/y\n", b.addr)
	a.reload(loopX + z)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		logs := a.logs.String() + b.logs.String()
		return strings.Contains(logs, "relay loop"), "neither server refused the loop:\nA: " + a.statsText() + "\nB: " + b.statsText()
	})
	// x, the relay that closed the loop, is not served as one.
	if st := a.statsText(); strings.Contains(st, `"upstream":"ws://`+b.addr+`/y","state":"mirroring"`) && strings.Count(st, `"state":"mirroring"`) > 1 {
		t.Errorf("A serves x as a relay of y after the loop closed: %s", st)
	}
	if !strings.Contains(a.logs.String(), "relay loop") {
		t.Errorf("A's log does not name x in the refusal:\n%s", a.logs.String())
	}
}
