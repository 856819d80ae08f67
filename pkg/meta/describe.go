package meta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/replica"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/schema"
)

// Sources of a Description's live figures (end offset, tiers, replication,
// publishers): the running server's /stats, the logs on disk, or, for a
// live-only stream no server answered for, only its declaration.
const (
	SourceServer = "server"
	SourceDisk   = "disk"
	SourceConfig = "config"
)

// Description is one stream as `streamcast describe` shows it: what its
// metadata holds (identity, schema, logs and their seams, retention,
// published location) and the figures that move (end offset, publish and
// replication lag, exactly-once publishers), read from the logs on disk
// by Describe, or from a running server by the caller, which says so in
// Source. Its JSON is describe's output.
type Description struct {
	Stream   string `json:"stream"`
	StreamID string `json:"stream_id"` // "" for a live-only stream, which has no metadata
	Durable  bool   `json:"durable"`
	// Source says where the figures that move came from: SourceServer,
	// SourceDisk or SourceConfig.
	Source string `json:"source"`
	// EndOffset is the offset the stream's next row gets; nil on a
	// live-only stream.
	EndOffset *int64 `json:"end_offset"`
	// Columns are the current log's columns, in order; [] without a
	// schema (any JSON object is taken).
	Columns []DescribedColumn `json:"columns"`
	// Logs are the stream's logs, oldest first; Seams the offsets where
	// each log after the first continues the one before it.
	Logs  []DescribedLog `json:"logs"`
	Seams []int64        `json:"seams"`
	// Retention is the window retain set and the floor it published.
	Retention DescribedRetention `json:"retention"`
	// Retired is set once the stream is retired.
	Retired *Retirement `json:"retired"`
	// Published is the current log's published table; nil on a
	// live-only stream.
	Published *DescribedTable `json:"published"`
	// Replication is the current log's WAL replication.
	Replication DescribedReplication `json:"replication"`
	// ExactlyOnce says the stream takes ?publisher=ID (from the config;
	// false when the config does not declare the stream).
	ExactlyOnce bool `json:"exactly_once"`
	// Publishers are the exactly-once publisher ids the current log holds
	// a mark for, by id.
	Publishers []DescribedPublisher `json:"exactly_once_publishers"`
	// Connections are the connections open now; nil when no server
	// answered.
	Connections *DescribedConnections `json:"connections"`
}

// DescribedColumn is one column of a stream's schema.
type DescribedColumn struct {
	Name     string `json:"name"`
	Type     string `json:"type"` // as the metadata's columns spell it (ColumnType)
	Nullable bool   `json:"nullable"`
	Required bool   `json:"required"` // the key must be present in a row
}

// DescribedLog is one log of a stream and its offset range [StartOffset,
// EndOffset).
type DescribedLog struct {
	Name        string   `json:"name"`
	State       LogState `json:"state"`
	StartOffset int64    `json:"start_offset"`
	EndOffset   *int64   `json:"end_offset"` // nil when unknown (the live log's, with no figures for it)
	Location    string   `json:"location"`   // its published Iceberg table
	Holes       []Hole   `json:"holes,omitempty"`
}

// DescribedRetention is a stream's retention window and floor.
type DescribedRetention struct {
	MaxAge *string `json:"max_age"` // nil: none
	Floor  *int64  `json:"floor"`   // nil: no retention pass published one yet
}

// DescribedTable is the current log's published table and how far it
// trails the log.
type DescribedTable struct {
	Location         string   `json:"location"`
	PublishedThrough *int64   `json:"published_through"` // the last offset it holds; 0: none; nil: unknown
	LagRows          *int64   `json:"lag_rows"`          // rows committed and not yet published
	LagS             *float64 `json:"lag_s"`             // age of the oldest of them; 0 when none
}

// DescribedReplication is the current log's WAL replication: Enabled by
// the config's replicate: true, or when the log holds a replicator's
// report; the figures are nil until the replicator's first round.
type DescribedReplication struct {
	Enabled           bool     `json:"enabled"`
	ReplicatedThrough *int64   `json:"replicated_through"`
	LagRows           *int64   `json:"lag_rows"`
	LagS              *float64 `json:"lag_s"`
}

// DescribedPublisher is one exactly-once publisher's mark: the last seq
// committed under its id and the offset of that row.
type DescribedPublisher struct {
	ID         string `json:"id"`
	LastSeq    int64  `json:"last_seq"`
	LastOffset int64  `json:"last_offset"`
	// Connected says a connection holds the id now; nil when no server
	// answered.
	Connected *bool `json:"connected"`
}

// DescribedConnections are a stream's open connections.
type DescribedConnections struct {
	Subscribers int64 `json:"subscribers"`
	Publishers  int64 `json:"publishers"`
}

// NoStreamError is Describe's error for a stream with no metadata at its
// home or its published prefix.
type NoStreamError struct {
	Stream string
	Where  string // the home's metadata URI
}

func (e *NoStreamError) Error() string {
	return fmt.Sprintf("stream %q does not exist: there is no metadata at %s", e.Stream, e.Where)
}

// Describe reads stream's metadata (its home's, else its published
// copy's) and describes it (Stored), with the figures that move read from
// its current log on disk (ReadLog). A stream without metadata is a
// *NoStreamError.
func Describe(ctx context.Context, lay Layout, stream string, s3cfg warehouse.S3, now time.Time) (*Description, error) {
	d, err := Stored(ctx, lay, stream, s3cfg)
	if err != nil {
		return nil, err
	}
	if err := d.ReadLog(ctx, lay, now); err != nil {
		return nil, err
	}
	return d, nil
}

// Stored describes what stream's metadata holds (its home's, else its
// published copy's), with none of the figures that move. A stream
// without metadata is a *NoStreamError.
func Stored(ctx context.Context, lay Layout, stream string, s3cfg warehouse.S3) (*Description, error) {
	st, err := NewStore(ctx, lay, stream, s3cfg)
	if err != nil {
		return nil, err
	}
	m, err := st.Load(ctx)
	if errors.Is(err, ErrNoMetadata) {
		m, err = st.LoadPublished(ctx)
	}
	if errors.Is(err, ErrNoMetadata) {
		return nil, &NoStreamError{Stream: stream, Where: st.HomeURI()}
	}
	if err != nil {
		return nil, err
	}
	return DescribeMetadata(m)
}

// ReadLog fills d's figures that move from its current log on disk (end
// offset, publish lag, exactly-once marks, the replicator's last report),
// the log opened read-only: it takes no lock, so it works while serve
// runs. A log missing from disk (the metadata restored elsewhere, say)
// leaves the figures unknown. d.Source becomes SourceDisk.
func (d *Description) ReadLog(ctx context.Context, lay Layout, now time.Time) error {
	d.Source = SourceDisk
	if len(d.Logs) == 0 {
		return nil
	}
	cur := d.Logs[len(d.Logs)-1]
	dir := lay.LogDir(d.Stream, cur.Name)
	lg, err := logstore.Open(dir, logstore.ReadOnly)
	if err != nil {
		return nil
	}
	defer lg.Close()
	status, err := lg.Status(ctx)
	if err != nil {
		return fmt.Errorf("read log %s: %w", cur.Name, err)
	}
	marks, err := lg.Marks(ctx)
	if err != nil {
		return err
	}
	d.SetEnd(status.End)
	if d.Published != nil {
		d.Published.PublishedThrough, d.Published.LagRows, d.Published.LagS = &status.PublishedThrough, &status.PublishLagRows, &status.PublishLagSecs
	}
	d.Publishers = d.Publishers[:0]
	for _, mk := range marks {
		d.Publishers = append(d.Publishers, DescribedPublisher{ID: mk.Publisher, LastSeq: mk.LastSeq, LastOffset: mk.LastOffset})
	}
	if p, ok, err := replica.ReadProgress(dir); err == nil && ok {
		d.Replication.Enabled = true
		through, lag := p.ShippedEnd-1, max(status.End-p.ShippedEnd, 0)
		var age float64
		if lag > 0 {
			age = max(now.Sub(p.At).Seconds(), 0)
		}
		d.Replication.ReplicatedThrough, d.Replication.LagRows, d.Replication.LagS = &through, &lag, &age
	}
	return nil
}

// DescribeMetadata describes what m holds, with none of the figures that
// move (end offset, lags, publishers) and no Source: the caller adds
// them, from the logs on disk (Describe) or from a running server.
func DescribeMetadata(m *Metadata) (*Description, error) {
	cur := m.Current()
	d := &Description{
		Stream:     m.Stream,
		StreamID:   m.StreamID,
		Durable:    true,
		Columns:    []DescribedColumn{},
		Seams:      []int64{},
		Retention:  DescribedRetention{MaxAge: m.Retention.MaxAge, Floor: m.Retention.Floor},
		Retired:    m.Retirement,
		Published:  &DescribedTable{Location: cur.Location},
		Publishers: []DescribedPublisher{},
	}
	if len(cur.Schema) > 0 && string(cur.Schema) != "null" {
		sch, err := schema.Compile(cur.Schema)
		if err != nil {
			return nil, fmt.Errorf("the schema of log %s in the metadata does not compile: %w", cur.Name, err)
		}
		d.Columns = DescribeColumns(sch)
	}
	for i, lg := range m.Logs {
		d.Logs = append(d.Logs, DescribedLog{Name: lg.Name, State: lg.State, StartOffset: lg.StartOffset, EndOffset: lg.EndOffset, Location: lg.Location, Holes: lg.Holes})
		if i > 0 {
			d.Seams = append(d.Seams, lg.StartOffset)
		}
	}
	if m.Retirement != nil {
		d.SetEnd(m.Retirement.EndOffset)
	}
	return d, nil
}

// DescribeColumns lists sch's columns (none for a schema that takes any
// object).
func DescribeColumns(sch *schema.Schema) []DescribedColumn {
	out := []DescribedColumn{}
	if sch == nil || sch.IsAny() {
		return out
	}
	for _, c := range sch.Columns() {
		out = append(out, DescribedColumn{Name: c.Name, Type: ColumnType(c), Nullable: c.Nullable, Required: c.Required})
	}
	return out
}

// SetEnd records the stream's end offset, which is also the live log's.
func (d *Description) SetEnd(end int64) {
	d.EndOffset = &end
	if n := len(d.Logs); n > 0 && d.Logs[n-1].EndOffset == nil {
		d.Logs[n-1].EndOffset = &end
	}
}

// IsNoStream reports whether err says the stream does not exist.
func IsNoStream(err error) bool {
	var ns *NoStreamError
	return errors.As(err, &ns)
}

// KnownStreams lists the streams that have a home under lay's root: the
// directories holding a metadata directory, sorted.
func KnownStreams(lay Layout) []string {
	entries, err := os.ReadDir(lay.Root())
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if _, err := os.Stat(lay.MetadataDir(e.Name())); err == nil {
			out = append(out, e.Name())
		}
	}
	return out
}

// WriteTable draws d as tables for a terminal: the stream's facts as
// keys and values, then its columns, its logs and its exactly-once
// publishers.
func (d *Description) WriteTable(w io.Writer) error {
	orNone := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return strconv.FormatInt(*p, 10)
	}
	secs := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return strconv.FormatFloat(*p, 'f', 3, 64) + " s"
	}
	facts := [][]string{
		{"stream", d.Stream},
		{"stream_id", d.StreamID},
		{"durable", strconv.FormatBool(d.Durable)},
		{"source", d.Source},
		{"end_offset", orNone(d.EndOffset)},
	}
	if d.Retired != nil {
		facts = append(facts, []string{"retired", fmt.Sprintf("at %s, end offset %d", time.UnixMicro(d.Retired.At).UTC().Format(time.RFC3339), d.Retired.EndOffset)})
	}
	maxAge := MaxAgeNone
	if d.Retention.MaxAge != nil {
		maxAge = *d.Retention.MaxAge
	}
	facts = append(facts, []string{"retention", "max_age " + maxAge + ", floor " + orNone(d.Retention.Floor)})
	if p := d.Published; p != nil {
		facts = append(facts, []string{"published", p.Location},
			[]string{"published_through", orNone(p.PublishedThrough) + " (lag " + orNone(p.LagRows) + " rows, " + secs(p.LagS) + ")"})
	}
	repl := "off"
	if r := d.Replication; r.Enabled {
		repl = "on, through " + orNone(r.ReplicatedThrough) + " (lag " + orNone(r.LagRows) + " rows, " + secs(r.LagS) + ")"
	}
	facts = append(facts, []string{"replication", repl}, []string{"exactly_once", strconv.FormatBool(d.ExactlyOnce)})
	if c := d.Connections; c != nil {
		facts = append(facts, []string{"connections", fmt.Sprintf("%d subscribers, %d publishers", c.Subscribers, c.Publishers)})
	}
	if err := writeTable(w, []string{"key", "value"}, facts); err != nil {
		return err
	}

	cols := make([][]string, 0, len(d.Columns))
	for _, c := range d.Columns {
		cols = append(cols, []string{c.Name, c.Type, strconv.FormatBool(c.Nullable), strconv.FormatBool(c.Required)})
	}
	if len(cols) == 0 {
		cols = append(cols, []string{"(no schema: any JSON object)", "", "", ""})
	}
	if err := writeTable(w, []string{"column", "type", "nullable", "required"}, cols); err != nil {
		return err
	}
	if len(d.Logs) > 0 {
		logs := make([][]string, 0, len(d.Logs))
		for _, lg := range d.Logs {
			logs = append(logs, []string{lg.Name, string(lg.State), strconv.FormatInt(lg.StartOffset, 10), orNone(lg.EndOffset), lg.Location})
		}
		if err := writeTable(w, []string{"log", "state", "start_offset", "end_offset", "published table"}, logs); err != nil {
			return err
		}
	}
	if len(d.Publishers) > 0 {
		pubs := make([][]string, 0, len(d.Publishers))
		for _, p := range d.Publishers {
			conn := "-"
			if p.Connected != nil {
				conn = strconv.FormatBool(*p.Connected)
			}
			pubs = append(pubs, []string{p.ID, strconv.FormatInt(p.LastSeq, 10), strconv.FormatInt(p.LastOffset, 10), conn})
		}
		if err := writeTable(w, []string{"publisher id", "last_seq", "last_offset", "connected"}, pubs); err != nil {
			return err
		}
	}
	return nil
}

func writeTable(w io.Writer, header []string, rows [][]string) error {
	t := tablewriter.NewWriter(w)
	t.Header(header)
	if err := t.Bulk(rows); err != nil {
		return err
	}
	return t.Render()
}
