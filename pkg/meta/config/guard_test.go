package config

import (
	"errors"
	"strings"
	"testing"
)

// guardedYAML is a protected stream's declaration; each case below
// changes one line of it.
const guardedYAML = `streams:
  - name: ledger
    schema: {type: object, properties: {id: {type: integer}, note: {type: string}}, required: [id, note]}
    exactly_once: true
    max_replay: null
    history_guard:
      stream_id: 5b0f4c1e-8f6a-4d2b-9a57-2f0c2d1e6b90
      known_offset: 1
      known_row: '{"id":1,"note":"a"}'
`

func TestHistoryGuardIsReadAndValidated(t *testing.T) {
	cfg, err := Parse([]byte(guardedYAML), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s := cfg.Streams[0]
	g := s.HistoryGuard
	if !s.Protected() || g == nil || g.StreamID != "5b0f4c1e-8f6a-4d2b-9a57-2f0c2d1e6b90" || g.KnownOffset != 1 || g.KnownRow != `{"id":1,"note":"a"}` {
		t.Fatalf("history_guard read as %+v", g)
	}
	// `streamcast config` prints it in a form that reads back the same.
	out, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(out, "")
	if err != nil {
		t.Fatalf("%v in\n%s", err, out)
	}
	if *back.Streams[0].HistoryGuard != *g {
		t.Fatalf("printed and read back: %+v, want %+v", back.Streams[0].HistoryGuard, g)
	}
}

func TestHistoryGuardErrorsNameTheKeyAndLine(t *testing.T) {
	cases := []struct {
		name, from, to, key, want string
	}{
		{"live-only", "exactly_once: true", "durable: false", "streams[0].history_guard", "live-only"},
		{"not a stream id", "stream_id: 5b0f4c1e-8f6a-4d2b-9a57-2f0c2d1e6b90", "stream_id: ledger-1", "streams[0].history_guard.stream_id", "is not a stream id"},
		{"offset 0", "known_offset: 1", "known_offset: 0", "streams[0].history_guard.known_offset", "known_offset is 0"},
		{"no row", `known_row: '{"id":1,"note":"a"}'`, "known_row: ''", "streams[0].history_guard.known_row", "known_row is empty"},
		{"a mapping", `known_row: '{"id":1,"note":"a"}'`, "known_row: {id: 1, note: a}", "streams[0].history_guard.known_row", "quote it"},
		{"not canonical", `known_row: '{"id":1,"note":"a"}'`, `known_row: '{"id": 1, "note": "a"}'`, "streams[0].history_guard.known_row", `give it as {"id":1,"note":"a"}`},
		{"not a row", `known_row: '{"id":1,"note":"a"}'`, `known_row: '{"id":"x","note":"a"}'`, "streams[0].history_guard.known_row", "not a row of the stream's schema"},
		{"unknown key", "known_offset: 1", "known_offset: 1\n      known_ts: 5", "streams[0].history_guard.known_ts", "unknown key"},
		{"exactly-once", "exactly_once: true", "exactly_once: false", "streams[0].exactly_once", `the check "exactly-once"`},
		{"unbounded replay", "max_replay: null", "max_replay: 100", "streams[0].max_replay", `the check "unbounded replay"`},
		{"replay left at its default", "    max_replay: null\n", "", "streams[0].max_replay", "max_replay is 100000"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(guardedYAML, tc.from, tc.to, 1)
			if doc == guardedYAML {
				t.Fatalf("the case changes nothing")
			}
			cfg, err := Load(Default(), "ledger.yaml", []byte(doc))
			if err == nil {
				err = cfg.Validate()
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Key != tc.key || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "ledger.yaml") {
				t.Fatalf("got %v (key %q); want key %s, an error containing %q and the file", err, keyOf(ce), tc.key, tc.want)
			}
		})
	}
}

func keyOf(e *Error) string {
	if e == nil {
		return ""
	}
	return e.Key
}

func TestProtectedErrorSaysWhy(t *testing.T) {
	s := DefaultStream("ledger")
	if s.Protected() || s.ProtectedError("migrate") != nil {
		t.Fatal("a stream without history_guard is protected")
	}
	s.HistoryGuard = &HistoryGuard{StreamID: "5b0f4c1e-8f6a-4d2b-9a57-2f0c2d1e6b90", KnownOffset: 1, KnownRow: "{}"}
	for cmd, why := range map[string]string{
		"migrate": "a migration starts a new log at the seam",
		"retire":  "retiring ends the stream for good",
		"retain":  "retention deletes the oldest rows",
	} {
		err := s.ProtectedError(cmd)
		if !errors.Is(err, ErrProtected) {
			t.Fatalf("%s: %v does not wrap ErrProtected", cmd, err)
		}
		for _, w := range []string{"streamcast " + cmd, `"ledger"`, why, "from offset 1", "remove history_guard"} {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("%s: %q is missing from %v", cmd, w, err)
			}
		}
	}
}
