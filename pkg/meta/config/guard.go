package config

import (
	"bytes"
	"errors"
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/schema"
)

// Guard returns the stream's history_guard as meta checks it (meta.Guard);
// nil when the stream has none.
func (s Stream) Guard() *meta.Guard {
	g := s.HistoryGuard
	if g == nil {
		return nil
	}
	return &meta.Guard{Stream: s.Name, StreamID: g.StreamID, KnownOffset: g.KnownOffset, KnownRow: string(g.KnownRow)}
}

// HistoryGuard is a stream's history_guard: what its consumers know of
// its history, which serve checks before it admits traffic to the stream.
// An application that rebuilds its state by reading a stream from offset
// 1 depends on offset 1 still being there and unchanged; the guard turns
// a root swapped, restored or rewritten under it into a refusal at start
// instead of a silently different state.
type HistoryGuard struct {
	// StreamID is the stream's identity, as its greeting carries it
	// (stream_id): a stream of the same name made afresh has another.
	StreamID string `yaml:"stream_id"`
	// KnownOffset is the offset of a row the consumers hold.
	KnownOffset int64 `yaml:"known_offset"`
	// KnownRow is that row, byte for byte as a data frame carries it: the
	// canonical JSON of the row, columns in schema order. In YAML it is a
	// string (quote it: known_row: '{"id":1}'); a mapping is refused,
	// since turning YAML into JSON could not promise the same bytes.
	KnownRow RowText `yaml:"known_row"`
}

// RowText is a row's JSON text, kept exactly as written.
type RowText string

// UnmarshalYAML takes a string only.
func (r *RowText) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		return fmt.Errorf(`line %d: known_row is the row's JSON as a string, exactly as a data frame carries it; quote it, as in known_row: '{"id":1,"name":"a"}'`, n.Line)
	}
	*r = RowText(n.Value)
	return nil
}

// ErrProtected is wrapped by ProtectedError's refusals.
var ErrProtected = errors.New("the stream is protected by a history_guard")

// Protected reports whether the stream has a history_guard: its consumers
// rebuild from offset 1, so its history must stay whole and unchanged.
func (s Stream) Protected() bool { return s.HistoryGuard != nil }

// ProtectedError returns the refusal of command (such as "migrate",
// "retire" or "retain"), which would end, split or shorten the history of
// the protected stream s; nil when s is not protected. It wraps
// ErrProtected.
func (s Stream) ProtectedError(command string) error {
	if !s.Protected() {
		return nil
	}
	why := "it would change the stream's history"
	switch command {
	case "migrate":
		why = "a migration starts a new log at the seam, and serve then answers every offset below the seam with evicted, so offset 1 could no longer be read"
	case "retire":
		why = "retiring ends the stream for good: its log is fenced and takes no more rows"
	case "retain":
		why = "retention deletes the oldest rows, offset 1 first"
	}
	return fmt.Errorf("streamcast %s refuses stream %q: %w, and %s. The guard's consumers rebuild their state by reading the stream from offset 1, "+
		"so its history must stay whole and unchanged. If they no longer depend on that, remove history_guard from the stream's declaration in the config and run the command again",
		command, s.Name, ErrProtected, why)
}

// validateGuard checks a history_guard against the rest of the stream's
// declaration (key is its key, such as streams[0]; sch its compiled
// schema). The checks that need nothing but the config are made here,
// with the file and line; serve makes the others against the stream's
// metadata and log.
func (s *Stream) validateGuard(key, label string, sch *schema.Schema) error {
	g := s.HistoryGuard
	if g == nil {
		return nil
	}
	gk := key + ".history_guard"
	switch {
	case !s.Durable:
		return keyErrorf(gk, "%s has a history_guard but is live-only (durable: false), so it keeps no history to guard; make it durable or remove history_guard", label)
	case !isUUID(g.StreamID):
		return keyErrorf(gk+".stream_id", "%s: history_guard.stream_id %q is not a stream id; give the stream_id its greeting carries (a UUID such as 5b0f4c1e-8f6a-4d2b-9a57-2f0c2d1e6b90)", label, g.StreamID)
	case g.KnownOffset < 1:
		return keyErrorf(gk+".known_offset", "%s: history_guard.known_offset is %d; give the offset of a row the consumers hold (1 or more)", label, g.KnownOffset)
	case g.KnownRow == "":
		return keyErrorf(gk+".known_row", "%s: history_guard.known_row is empty; give the row at known_offset exactly as a data frame carries it", label)
	// A protected stream's consumers rebuild from offset 1, once per
	// row: a retried publish appended twice, or a replay cut short,
	// would rebuild another state.
	case !s.ExactlyOnce:
		return keyErrorf(key+".exactly_once", `%s has a history_guard, so it must pass the check "exactly-once", but exactly_once is false: a publisher that retries after a lost acknowledgement would append its rows twice, and consumers rebuilding from offset 1 would apply them twice; set exactly_once: true`, label)
	case s.MaxReplay != nil:
		return keyErrorf(key+".max_replay", `%s has a history_guard, so it must pass the check "unbounded replay", but max_replay is %d: a consumer rebuilding from offset 1 would be refused once the stream holds more rows; set max_replay: null`, label, *s.MaxReplay)
	}
	canon, err := sch.AppendCanonical(nil, []byte(g.KnownRow))
	if err != nil {
		return keyError(gk+".known_row", fmt.Errorf("%s: history_guard.known_row is not a row of the stream's schema, so no stored row can equal it: %w", label, err))
	}
	if !bytes.Equal(canon, []byte(g.KnownRow)) {
		return keyErrorf(gk+".known_row", "%s: history_guard.known_row is not in the canonical form a data frame carries, so no stored row can be byte-identical to it; give it as %s", label, canon)
	}
	return nil
}

// isUUID reports whether id is spelt as a UUID: 32 hex digits in groups of
// 8-4-4-4-12.
func isUUID(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f', 'A' <= c && c <= 'F':
		default:
			return false
		}
	}
	return true
}
