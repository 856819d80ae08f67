package config

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/schema"
)

// Defaults, in one place with the types below: these values, Default and
// DefaultStream built from them, each section's DefaultX beside its type
// (DefaultMaintain, DefaultLog, DefaultMetrics, DefaultReplicate, the
// control: section's in control.go; a zero tiers: field is logstore's
// default), and Embedded, the base Resolve lays the file over.
const (
	DefaultListen          = "127.0.0.1:8765"
	DefaultRoot            = "./streamcast-data"
	DefaultMaxBacklog      = 8192
	DefaultMaxInbound      = 65536
	DefaultMaxInFlight     = 64
	DefaultMaxMessageBytes = 1 << 20
	DefaultMaxWhereBytes   = 64 << 10
	DefaultMaxFilterBytes  = 256 << 20
	// DefaultMaxCompressionBytes holds 160 compressors of about 800 KiB.
	DefaultMaxCompressionBytes = 128 << 20
	DefaultIdleTimeout         = 30 * time.Second
	DefaultMaxConnsPerAddr     = 1024
	DefaultMaxReplay           = 100000

	// How often serve's maintenance children run their roles (maintain:).
	DefaultSealEvery           = 250 * time.Millisecond
	DefaultCompactEvery        = 10 * time.Second
	DefaultPublishEvery        = 10 * time.Second
	DefaultCleanEvery          = 10 * time.Second
	DefaultCleanPublishedEvery = 60 * time.Second
	DefaultFlushEvery          = 60 * time.Second
	DefaultRetainEvery         = time.Hour
)

// Config is streamcast's whole configuration, one typed value: what
// `streamcast serve` runs with and `streamcast config` prints. Every
// command gets it from Resolve: Embedded, then the config file, the
// STREAMCAST_* variables and the flags, each laid over the one before;
// tests build one from Default or with Load. Validate before use.
//
// Every section is a field here and nowhere else: the keys the file may
// hold, the keys an environment variable or flag may set (OverrideKeys) and
// what `streamcast config` prints are all derived from these yaml tags, so a
// new field is known, settable and printed without another list to update.
// A field that holds a secret is tagged secret:"true"; every rendering of a
// Config (YAML, JSON) shows it as "[redacted]".
type Config struct {
	// Listen is the TCP address to serve on; ":0" picks a free port.
	Listen string `yaml:"listen"`
	// Root is the directory holding every durable stream's logs, laid out
	// by pkg/meta: the first log of a stream at <root>/<stream>/<stream>/.
	Root string `yaml:"root"`
	// Limits bound memory per connection and per stream.
	Limits Limits `yaml:"limits"`
	// Streams are the streams served, each at /<name>.
	Streams []Stream `yaml:"streams"`
	// Maintain says which maintenance roles serve runs as child processes
	// over the durable streams' logs, and how often.
	Maintain Maintain `yaml:"maintain"`
	// Published is the prefix durable streams' logs publish their Iceberg
	// tables under, each at <published>/<stream>/<log>/: s3://bucket/path,
	// file:///absolute/dir, or a directory (a relative one is resolved
	// against the working directory, as root is). Empty means
	// <root>/published. Each log stores it when serve creates the log, and
	// a log's table never moves: serve refuses to open a log stored with
	// another (I8).
	Published string `yaml:"published"`
	// S3 says how to reach an s3:// published prefix; it is stored in each
	// log serve creates. Credentials are never config: they come from the
	// standard AWS environment or profile.
	S3 warehouse.S3 `yaml:"s3"`
	// Tiers sets the sizes, retention and grace periods each log stores
	// when serve creates it.
	Tiers Tiers `yaml:"tiers"`
	// AllowedOrigins lists the browser origins (scheme://host[:port], as a
	// browser sends its Origin header, such as https://app.example.com)
	// whose pages may open WebSockets on this server. Empty, or "*" alone,
	// allows every origin. A request without an Origin header (wscat, the Go
	// client, any non-browser client) is not a browser's cross-site request
	// and is always served; this is no authentication.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// TLS makes serve speak https and wss only, with the certificate and
	// key it names; with a client CA, clients must present certificates.
	TLS TLS `yaml:"tls"`
	// Auth, when set, makes every request authenticate (HTTP Basic) and
	// hold a grant for what it asks; nil lets everyone do everything.
	Auth *Auth `yaml:"auth,omitempty"`
	// Replicate says where and how often the WAL of the streams with
	// replicate: true is shipped.
	Replicate Replicate `yaml:"replicate"`
	// Log is how every command logs: level and format.
	Log Log `yaml:"log"`
	// Metrics is the Prometheus endpoint, GET /metrics.
	Metrics Metrics `yaml:"metrics"`
	// Control, when set, serves the control API (/control/v1) over the
	// streams its registry holds; nil serves only the streams: list.
	Control *Control `yaml:"control,omitempty"`
	// Stats is where GET serves the per-stream figures: /stats by default,
	// another absolute path (stats: /ops/stats), or false to serve them
	// nowhere. Applies when serve starts.
	Stats Stats `yaml:"stats"`
	// Compression lets WebSocket connections negotiate permessage-deflate
	// (RFC 7692) when the client offers it: subscribers then receive
	// compressed frames, publishers may send them. false answers every
	// offer with no extension, as a server without it. Applies when serve
	// starts.
	Compression bool `yaml:"compression"`

	// origin says where each key's value came from, for errors; nil for a
	// Config built in code. Load sets it.
	origin *Origins
}

// Limits are the bounds that keep one client from costing the others.
type Limits struct {
	// MaxBacklog is the number of frames queued for one subscriber before it
	// is dropped with 4429 (I5).
	MaxBacklog int `yaml:"max_backlog"`
	// MaxInbound is the number of rows queued for commit on one stream,
	// across its publishers, before publishers are held back (their sockets
	// stop being read).
	MaxInbound int `yaml:"max_inbound"`
	// MaxInFlight is the number of replies one publisher may be owed before
	// the server stops reading its socket (holding the one frame it read
	// next, unhandled, until a reply is written).
	MaxInFlight int `yaml:"max_in_flight"`
	// MaxMessageBytes is the largest publish frame accepted; larger ones
	// close the connection with 1009.
	MaxMessageBytes int `yaml:"max_message_bytes"`
	// MaxWhereBytes is the longest where= filter a subscriber may send (its
	// JSON, after URL decoding); a longer one is refused with 4400. It
	// bounds what one subscriber's filter costs to compile and to hold.
	MaxWhereBytes int `yaml:"max_where_bytes"`
	// MaxFilterBytes bounds the memory the compiled where= filters of all
	// subscribers hold together, server-wide (identical filters share one
	// compiled form and count once). A subscriber whose filter would take
	// the total over it is refused with 1013 (try again later).
	MaxFilterBytes int `yaml:"max_filter_bytes"`
	// MaxCompressionBytes bounds the memory the permessage-deflate
	// compressors hold together, server-wide: one per group of live
	// subscribers sharing a stream and a filter, one per compressed replay
	// running. A subscriber that would need a compressor past it receives
	// plain frames, which the extension allows, until one is free; it is
	// never refused for it.
	MaxCompressionBytes int `yaml:"max_compression_bytes"`
	// IdleTimeout closes an HTTP keep-alive connection (/health, /stats, the
	// console, the control API) that waits this long for its next request.
	// WebSocket connections have their own keepalive and are not affected.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxConnections bounds the TCP connections serve holds open at once,
	// WebSocket ones included; one over it is closed at accept (plain HTTP
	// first gets a 503 saying why). 0 takes the process's descriptor limit
	// less an eighth of it (at least 256) and 6 for each durable log
	// served, which stay for the logs, so a flood of sockets cannot make a
	// commit fail; a larger value is lowered to that, with a warning.
	MaxConnections int `yaml:"max_connections"`
	// MaxConnectionsPerAddress bounds the connections one remote address
	// holds open, so one client cannot take every place; 0 sets no bound.
	MaxConnectionsPerAddress int `yaml:"max_connections_per_address"`
}

// StreamLimits are the bounds one stream may set for itself, each in
// place of the server's limits: key of the same name; nil keeps the
// server's. A stream's own max_message_bytes may not exceed the server's,
// which bounds every frame the listener reads.
type StreamLimits struct {
	MaxBacklog      *int `yaml:"max_backlog,omitempty"`
	MaxInbound      *int `yaml:"max_inbound,omitempty"`
	MaxInFlight     *int `yaml:"max_in_flight,omitempty"`
	MaxMessageBytes *int `yaml:"max_message_bytes,omitempty"`
}

// StreamLimitKeys are the keys of StreamLimits, in order.
func StreamLimitKeys() []string {
	return []string{"max_backlog", "max_inbound", "max_in_flight", "max_message_bytes"}
}

// fields pairs each key with its value here and its place in server.
func (l *StreamLimits) fields(server *Limits) []struct {
	key string
	v   *int
	dst *int
} {
	return []struct {
		key string
		v   *int
		dst *int
	}{
		{"max_backlog", l.MaxBacklog, &server.MaxBacklog},
		{"max_inbound", l.MaxInbound, &server.MaxInbound},
		{"max_in_flight", l.MaxInFlight, &server.MaxInFlight},
		{"max_message_bytes", l.MaxMessageBytes, &server.MaxMessageBytes},
	}
}

// Over lays l over the server's limits: what a stream with these limits
// runs with.
func (l *StreamLimits) Over(server Limits) Limits {
	if l == nil {
		return server
	}
	for _, f := range l.fields(&server) {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	return server
}

// Check refuses a bound below 1 and a max_message_bytes over the
// server's, each error naming prefix+"."+key (streams[0].limits.max_backlog,
// or limits.max_backlog for a control API declaration).
func (l *StreamLimits) Check(prefix string, server Limits) error {
	if l == nil {
		return nil
	}
	for _, f := range l.fields(&server) {
		key := prefix + "." + f.key
		switch {
		case f.v == nil:
		case *f.v < 1:
			return keyErrorf(key, "%s is %d; give a positive number, or leave the key out for the server's limits.%s (%d)", key, *f.v, f.key, *f.dst)
		case f.key == "max_message_bytes" && *f.v > server.MaxMessageBytes:
			return keyErrorf(key, "%s is %d, over the server's limits.max_message_bytes %d, which bounds every frame it reads; give at most %d", key, *f.v, server.MaxMessageBytes, server.MaxMessageBytes)
		}
	}
	return nil
}

// UnmarshalYAML refuses a key given as null, which would otherwise read
// as the key left out and keep the server's bound without a word.
func (l *StreamLimits) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if v := n.Content[i+1]; v.ShortTag() == "!!null" {
				return fmt.Errorf("line %d: limits.%s is null; give a positive number, or leave the key out for the server's", v.Line, n.Content[i].Value)
			}
		}
	}
	type plain StreamLimits
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	*l = StreamLimits(p)
	return nil
}

// Stats is the stats: key: the path GET serves the per-stream figures
// at. The zero value is DefaultStatsPath; StatsOff serves them nowhere.
type Stats string

// DefaultStatsPath is where /stats is served unless stats: says otherwise.
const DefaultStatsPath Stats = "/stats"

// StatsOff is stats: false.
const StatsOff Stats = "false"

// Path returns the path the figures are served at, "" when they are not.
func (s Stats) Path() string {
	switch s {
	case "":
		return string(DefaultStatsPath)
	case StatsOff:
		return ""
	}
	return string(s)
}

// UnmarshalYAML reads true (the default path), false (off) or a path.
func (s *Stats) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: stats is a path such as /stats, or false to serve no stats", n.Line)
	}
	switch n.ShortTag() {
	case "!!bool":
		var on bool
		if err := n.Decode(&on); err != nil {
			return err
		}
		*s = DefaultStatsPath
		if !on {
			*s = StatsOff
		}
		return nil
	case "!!null":
		*s = DefaultStatsPath
		return nil
	}
	*s = Stats(n.Value)
	return nil
}

// MarshalYAML writes false when the figures are served nowhere, else the
// path.
func (s Stats) MarshalYAML() (any, error) {
	if s == StatsOff {
		return false, nil
	}
	return s.Path(), nil
}

// statsRoutes are the paths serve answers itself, which stats: may not
// take.
var statsRoutes = []string{"/", "/health", "/metrics", "/ui", "/control"}

// validate checks stats: an absolute path with no query, not one of
// serve's other routes, nor a static stream's path (streams names).
func (s Stats) validate(streams []string) error {
	p := s.Path()
	if p == "" || p == string(DefaultStatsPath) {
		return nil
	}
	switch {
	case !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "?# ") || strings.Contains(p, "//"):
		return keyErrorf("stats", "stats %q is not an absolute path; give one such as /stats or /ops/stats, or false to serve no stats", p)
	case slices.Contains(statsRoutes, p) || strings.HasPrefix(p, "/control/"):
		return keyErrorf("stats", "stats %q is one of serve's own routes (/, /health, /metrics, /ui, /control/v1); give another path, such as /ops/stats", p)
	}
	if i := slices.IndexFunc(streams, func(n string) bool { return strings.EqualFold("/"+n, p) }); i >= 0 {
		return keyErrorf("stats", "stats %q is the path of the stream %q; give another path, such as /ops/stats", p, streams[i])
	}
	return nil
}

// Stream declares one stream. Start from DefaultStream: its zero value
// is a live-only stream with unbounded replay, which is rarely what you mean.
type Stream struct {
	// Name is the stream's name and URL path, in the grammar meta.CheckName
	// checks; "" is served at / (live-only streams only, since a durable
	// stream's name names its directory).
	Name string `yaml:"name"`
	// Schema is the stream's JSON Schema (inline). Empty with no SchemaFile
	// means no schema: any JSON object is relayed unchecked.
	Schema RawJSON `yaml:"schema,omitempty"`
	// SchemaFile is a file holding the JSON Schema (relative paths are
	// resolved against the config file's directory). Exclusive with Schema.
	SchemaFile string `yaml:"schema_file,omitempty"`
	// SortBy names scalar columns that order rows within a sealed file.
	SortBy []string `yaml:"sort_by,omitempty"`
	// Durable streams commit every row to a log before delivering it; live-only
	// ones relay rows with null offsets and refuse ?offset.
	Durable bool `yaml:"durable"`
	// Replicate ships the stream's WAL to <replicate.destination>/<stream>/<log>/
	// (without a destination, <published>/<stream>/_wal/<log>/) with a
	// `streamcast replicate` child of serve (the replicate: section says
	// where and how often), so a lost machine loses about a second of
	// acknowledged rows rather than everything not yet published. Durable
	// streams only; the replica and the published prefix must lie outside
	// the root.
	Replicate bool `yaml:"replicate,omitempty"`
	// GroupCommit lets rows queued while a commit is in flight share the next
	// one; off, every publish frame is its own commit.
	GroupCommit bool `yaml:"group_commit"`
	// MaxReplay bounds how many rows back a subscriber may resume; nil is
	// unbounded (YAML null).
	MaxReplay *int64 `yaml:"max_replay"`
	// ExactlyOnce lets publishers name themselves with publisher=ID.
	ExactlyOnce bool `yaml:"exactly_once"`
	// HistoryGuard, when set, makes the stream protected: its consumers
	// rebuild their state by reading it from offset 1, so serve checks
	// before it admits traffic that the history is still whole and
	// unchanged, and the commands that would end, split or shorten it
	// refuse it (Protected, ProtectedError). nil for an unprotected stream.
	HistoryGuard *HistoryGuard `yaml:"history_guard,omitempty"`
	// Upstream, when set, makes the stream a relay of the stream at this
	// ws:// or wss:// URL (credentials in its user info, or in the
	// environment): serve mirrors it with the same offsets, stamps and row
	// bytes and takes no publishers. The schema comes from the upstream's
	// greeting. See package relay. Secret: it may hold a password, so
	// `streamcast config` prints it redacted.
	Upstream string `yaml:"upstream,omitempty" secret:"true"`
	// Limits, when set, are this stream's own bounds in place of the
	// server's limits: (the keys a control API declaration's limits take);
	// a key left out keeps the server's.
	Limits *StreamLimits `yaml:"limits,omitempty"`
	// UpstreamCAFile, for a wss:// upstream, holds the PEM certificate(s)
	// of a CA the relay trusts beside the system's, as tail's --ca-file:
	// for an origin whose certificate a private CA signed. Relative to
	// the config file's directory.
	UpstreamCAFile string `yaml:"upstream_ca_file,omitempty"`
}

// Default returns the configuration with every default filled in and no
// streams.
func Default() Config {
	return Config{
		Listen: DefaultListen,
		Root:   DefaultRoot,
		Limits: Limits{
			MaxBacklog:          DefaultMaxBacklog,
			MaxInbound:          DefaultMaxInbound,
			MaxInFlight:         DefaultMaxInFlight,
			MaxMessageBytes:     DefaultMaxMessageBytes,
			MaxWhereBytes:       DefaultMaxWhereBytes,
			MaxFilterBytes:      DefaultMaxFilterBytes,
			MaxCompressionBytes: DefaultMaxCompressionBytes,
			IdleTimeout:         DefaultIdleTimeout,

			MaxConnectionsPerAddress: DefaultMaxConnsPerAddr,
		},
		Maintain:  DefaultMaintain(),
		Replicate: DefaultReplicate(),
		Log:       DefaultLog(),
		Metrics:   DefaultMetrics(),
		Stats:     DefaultStatsPath,

		Compression: true,
	}
}

// DefaultStream returns a durable, group-committing stream named name with no
// schema and max_replay 100000.
func DefaultStream(name string) Stream {
	mr := int64(DefaultMaxReplay)
	return Stream{Name: name, Durable: true, GroupCommit: true, MaxReplay: &mr}
}

// DemoSchema is the schema of the embedded default's demo stream: a trade.
const DemoSchema = `{
  "type": "object",
  "properties": {
    "event_ts": {"type": "integer"},
    "symbol":   {"type": "string"},
    "price":    {"type": "number"},
    "amount":   {"type": "number"},
    "side":     {"type": "integer", "format": "int32"},
    "trade_id": {"type": ["string", "null"]}
  },
  "required": ["event_ts", "symbol", "price", "amount", "side"]
}`

// Embedded is what `streamcast serve` serves without --config: a durable
// demo stream of trades under ./streamcast-data on 127.0.0.1:8765. It is the
// base Resolve lays the config file over, so a file without streams serves
// the demo stream with the file's other settings.
func Embedded() Config {
	c := Default()
	demo := DefaultStream("demo")
	demo.Schema = RawJSON(DemoSchema)
	demo.SortBy = []string{"event_ts"}
	c.Streams = []Stream{demo}
	return c
}

// RawJSON is a JSON document held as bytes. In YAML it may be written as YAML
// (a mapping, converted to JSON with its key order kept: property order is
// column order) or as a string holding JSON.
type RawJSON []byte

// UnmarshalYAML converts the node to JSON, keeping mapping key order.
func (r *RawJSON) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		*r = RawJSON(n.Value)
		return nil
	}
	b, err := NodeJSON(nil, n)
	if err != nil {
		return err
	}
	*r = b
	return nil
}

// MarshalYAML writes the document as block YAML, keys in their order.
func (r RawJSON) MarshalYAML() (any, error) {
	if len(r) == 0 {
		return nil, nil
	}
	var n yaml.Node
	if err := yaml.Unmarshal(r, &n); err != nil {
		return string(r), nil
	}
	if len(n.Content) == 1 {
		plainStyle(n.Content[0])
		return n.Content[0], nil
	}
	return string(r), nil
}

// plainStyle drops the JSON text's flow style and quotes, so a schema prints
// like the rest of the file; the encoder still quotes a string that would
// otherwise read as another type ("null", "1").
func plainStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		plainStyle(c)
	}
}

// UnmarshalYAML fills a stream declaration on top of DefaultStream, so a key
// left out keeps its default and max_replay: null means unbounded.
func (s *Stream) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: a stream is a mapping of name, schema, durable, …", n.Line)
	}
	type plain Stream
	p := plain(DefaultStream(""))
	if err := n.Decode(&p); err != nil {
		return err
	}
	*s = Stream(p)
	return nil
}

// Validate checks the whole configuration before anything is opened: the
// log: section, limits of at least 1, the maintain:, published:, s3:,
// tiers:, tls: and auth: sections (the certificate and key must load),
// stream names valid and distinct, every schema compiling, sort_by naming
// columns, and each history_guard against its stream
// (durable, exactly_once, max_replay null, known_row canonical).
// `streamcast serve` and `streamcast config` run exactly this. An error
// is a *Error naming the key and, for a Config from Resolve or Load,
// where its value came from (file and line, environment variable, flag or
// default).
func (c *Config) Validate() error {
	_, err := c.Compile()
	return err
}

// ValidateLog checks the log: section only, with errors like Validate's: it
// is what every command needs before it can log.
func (c *Config) ValidateLog() error {
	return c.explain(c.Log.Validate())
}

// Compile validates c, as Validate does, and returns each stream's
// compiled schema, in order: what serve runs with.
func (c *Config) Compile() ([]*schema.Schema, error) {
	if err := c.Log.Validate(); err != nil {
		return nil, c.explain(err)
	}
	schemas, err := c.compileServe()
	if err != nil {
		return nil, c.explain(err)
	}
	return schemas, nil
}

// compileServe validates all but the log: section. Each error is a
// *Error naming its key; Compile says where the value came from.
func (c *Config) compileServe() ([]*schema.Schema, error) {
	if strings.TrimSpace(c.Listen) == "" {
		return nil, keyErrorf("listen", "listen is empty; give an address such as 127.0.0.1:8765 (or :0 for any free port)")
	}
	for _, l := range []struct {
		key string
		v   int
	}{
		{"max_backlog", c.Limits.MaxBacklog},
		{"max_inbound", c.Limits.MaxInbound},
		{"max_in_flight", c.Limits.MaxInFlight},
		{"max_message_bytes", c.Limits.MaxMessageBytes},
		{"max_where_bytes", c.Limits.MaxWhereBytes},
		{"max_filter_bytes", c.Limits.MaxFilterBytes},
		{"max_compression_bytes", c.Limits.MaxCompressionBytes},
	} {
		if l.v < 1 {
			return nil, keyErrorf("limits."+l.key, "limits.%s is %d; it must be at least 1", l.key, l.v)
		}
	}
	if c.Limits.IdleTimeout <= 0 {
		return nil, keyErrorf("limits.idle_timeout", "limits.idle_timeout is %v; give a duration such as 30s, after which an idle keep-alive connection is closed", c.Limits.IdleTimeout)
	}
	if c.Limits.MaxConnections < 0 {
		return nil, keyErrorf("limits.max_connections", "limits.max_connections is %d; give a count, or 0 for the descriptor limit less a reserve for the logs", c.Limits.MaxConnections)
	}
	if c.Limits.MaxConnectionsPerAddress < 0 {
		return nil, keyErrorf("limits.max_connections_per_address", "limits.max_connections_per_address is %d; give a count, or 0 for no bound per address", c.Limits.MaxConnectionsPerAddress)
	}
	if err := c.Maintain.Validate(); err != nil {
		return nil, err
	}
	if err := c.validateStorage(); err != nil {
		return nil, keyFromMessage(err) // storage.go's messages begin with their key
	}
	if err := c.validateReplicate(); err != nil {
		return nil, err
	}
	if err := validateOrigins(c.AllowedOrigins); err != nil {
		return nil, keyErrorf("allowed_origins", "%v", err)
	}
	if err := c.TLS.Validate(); err != nil {
		return nil, err
	}
	// With mutual TLS a grant may name a client certificate's CN.
	if err := c.Auth.validate(c.TLS.Mutual()); err != nil {
		return nil, err
	}
	if err := c.Control.validate(c); err != nil {
		return nil, err
	}
	var static []string
	for _, st := range c.Streams {
		static = append(static, st.Name)
	}
	if err := c.Stats.validate(static); err != nil {
		return nil, err
	}
	if len(c.Streams) == 0 && c.Control == nil {
		return nil, keyErrorf("streams", "streams is empty; declare at least one stream (name, schema, …), or add a control: section to declare them over HTTP")
	}
	seen := map[string]int{} // by meta.Fold: names differing only in case share a directory
	var names []string
	schemas := make([]*schema.Schema, len(c.Streams))
	for i := range c.Streams {
		s := &c.Streams[i]
		key := fmt.Sprintf("streams[%d]", i)
		// "" stays allowed for a live-only stream (it has no directory);
		// a durable one is refused below.
		if s.Name != "" {
			if err := meta.CheckName(s.Name); err != nil {
				return nil, keyErrorf(key+".name", "%s.name %v", key, err)
			}
			names = append(names, s.Name)
		}
		if j, dup := seen[meta.Fold(s.Name)]; dup {
			if c.Streams[j].Name == s.Name {
				return nil, keyErrorf(key+".name", "%s.name %q is already the name of streams[%d]; stream names must be distinct", key, s.Name, j)
			}
			return nil, keyErrorf(key+".name", "%s.name %q differs from streams[%d]'s %q only in case; on a case-insensitive file system they would share a directory, so choose names that differ in more than case",
				key, s.Name, j, c.Streams[j].Name)
		}
		seen[meta.Fold(s.Name)] = i
		label := fmt.Sprintf("stream %q (%s)", s.Name, key)
		if s.Durable && s.Name == "" {
			return nil, keyErrorf(key+".name", "%s is durable but has the empty name, which names no directory; give it a name or durable: false", label)
		}
		if s.Durable && strings.TrimSpace(c.Root) == "" {
			return nil, keyErrorf("root", "root is empty, but %s is durable and needs a directory for its log", label)
		}
		if s.Replicate && !s.Durable {
			return nil, keyErrorf(key+".replicate", "%s has replicate: true but is not durable: only a durable stream has a log to replicate", label)
		}
		if err := s.validateUpstream(key, label); err != nil {
			return nil, err
		}
		if err := s.Limits.Check(key+".limits", c.Limits); err != nil {
			return nil, err
		}
		if s.MaxReplay != nil && *s.MaxReplay < 0 {
			return nil, keyErrorf(key+".max_replay", "%s: max_replay is %d; give a count of rows ≥ 0, or null for unbounded", label, *s.MaxReplay)
		}
		doc := []byte(s.Schema)
		if s.SchemaFile != "" {
			if len(s.Schema) > 0 {
				return nil, keyErrorf(key+".schema_file", "%s gives both schema and schema_file; give one", label)
			}
			b, err := os.ReadFile(s.SchemaFile)
			if err != nil {
				return nil, keyError(key+".schema_file", fmt.Errorf("%s: schema_file: %w", label, err))
			}
			doc = b
		}
		if len(bytes.TrimSpace(doc)) == 0 || string(bytes.TrimSpace(doc)) == "null" {
			schemas[i] = schema.Any()
		} else {
			sch, err := schema.Compile(doc)
			var ce *schema.CompileError
			switch {
			case errors.As(err, &ce) && ce.Path == "": // its words begin "schema: "
				return nil, keyError(key+".schema", fmt.Errorf("%s: %w", label, err))
			case err != nil:
				return nil, keyError(key+".schema", fmt.Errorf("%s: schema: %w", label, err))
			}
			schemas[i] = sch
		}
		for _, col := range s.SortBy {
			if schemas[i].IsAny() {
				return nil, keyErrorf(key+".sort_by", "%s: sort_by names %q, but the stream has no schema and so no columns", label, col)
			}
			if _, ok := schemas[i].ColumnIndex(col); !ok {
				return nil, keyErrorf(key+".sort_by", "%s: sort_by names %q, which is not a column of its schema", label, col)
			}
		}
		if err := s.validateGuard(key, label, schemas[i]); err != nil {
			return nil, err
		}
	}
	if lay, err := c.layout(); err == nil {
		if err := lay.Check(names); err != nil {
			return nil, err
		}
	}
	return schemas, nil
}

// validateOrigins checks allowed_origins: each entry is an origin exactly
// as a browser sends it (scheme://host[:port], no path), or "*" alone.
func validateOrigins(origins []string) error {
	for i, o := range origins {
		key := fmt.Sprintf("allowed_origins[%d]", i)
		if o == "*" {
			if len(origins) > 1 {
				return fmt.Errorf("%s is *, which allows every origin, beside other entries; give * alone, or only the origins to allow", key)
			}
			continue
		}
		u, err := url.Parse(o)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			return fmt.Errorf("%s %q is not an origin; give one as a browser sends it, such as https://app.example.com or http://localhost:3000", key, o)
		case u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
			return fmt.Errorf("%s %q has more than scheme://host[:port]; an origin has no path, query or user, so give %s://%s", key, o, u.Scheme, u.Host)
		case u.Path == "/":
			return fmt.Errorf("%s %q ends with /, which a browser's Origin never does; give %s://%s", key, o, u.Scheme, u.Host)
		}
	}
	return nil
}

// Maintain is the maintain: section: which maintenance roles serve
// runs, as one `streamcast maintain --role R` child process per role over
// every durable stream's log, and how often each makes a pass.
//
// The roles that run are exactly those whose interval is positive. An
// interval of 0 (or null) leaves that role to you: run `streamcast maintain
// --role R` yourself, or nothing does it. `maintain: false` (or serve
// --no-maintain) runs no child at all; `maintain: true`, an empty section or
// none is DefaultMaintain, which runs every role.
type Maintain struct {
	// Enabled is false for `maintain: false`: serve runs no child.
	Enabled bool `yaml:"-"`
	// SealEvery is the seal role's pause between passes: buffered rows →
	// Parquet files, a full target at a time.
	SealEvery time.Duration `yaml:"seal_every"`
	// CompactEvery is the compact role's: small adjacent files → large ones.
	CompactEvery time.Duration `yaml:"compact_every"`
	// PublishEvery is the publish role's: finished files → the published
	// Iceberg table, one commit per pass.
	PublishEvery time.Duration `yaml:"publish_every"`
	// CleanEvery is the clean role's: evict buffered rows that files hold,
	// delete published local files past retention, drain the delete queue.
	CleanEvery time.Duration `yaml:"clean_every"`
	// CleanPublishedEvery is the clean-published role's: expire old
	// snapshots of the published table and delete what none references.
	CleanPublishedEvery time.Duration `yaml:"clean_published_every"`
	// RetainEvery is the retain role's: each stream's retention pass
	// (`streamcast retain`), which publishes a new floor and, after
	// tiers.retention_grace, deletes below it. A pass over a stream with
	// no window reads its metadata and does nothing else.
	RetainEvery time.Duration `yaml:"retain_every"`
	// FlushEvery makes seal and publish cut everything buffered once per
	// interval, at wall-clock multiples of it, and makes a graceful stop
	// flush too. 0 never flushes: not on a schedule, not at a stop.
	FlushEvery time.Duration `yaml:"flush_every"`
	// MaxOpenLogs bounds how many logs each child holds open at once (a
	// few files and SQLite connections each); a child opens an idle log
	// only when it has work. 0 is logstore.DefaultMaxOpen.
	MaxOpenLogs int `yaml:"max_open_logs"`
}

// DefaultMaintain runs every role at its default interval, flushing once a
// minute.
func DefaultMaintain() Maintain {
	return Maintain{
		Enabled:             true,
		SealEvery:           DefaultSealEvery,
		CompactEvery:        DefaultCompactEvery,
		PublishEvery:        DefaultPublishEvery,
		CleanEvery:          DefaultCleanEvery,
		CleanPublishedEvery: DefaultCleanPublishedEvery,
		RetainEvery:         DefaultRetainEvery,
		FlushEvery:          DefaultFlushEvery,
		MaxOpenLogs:         logstore.DefaultMaxOpen,
	}
}

// MaintainRole is one role serve runs, with the pause between its passes.
type MaintainRole struct {
	Role  logstore.Role
	Every time.Duration
}

// maintainInterval ties a maintain: key to its role and field.
type maintainInterval struct {
	key   string
	role  logstore.Role
	every *time.Duration
}

func (m *Maintain) intervals() []maintainInterval {
	return []maintainInterval{
		{"seal_every", logstore.RoleSeal, &m.SealEvery},
		{"compact_every", logstore.RoleCompact, &m.CompactEvery},
		{"publish_every", logstore.RolePublish, &m.PublishEvery},
		{"clean_every", logstore.RoleClean, &m.CleanEvery},
		{"clean_published_every", logstore.RoleCleanPublished, &m.CleanPublishedEvery},
		{"retain_every", logstore.RoleRetain, &m.RetainEvery},
	}
}

// Roles returns the roles serve runs, in the order seal, compact, publish,
// clean, clean-published, retain: those with a positive interval, none when
// maintenance is off.
func (m Maintain) Roles() []MaintainRole {
	if !m.Enabled {
		return nil
	}
	var out []MaintainRole
	for _, iv := range m.intervals() {
		if *iv.every > 0 {
			out = append(out, MaintainRole{Role: iv.role, Every: *iv.every})
		}
	}
	return out
}

// Runs reports whether serve runs role.
func (m Maintain) Runs(role logstore.Role) bool {
	for _, r := range m.Roles() {
		if r.Role == role {
			return true
		}
	}
	return false
}

// UnmarshalYAML reads `maintain: false`, `maintain: true` or a mapping of
// intervals laid over DefaultMaintain. An interval is a duration ("250ms",
// "10s"), or 0 or null to not run that role.
func (m *Maintain) UnmarshalYAML(n *yaml.Node) error {
	*m = DefaultMaintain()
	switch {
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool":
		return n.Decode(&m.Enabled)
	case n.Kind != yaml.MappingNode:
		return fmt.Errorf("line %d: maintain is false, true, or a mapping of %s", n.Line, strings.Join(namesOf(reflect.TypeFor[Maintain]()), ", "))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, v := n.Content[i].Value, n.Content[i+1]
		if key == "max_open_logs" {
			if err := v.Decode(&m.MaxOpenLogs); err != nil {
				return fmt.Errorf("line %d: maintain.max_open_logs: give a whole number of logs, such as %d", v.Line, logstore.DefaultMaxOpen)
			}
			continue
		}
		d, err := parseInterval(v)
		if err != nil {
			return fmt.Errorf("line %d: maintain.%s: %w", v.Line, key, err)
		}
		if key == "flush_every" {
			m.FlushEvery = d
			continue
		}
		for _, iv := range m.intervals() {
			if iv.key == key {
				*iv.every = d
			}
		}
	}
	return nil
}

// parseInterval reads a duration, 0 or null (both 0).
func parseInterval(v *yaml.Node) (time.Duration, error) {
	if v.Kind != yaml.ScalarNode {
		return 0, errors.New("give a duration such as 10s, or 0")
	}
	switch v.ShortTag() {
	case "!!null":
		return 0, nil
	case "!!int":
		if n, err := strconv.ParseInt(v.Value, 10, 64); err == nil && n == 0 {
			return 0, nil
		}
		return 0, fmt.Errorf("%s has no unit; give a duration such as %ss, or 0", v.Value, v.Value)
	}
	d, err := time.ParseDuration(v.Value)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration; give one such as 250ms or 10s, or 0", v.Value)
	}
	return d, nil
}

// Validate checks the intervals: none negative, and a role set to run
// only when this build has it.
func (m *Maintain) Validate() error {
	if !m.Enabled {
		return nil
	}
	for _, iv := range m.intervals() {
		switch {
		case *iv.every < 0:
			return keyErrorf("maintain."+iv.key, "maintain.%s is %s; give a positive duration, or 0 to leave the %s role to you", iv.key, *iv.every, iv.role)
		case *iv.every > 0 && !slices.Contains(logstore.Roles(), iv.role):
			return keyErrorf("maintain."+iv.key, "maintain.%s is %s, but this build of streamcast has no %s role (it has %v); set it to 0", iv.key, *iv.every, iv.role, logstore.RoleNames())
		}
	}
	if m.MaxOpenLogs < 0 {
		return keyErrorf("maintain.max_open_logs", "maintain.max_open_logs is %d; give a positive number of logs, or 0 for %d", m.MaxOpenLogs, logstore.DefaultMaxOpen)
	}
	if m.FlushEvery < 0 {
		return keyErrorf("maintain.flush_every", "maintain.flush_every is %s; give a positive duration, or 0 to never flush", m.FlushEvery)
	}
	return nil
}

// MarshalYAML writes `false` when maintenance is off, else the intervals,
// in the form UnmarshalYAML reads back.
func (m Maintain) MarshalYAML() (any, error) {
	if !m.Enabled {
		return false, nil
	}
	type plain Maintain // without this method, or it would call itself
	return plain(m), nil
}

// Metrics is the metrics: section: serve's Prometheus endpoint at GET
// /metrics. Reading it is a read of every stream's figures, so it takes
// the grant /stats's process-wide figures take (stats on "*") unless it is
// public.
type Metrics struct {
	// Enabled serves /metrics and keeps the figures it reports; false
	// answers /metrics with 404 and skips the timing the latency
	// histograms need on the publish path. Applies when serve starts.
	Enabled bool `yaml:"enabled"`
	// Public lets anyone who reaches the port read /metrics, whatever the
	// auth: section grants (a scraper on a private network without
	// credentials). SIGHUP applies a change.
	Public bool `yaml:"public"`
}

// DefaultMetrics serves /metrics to whoever may read every stream's stats.
func DefaultMetrics() Metrics { return Metrics{Enabled: true} }

// Log is the log: section every command shares: how it logs to stderr.
type Log struct {
	// Level is the least severe level logged: debug, info, warn or error.
	Level string `yaml:"level"`
	// Format is text (coloured only on a terminal) or json.
	Format string `yaml:"format"`
	// Access makes serve log one line at info for each WebSocket
	// connection when it closes: who, which stream, as what, how it
	// closed, how many rows and how long. Off by default: a busy server
	// would log a line per connection. SIGHUP applies a change.
	Access bool `yaml:"access"`
}

// LogLevels are the values log.level may take, least severe first.
func LogLevels() []string { return []string{"debug", "info", "warn", "error"} }

// LogFormats are the values log.format may take.
func LogFormats() []string { return []string{"text", "json"} }

// DefaultLog is text at info. Text is the default everywhere, not only
// on a terminal: colours are dropped when stderr is not a terminal, and
// production asks for json explicitly (--log-format json). A default that
// depended on the terminal would also make the generated man pages depend
// on where they were generated.
func DefaultLog() Log { return Log{Level: "info", Format: "text"} }

// Validate lower-cases the level and format and refuses one streamcast does
// not know.
func (c *Log) Validate() error {
	c.Level = strings.ToLower(c.Level)
	c.Format = strings.ToLower(c.Format)
	if !slices.Contains(LogLevels(), c.Level) {
		return keyErrorf("log.level", "log.level %q is not one of %s", c.Level, strings.Join(LogLevels(), ", "))
	}
	if !slices.Contains(LogFormats(), c.Format) {
		return keyErrorf("log.format", "log.format %q is not one of %s", c.Format, strings.Join(LogFormats(), ", "))
	}
	return nil
}

// Warnings returns what a valid config allows but an operator should
// hear about, one sentence each, for `streamcast config` and serve to log.
func (c Config) Warnings() []string {
	var out []string
	if c.Auth != nil && slices.Contains(c.AllowedOrigins, "*") {
		out = append(out, `allowed_origins holds "*" while auth: is set: any web page a logged-in user visits may open WebSockets with that user's credentials and read or publish as them; `+
			"list the origins of your own pages instead (or leave allowed_origins out, which admits the server's own pages only)")
	}
	return out
}
