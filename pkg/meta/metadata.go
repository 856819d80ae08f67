package meta

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/streamcast/streamcast/pkg/schema"
)

// Format is the metadata format this build writes and reads. A version
// with a higher format was written by a newer streamcast and is refused
// (never rewritten), so a field this build does not know is never dropped
// by an older writer: a change an older reader must not ignore bumps it.
const Format = 1

// LogState is where a log stands in its stream's life.
type LogState string

const (
	// Live is the stream's current log: the one serve appends to.
	Live LogState = "live"
	// Sealed is a log a migrate closed: every row is published, it takes
	// no more rows, and a later log continues at its end offset.
	Sealed LogState = "sealed"
	// Retired is the last log of a retired stream: read-only, its end is
	// the stream's end.
	Retired LogState = "retired"
)

// Metadata is one version of a stream's metadata: its identity, its logs
// oldest first, every column type it ever declared, its retirement and
// retention, and any multi-step operation under way. Versions are
// immutable once written (Store.Commit); a change is a new version
// derived from the current one (Clone, edit, Commit).
//
// It is JSON with snake_case keys; an example (format 1):
//
//	{"format":1,"version":3,"stream":"trades",
//	 "stream_id":"5b0f4c1e-8f6a-4d2b-9a57-2f0c2d1e6b90",
//	 "logs":[{"name":"trades","log_id":"…","schema":{…},"sort_by":[],
//	          "location":"s3://bucket/tables/trades/trades",
//	          "system_columns":["streamcast_offset","streamcast_ts"],
//	          "start_offset":1,"end_offset":null,"first_ts":null,"last_ts":null,
//	          "stats":{},"state":"live"}],
//	 "columns":{"price":"float64","sym":"utf8"},
//	 "retirement":null,
//	 "retention":{"max_age":null,"floor":null,"pending_deletions":[]},
//	 "intent":null}
type Metadata struct {
	// Format is the metadata format (Format).
	Format int `json:"format"`
	// Version is the version number N of vN.metadata.json this was read
	// from or written as; 0 for metadata never written. Commit sets it.
	Version int `json:"version"`
	// Stream is the stream's name.
	Stream string `json:"stream"`
	// StreamID is the stream's identity, a random UUID (version 4) minted
	// once, when the stream's first metadata is written, and never again
	// (I8).
	StreamID string `json:"stream_id"`
	// Logs are the stream's logs, oldest first; the last is the current
	// one (Current).
	Logs []Log `json:"logs"`
	// Columns maps every column name the stream ever declared, in any
	// log, to its type (ColumnType): a column's type never changes, not
	// even after it was removed and is added back.
	Columns map[string]string `json:"columns"`
	// Retirement is set once the stream is retired; nil while it takes
	// rows.
	Retirement *Retirement `json:"retirement"`
	// Retention is the stream's retention window and floor.
	Retention Retention `json:"retention"`
	// Intent is a multi-step operation under way (a migrate, a retire, a
	// retention deletion), recorded before its first step so that a rerun
	// after a crash finishes it; nil when none is.
	Intent *Intent `json:"intent"`
	// Restores are the restores of the stream, oldest first; absent when
	// it was never restored.
	Restores []Restore `json:"restores,omitempty"`
}

// Log describes one log of a stream.
type Log struct {
	// Name is the log's name: LogName(stream, n).
	Name string `json:"name"`
	// LogID is the id the log stores in its buffer.db (and stamps on its
	// published table): it tells this log from another created under the
	// same name. "" when unknown.
	LogID string `json:"log_id"`
	// Schema is the stream's declared JSON Schema for this log; null for
	// a stream without a schema.
	Schema json.RawMessage `json:"schema"`
	// SortBy names the columns the log's files are sorted by.
	SortBy []string `json:"sort_by"`
	// Location is the URI of the log's published Iceberg table: an
	// s3://… URL or a file://… URL.
	Location string `json:"location"`
	// SystemColumns are the columns the published table has beside the
	// declared ones.
	SystemColumns []string `json:"system_columns"`
	// StartOffset is the log's first offset.
	StartOffset int64 `json:"start_offset"`
	// EndOffset is the offset after the log's last row, once the log is
	// sealed or retired; nil while it is live (its end moves).
	EndOffset *int64 `json:"end_offset"`
	// FirstTS and LastTS bound the streamcast_ts (µs) of the log's rows
	// at or above the floor, when known; nil otherwise. RollUp fills them
	// from the tier records when a lifecycle step commits a version (a
	// file straddling the floor counts whole, so they err wide).
	FirstTS *int64 `json:"first_ts"`
	LastTS  *int64 `json:"last_ts"`
	// Stats are per-column statistics rolled up from the log's file
	// records (RollUp), for pruning whole logs: empty while some rows are
	// only in the buffer, which keeps none. A column's bounds are null when
	// some file lacks them, its null count when some file predates null
	// counts; a column with neither is left out.
	Stats map[string]ColumnStats `json:"stats"`
	// State is live, sealed or retired.
	State LogState `json:"state"`
	// Holes are the offset ranges of the log skipped on purpose: a
	// restore resumed past a fence there, so no row was or will ever be
	// at those offsets. Replay skips them and max_replay never counts
	// them. Absent when there are none.
	Holes []Hole `json:"holes,omitempty"`
}

// Hole is a range of offsets [From, To) a log skipped on purpose, why and
// when (µs since the epoch, UTC).
type Hole struct {
	From int64  `json:"from"`
	To   int64  `json:"to"`
	Why  string `json:"why"`
	At   int64  `json:"at"`
}

// Restore records one restore of the stream: when (µs since the epoch,
// UTC), into which log, from what ("replica": the WAL replica and the
// published table; "table": the published table alone), and the hole it
// left.
type Restore struct {
	At   int64  `json:"at"`
	Log  string `json:"log"`
	From string `json:"from"`
	Hole Hole   `json:"hole"`
}

// ColumnStats are one column's statistics over a whole log.
type ColumnStats struct {
	Min       json.RawMessage `json:"min"`        // null when unknown
	Max       json.RawMessage `json:"max"`        // null when unknown
	NullCount *int64          `json:"null_count"` // nil when unknown
}

// Retirement records that a stream was retired: at At (µs since the
// epoch, UTC) it ended at EndOffset (its last offset + 1).
type Retirement struct {
	At        int64 `json:"at"`
	EndOffset int64 `json:"end_offset"`
}

// Retention is a stream's retention window. MaxAge is a duration as the
// retain command reads it (such as "30d"), nil for none; Floor is the
// stream's earliest offset once a retention pass published one, nil
// before; PendingDeletions are deletions below the floor that wait for
// their grace period.
type Retention struct {
	MaxAge           *string           `json:"max_age"`
	Floor            *int64            `json:"floor"`
	PendingDeletions []PendingDeletion `json:"pending_deletions"`
}

// PendingDeletion is a deletion below the retention floor waiting for its
// grace: the rows of log Log below Below may be deleted from NotBefore
// (µs since the epoch) on, so readers that resolved the stream before the
// floor moved can finish.
type PendingDeletion struct {
	Log       string `json:"log"`
	Below     int64  `json:"below"`
	NotBefore int64  `json:"not_before"`
}

// Intent is a pending multi-step operation: its kind ("migrate",
// "retire", …) and whatever fields its steps need, written flat beside
// "kind" ({"kind":"migrate","to":"trades-v2",…}).
type Intent struct {
	Kind   string
	Fields map[string]json.RawMessage
}

// NewIntent returns an intent of kind whose fields are fields marshalled
// as a JSON object (a struct or a map; nil for none).
func NewIntent(kind string, fields any) (*Intent, error) {
	in := &Intent{Kind: kind, Fields: map[string]json.RawMessage{}}
	if fields == nil {
		return in, nil
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("record the %s intent: %w", kind, err)
	}
	if err := json.Unmarshal(b, &in.Fields); err != nil {
		return nil, fmt.Errorf("record the %s intent: its fields are not a JSON object: %w", kind, err)
	}
	delete(in.Fields, "kind")
	return in, nil
}

// Decode unmarshals the intent's fields into v (a pointer to a struct or
// map).
func (in *Intent) Decode(v any) error {
	b, err := json.Marshal(in.Fields)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// MarshalJSON writes kind first, then the fields by name.
func (in Intent) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(`{"kind":`)
	k, _ := json.Marshal(in.Kind)
	buf.Write(k)
	keys := make([]string, 0, len(in.Fields))
	for key := range in.Fields {
		if key != "kind" {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	for _, key := range keys {
		kb, _ := json.Marshal(key)
		buf.WriteByte(',')
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(in.Fields[key])
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (in *Intent) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	var kind string
	if err := json.Unmarshal(m["kind"], &kind); err != nil || kind == "" {
		return errors.New("an intent has no kind")
	}
	delete(m, "kind")
	in.Kind, in.Fields = kind, m
	return nil
}

// New returns the first metadata of a stream (version 0, not yet written)
// under a freshly minted stream id, with no logs. Only a caller that found
// nothing of the stream anywhere (Resolve returned nil) may mint (I8).
func New(stream string) (*Metadata, error) {
	id, err := NewStreamID()
	if err != nil {
		return nil, err
	}
	return &Metadata{
		Format:    Format,
		Stream:    stream,
		StreamID:  id,
		Columns:   map[string]string{},
		Retention: Retention{PendingDeletions: []PendingDeletion{}},
	}, nil
}

// NewStreamID returns a random UUID, version 4 (RFC 9562), from
// crypto/rand.
func NewStreamID() (string, error) {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		return "", fmt.Errorf("mint a stream id: %w", err)
	}
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // variant 10
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]), nil
}

// Current returns the stream's current log (the last), or nil when it has
// none.
func (m *Metadata) Current() *Log {
	if len(m.Logs) == 0 {
		return nil
	}
	return &m.Logs[len(m.Logs)-1]
}

// Retired reports whether the stream is retired.
func (m *Metadata) Retired() bool { return m.Retirement != nil }

// Clone returns a deep copy of m, to derive the next version from.
func (m *Metadata) Clone() *Metadata {
	c := *m
	c.Logs = make([]Log, len(m.Logs))
	for i, lg := range m.Logs {
		lg.Schema = bytes.Clone(lg.Schema)
		lg.SortBy = slices.Clone(lg.SortBy)
		lg.SystemColumns = slices.Clone(lg.SystemColumns)
		lg.EndOffset = clonePtr(lg.EndOffset)
		lg.FirstTS, lg.LastTS = clonePtr(lg.FirstTS), clonePtr(lg.LastTS)
		stats := make(map[string]ColumnStats, len(lg.Stats))
		for k, v := range lg.Stats {
			stats[k] = ColumnStats{Min: bytes.Clone(v.Min), Max: bytes.Clone(v.Max), NullCount: clonePtr(v.NullCount)}
		}
		lg.Stats = stats
		lg.Holes = slices.Clone(lg.Holes)
		c.Logs[i] = lg
	}
	c.Columns = maps.Clone(m.Columns)
	c.Retirement = clonePtr(m.Retirement)
	c.Retention.MaxAge = clonePtr(m.Retention.MaxAge)
	c.Retention.Floor = clonePtr(m.Retention.Floor)
	c.Retention.PendingDeletions = slices.Clone(m.Retention.PendingDeletions)
	c.Restores = slices.Clone(m.Restores)
	if m.Intent != nil {
		in := Intent{Kind: m.Intent.Kind, Fields: make(map[string]json.RawMessage, len(m.Intent.Fields))}
		for k, v := range m.Intent.Fields {
			in.Fields[k] = bytes.Clone(v)
		}
		c.Intent = &in
	}
	return &c
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// AddLog appends lg as the stream's new current log and records the types
// of its schema's columns (DeclareColumns). It refuses a column whose
// type differs from the one recorded, naming both.
func (m *Metadata) AddLog(lg Log, sch *schema.Schema) error {
	if err := m.DeclareColumns(sch); err != nil {
		return err
	}
	if lg.SortBy == nil {
		lg.SortBy = []string{}
	}
	if lg.Stats == nil {
		lg.Stats = map[string]ColumnStats{}
	}
	if lg.SystemColumns == nil {
		lg.SystemColumns = []string{schema.ColumnOffset, schema.ColumnTS}
	}
	if lg.State == "" {
		lg.State = Live
	}
	m.Logs = append(m.Logs, lg)
	return nil
}

// DeclareColumns records the type of each column of sch in m.Columns; it
// refuses (changing nothing) a column already recorded with another type.
func (m *Metadata) DeclareColumns(sch *schema.Schema) error {
	if sch == nil || sch.IsAny() {
		return nil
	}
	if m.Columns == nil {
		m.Columns = map[string]string{}
	}
	cols := sch.Columns()
	for _, c := range cols {
		t := ColumnType(c)
		if was, ok := m.Columns[c.Name]; ok && was != t {
			return fmt.Errorf("column %q was declared as %s and is now declared as %s; a column's type never changes, not even after it was removed; give the new column another name",
				c.Name, was, t)
		}
	}
	for _, c := range cols {
		m.Columns[c.Name] = ColumnType(c)
	}
	return nil
}

// ColumnType spells a column's type for Metadata.Columns: the Arrow type
// with the binary encoding, nested types spelled out, and nullability left
// out (it may change; the type may not). int32 and int64 differ.
func ColumnType(c schema.Column) string {
	var b strings.Builder
	writeType(&b, c)
	return b.String()
}

func writeType(b *strings.Builder, c schema.Column) {
	switch c.Type.ID() {
	case arrow.STRUCT:
		b.WriteString("struct<")
		for i, ch := range c.Children {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(ch.Name)
			b.WriteByte(':')
			writeType(b, ch)
		}
		b.WriteByte('>')
	case arrow.LIST, arrow.LARGE_LIST, arrow.FIXED_SIZE_LIST, arrow.MAP:
		if c.Type.ID() == arrow.MAP {
			b.WriteString("map<")
		} else {
			b.WriteString("list<")
		}
		for i, ch := range c.Children {
			if i > 0 {
				b.WriteByte(',')
			}
			writeType(b, ch)
		}
		b.WriteByte('>')
	default:
		b.WriteString(c.Type.String())
		if c.Encoding != schema.EncodingNone {
			b.WriteByte('/')
			b.WriteString(c.Encoding.String())
		}
	}
}

// Parse reads one metadata version. It refuses a format other than
// Format (a newer one is named as such), a missing stream id, and a log
// list that does not continue offset for offset.
func Parse(b []byte) (*Metadata, error) {
	var probe struct {
		Format *int `json:"format"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, fmt.Errorf("the stream metadata is not valid JSON: %w", err)
	}
	switch {
	case probe.Format == nil:
		return nil, errors.New("the stream metadata has no format number")
	case *probe.Format > Format:
		return nil, fmt.Errorf("the stream metadata has format %d, written by a newer streamcast; this one reads format %d: upgrade streamcast", *probe.Format, Format)
	case *probe.Format != Format:
		return nil, fmt.Errorf("the stream metadata has format %d; this streamcast reads format %d", *probe.Format, Format)
	}
	m := &Metadata{}
	if err := json.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("the stream metadata does not read as format %d: %w", Format, err)
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	if m.Columns == nil {
		m.Columns = map[string]string{}
	}
	if m.Retention.PendingDeletions == nil {
		m.Retention.PendingDeletions = []PendingDeletion{}
	}
	return m, nil
}

// check refuses metadata no writer of this package makes.
func (m *Metadata) check() error {
	if m.StreamID == "" {
		return errors.New("the stream metadata has no stream_id")
	}
	seen := map[string]bool{}
	for i, lg := range m.Logs {
		if lg.Name == "" || seen[lg.Name] {
			return fmt.Errorf("the stream metadata's log %d has an empty or repeated name %q", i+1, lg.Name)
		}
		seen[lg.Name] = true
		switch lg.State {
		case Live, Sealed, Retired:
		default:
			return fmt.Errorf("the stream metadata's log %q has state %q; expected live, sealed or retired", lg.Name, lg.State)
		}
		if i < len(m.Logs)-1 && lg.EndOffset == nil {
			return fmt.Errorf("the stream metadata's log %q is followed by another log but has no end offset", lg.Name)
		}
		if i > 0 && *m.Logs[i-1].EndOffset > lg.StartOffset {
			return fmt.Errorf("the stream metadata's log %q starts at %d, below the end %d of the log before it", lg.Name, lg.StartOffset, *m.Logs[i-1].EndOffset)
		}
	}
	return nil
}

// marshal returns m as written to a version file: indented, so that an
// operator can read it, ending in a newline.
func (m *Metadata) marshal() ([]byte, error) {
	c := *m
	c.Logs = slices.Clone(m.Logs)
	for i := range c.Logs {
		if c.Logs[i].SortBy == nil {
			c.Logs[i].SortBy = []string{}
		}
		if c.Logs[i].Stats == nil {
			c.Logs[i].Stats = map[string]ColumnStats{}
		}
		if len(c.Logs[i].Schema) == 0 {
			c.Logs[i].Schema = json.RawMessage("null")
		}
	}
	if c.Logs == nil {
		c.Logs = []Log{}
	}
	if c.Columns == nil {
		c.Columns = map[string]string{}
	}
	if c.Retention.PendingDeletions == nil {
		c.Retention.PendingDeletions = []PendingDeletion{}
	}
	b, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
