package control

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/schema"
)

// Initialization values: whether a stream's first start may create its
// log.
const (
	OpenExisting   = "open_existing"    // the log must exist already (the default)
	CreateIfAbsent = "create_if_absent" // the first start may create it, once
)

// Declaration is a registered stream as a client declares it: what HTTP
// may set, and nothing that names a place. Storage is named by profile.
type Declaration struct {
	Schema         json.RawMessage `json:"schema"`
	StorageProfile string          `json:"storage_profile"`
	SortBy         []string        `json:"sort_by"`
	Initialization string          `json:"initialization"`
	ExactlyOnce    bool            `json:"exactly_once"`
	// MaxReplay is a count of rows, or nil for unbounded.
	MaxReplay   *int64  `json:"max_replay"`
	GroupCommit bool    `json:"group_commit"`
	Limits      *Limits `json:"limits,omitempty"`
}

// Limits are the per-stream bounds a declaration may set, the keys of a
// config file's stream's limits: (config.StreamLimits); 0 is a key left
// out, which keeps the server's.
type Limits struct {
	MaxBacklog      int `json:"max_backlog,omitempty"`
	MaxInbound      int `json:"max_inbound,omitempty"`
	MaxInFlight     int `json:"max_in_flight,omitempty"`
	MaxMessageBytes int `json:"max_message_bytes,omitempty"`
}

// Migration is the body of POST …/migrations.
type Migration struct {
	StreamID string          `json:"stream_id"`
	Schema   json.RawMessage `json:"schema"`
	SortBy   []string        `json:"sort_by"`
}

// desiredBody is the body of PUT …/desired.
type desiredBody struct {
	State string `json:"state"`
}

// errBadJSON marks a body that is not strict JSON (400); other decode
// errors are about what it says (422).
var errBadJSON = errors.New("malformed JSON")

// checkJSON refuses what encoding/json would let through silently: a key
// given twice in one object (the last would win), a number that is not
// finite as a float64, and anything after the one value. It returns an
// error wrapping errBadJSON.
func checkJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := checkValue(dec, 0); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: more than one JSON value in the body", errBadJSON)
	}
	return nil
}

// maxDepth bounds nesting, so a hostile body cannot run the checker deep.
const maxDepth = 64

func checkValue(dec *json.Decoder, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%w: nested deeper than %d", errBadJSON, maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %v", errBadJSON, err)
	}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return fmt.Errorf("%w: %v", errBadJSON, err)
				}
				k, _ := kt.(string)
				if seen[k] {
					return fmt.Errorf("%w: key %q is given twice in one object", errBadJSON, clip(k))
				}
				seen[k] = true
				if err := checkValue(dec, depth+1); err != nil {
					return err
				}
			}
		case '[':
			for dec.More() {
				if err := checkValue(dec, depth+1); err != nil {
					return err
				}
			}
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return fmt.Errorf("%w: %v", errBadJSON, err)
		}
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return fmt.Errorf("%w: the number %s is not finite", errBadJSON, clip(string(v)))
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// decodeStrict decodes b into v refusing unknown keys; b passed checkJSON.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", errBadJSON, err)
	}
	return nil
}

// ParseDeclaration decodes a declaration, filling the defaults (sort_by
// empty, open_existing, group_commit true, max_replay 100000) for keys
// left out. Unknown keys are refused.
func ParseDeclaration(b []byte) (Declaration, error) {
	if err := checkJSON(b); err != nil {
		return Declaration{}, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return Declaration{}, fmt.Errorf("%w: a declaration is a JSON object", errBadJSON)
	}
	if err := checkReplayPublished(raw); err != nil {
		return Declaration{}, err
	}
	if err := checkLimitsGiven(raw["limits"]); err != nil {
		return Declaration{}, err
	}
	if _, ok := raw["replay_published"]; ok {
		// Checked, and it holds nothing to keep: every replay here
		// reads the published table. Each value stays as it was sent
		// (the schema's key order is its column order).
		delete(raw, "replay_published")
		b, _ = json.Marshal(raw)
	}
	mr := int64(config.DefaultMaxReplay)
	d := Declaration{Initialization: OpenExisting, GroupCommit: true, MaxReplay: &mr}
	if err := decodeStrict(b, &d); err != nil {
		return Declaration{}, err
	}
	if v, ok := raw["max_replay"]; ok && string(bytes.TrimSpace(v)) == "null" {
		d.MaxReplay = nil
	}
	if d.SortBy == nil {
		d.SortBy = []string{}
	}
	return d, nil
}

// checkReplayPublished accepts replay_published: true, what every
// subscribe here does already (a replay reads each of the log's tiers,
// the published table included, down to the retention floor; max_replay
// bounds how far), and refuses false, which this server cannot honour.
func checkReplayPublished(raw map[string]json.RawMessage) error {
	v, ok := raw["replay_published"]
	if !ok {
		return nil
	}
	switch string(bytes.TrimSpace(v)) {
	case "true":
		return nil
	case "false":
		return invalidf("replay_published is false, but this server always replays from every tier of a stream's log, its published table included; " +
			"bound a replay with max_replay instead, and leave replay_published out (or give true)")
	}
	return invalidf("replay_published is %s; give true or false (a JSON boolean)", clip(string(v)))
}

// checkLimitsGiven refuses a limits object that is null, or one of whose
// bounds is null or 0: decoded as given, either would read as the key
// left out and keep the server's bound without a word.
func checkLimitsGiven(v json.RawMessage) error {
	if v == nil {
		return nil
	}
	if string(bytes.TrimSpace(v)) == "null" {
		return invalidf("limits is null; leave it out for the server's limits, or give an object of %s", strings.Join(config.StreamLimitKeys(), ", "))
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil {
		return fmt.Errorf("%w: limits is an object of %s", errBadJSON, strings.Join(config.StreamLimitKeys(), ", "))
	}
	for _, k := range config.StreamLimitKeys() {
		switch b, ok := m[k]; {
		case !ok:
		case string(bytes.TrimSpace(b)) == "null":
			return invalidf("limits.%s is null; give a positive number, or leave the key out for the server's", k)
		case string(bytes.TrimSpace(b)) == "0":
			return invalidf("limits.%s is 0; give a positive number, or leave the key out for the server's", k)
		}
	}
	return nil
}

// invalid is a declaration that parses but cannot be served (422).
type invalid struct{ msg string }

func (e *invalid) Error() string { return e.msg }

func invalidf(format string, a ...any) error { return &invalid{fmt.Sprintf(format, a...)} }

// Check validates d against the config: its schema compiles, sort_by names
// distinct columns, the profile exists, the bounds are in range. It
// returns the compiled schema.
func (d *Declaration) Check(cfg *config.Config) (*schema.Schema, error) {
	if len(bytes.TrimSpace(d.Schema)) == 0 || string(bytes.TrimSpace(d.Schema)) == "null" {
		return nil, invalidf("schema is required: give the stream's JSON Schema")
	}
	if d.StorageProfile == "" {
		return nil, invalidf("storage_profile is required: name one of the server's profiles (%s)", strings.Join(cfg.Control.ProfileNames(), ", "))
	}
	if _, ok := cfg.Control.Profiles[d.StorageProfile]; !ok {
		return nil, invalidf("storage_profile %q is not one of the server's profiles (%s)", clip(d.StorageProfile), strings.Join(cfg.Control.ProfileNames(), ", "))
	}
	sch, err := schema.Compile(d.Schema)
	if err != nil {
		return nil, invalidf("schema: %v", err)
	}
	if err := checkSortBy(sch, d.SortBy); err != nil {
		return nil, err
	}
	if d.Initialization != OpenExisting && d.Initialization != CreateIfAbsent {
		return nil, invalidf("initialization %q is not %s or %s", clip(d.Initialization), OpenExisting, CreateIfAbsent)
	}
	if d.MaxReplay != nil && *d.MaxReplay < 0 {
		return nil, invalidf("max_replay is %d; give a count of rows ≥ 0, or null for unbounded", *d.MaxReplay)
	}
	// Checked as a config file's stream's own limits: are.
	if err := d.Limits.config().Check("limits", cfg.Limits); err != nil {
		return nil, invalidf("%v", err)
	}
	return sch, nil
}

// config is l as a stream's limits: in the config file; a 0 (a key left
// out: ParseDeclaration refuses one given as 0) keeps the server's.
func (l *Limits) config() *config.StreamLimits {
	if l == nil {
		return nil
	}
	given := func(v int) *int {
		if v == 0 {
			return nil
		}
		return &v
	}
	return &config.StreamLimits{MaxBacklog: given(l.MaxBacklog), MaxInbound: given(l.MaxInbound), MaxInFlight: given(l.MaxInFlight), MaxMessageBytes: given(l.MaxMessageBytes)}
}

func checkSortBy(sch *schema.Schema, sortBy []string) error {
	for i, col := range sortBy {
		if _, ok := sch.ColumnIndex(col); !ok {
			return invalidf("sort_by names %q, which is not a column of the schema", clip(col))
		}
		if slices.Contains(sortBy[:i], col) {
			return invalidf("sort_by names %q twice", clip(col))
		}
	}
	return nil
}

// Stream returns the stream as the server serves it: durable, with the
// declaration's settings and the profile's replication.
func (d *Declaration) Stream(name string, cfg *config.Config) config.Stream {
	s := config.DefaultStream(name)
	s.Schema = config.RawJSON(d.Schema)
	s.SortBy = slices.Clone(d.SortBy)
	s.ExactlyOnce = d.ExactlyOnce
	s.GroupCommit = d.GroupCommit
	s.MaxReplay = d.MaxReplay
	if p, ok := cfg.Control.Profiles[d.StorageProfile]; ok {
		s.Replicate = p.Replicate
	}
	return s
}

// StreamLimits lays d's limits over the server's.
func (d *Declaration) StreamLimits(server config.Limits) config.Limits {
	return d.Limits.config().Over(server)
}

// sameButSchema reports whether a and b differ at most in schema and
// sort_by: a change a stream need not be stopped for (the migration
// moves to it).
func sameButSchema(a, b Declaration) bool {
	a.Schema, b.Schema = nil, nil
	a.SortBy, b.SortBy = nil, nil
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// equalDecl reports whether a and b declare the same stream.
func equalDecl(a, b Declaration) bool {
	a.Schema, b.Schema = compactJSON(a.Schema), compactJSON(b.Schema)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

func compactJSON(b json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}
