package broker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/schema"
)

// Defaults, in one place. DefaultConfig and DefaultStream are built from them.
const (
	DefaultListen          = "127.0.0.1:8765"
	DefaultRoot            = "./streamcast-data"
	DefaultMaxBacklog      = 8192
	DefaultMaxInbound      = 65536
	DefaultMaxInFlight     = 64
	DefaultMaxMessageBytes = 1 << 20
	DefaultMaxReplay       = 100000

	// How often serve's maintenance children run their roles (maintain:).
	DefaultSealEvery           = 250 * time.Millisecond
	DefaultCompactEvery        = 10 * time.Second
	DefaultPublishEvery        = 10 * time.Second
	DefaultCleanEvery          = 10 * time.Second
	DefaultCleanPublishedEvery = 60 * time.Second
	DefaultFlushEvery          = 60 * time.Second
)

// Config is the server's configuration: what `streamcast serve` reads from
// streamcast.yaml (viper only fills it from the environment and flags). Start
// from DefaultConfig; Validate before use.
type Config struct {
	// Listen is the TCP address to serve on; ":0" picks a free port.
	Listen string `yaml:"listen"`
	// Root is the directory holding every durable stream's logs, laid out
	// by pkg/meta: the first log of a stream at <root>/<stream>/<stream>/.
	Root string `yaml:"root"`
	// Limits bound memory per connection and per stream.
	Limits Limits `yaml:"limits"`
	// Streams are the streams served, each at /<name>.
	Streams []StreamConfig `yaml:"streams"`
	// Maintain says which maintenance roles serve runs as child processes
	// over the durable streams' logs, and how often.
	Maintain MaintainConfig `yaml:"maintain"`
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
	S3 logstore.S3Config `yaml:"s3"`
	// Tiers sets the sizes, retention and grace periods each log stores
	// when serve creates it.
	Tiers TierConfig `yaml:"tiers"`
	// AllowedOrigins lists the browser origins (scheme://host[:port], as a
	// browser sends its Origin header, such as https://app.example.com)
	// whose pages may open WebSockets on this server. Empty, or "*" alone,
	// allows every origin. A request without an Origin header (wscat, the Go
	// client, any non-browser client) is not a browser's cross-site request
	// and is always served; this is no authentication.
	AllowedOrigins []string `yaml:"allowed_origins"`
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
	// the server stops reading its socket.
	MaxInFlight int `yaml:"max_in_flight"`
	// MaxMessageBytes is the largest publish frame accepted; larger ones
	// close the connection with 1009.
	MaxMessageBytes int `yaml:"max_message_bytes"`
}

// StreamConfig declares one stream. Start from DefaultStream: its zero value
// is a live-only stream with unbounded replay, which is rarely what you mean.
type StreamConfig struct {
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
	// GroupCommit lets rows queued while a commit is in flight share the next
	// one; off, every publish frame is its own commit.
	GroupCommit bool `yaml:"group_commit"`
	// MaxReplay bounds how many rows back a subscriber may resume; nil is
	// unbounded (YAML null).
	MaxReplay *int64 `yaml:"max_replay"`
	// ExactlyOnce lets publishers name themselves with publisher=ID.
	ExactlyOnce bool `yaml:"exactly_once"`
}

// DefaultConfig returns the configuration with every default filled in and no
// streams.
func DefaultConfig() Config {
	return Config{
		Listen: DefaultListen,
		Root:   DefaultRoot,
		Limits: Limits{
			MaxBacklog:      DefaultMaxBacklog,
			MaxInbound:      DefaultMaxInbound,
			MaxInFlight:     DefaultMaxInFlight,
			MaxMessageBytes: DefaultMaxMessageBytes,
		},
		Maintain: DefaultMaintain(),
	}
}

// DefaultStream returns a durable, group-committing stream named name with no
// schema and max_replay 100000.
func DefaultStream(name string) StreamConfig {
	mr := int64(DefaultMaxReplay)
	return StreamConfig{Name: name, Durable: true, GroupCommit: true, MaxReplay: &mr}
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

// EmbeddedConfig is what `streamcast serve` serves without --config: a durable
// demo stream of trades under ./streamcast-data on 127.0.0.1:8765.
func EmbeddedConfig() Config {
	c := DefaultConfig()
	demo := DefaultStream("demo")
	demo.Schema = RawJSON(DemoSchema)
	demo.SortBy = []string{"event_ts"}
	c.Streams = []StreamConfig{demo}
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
	b, err := nodeJSON(nil, n)
	if err != nil {
		return err
	}
	*r = b
	return nil
}

// MarshalYAML writes the document as YAML (through its JSON value).
func (r RawJSON) MarshalYAML() (any, error) {
	if len(r) == 0 {
		return nil, nil
	}
	var n yaml.Node
	if err := yaml.Unmarshal(r, &n); err != nil {
		return string(r), nil
	}
	if len(n.Content) == 1 {
		return n.Content[0], nil
	}
	return string(r), nil
}

// nodeJSON appends the JSON encoding of a YAML node.
func nodeJSON(dst []byte, n *yaml.Node) ([]byte, error) {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return append(dst, "null"...), nil
		}
		return nodeJSON(dst, n.Content[0])
	case yaml.AliasNode:
		return nodeJSON(dst, n.Alias)
	case yaml.MappingNode:
		dst = append(dst, '{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				dst = append(dst, ',')
			}
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: a JSON Schema key must be a string", k.Line)
			}
			kb, _ := json.Marshal(k.Value)
			dst = append(dst, kb...)
			dst = append(dst, ':')
			var err error
			if dst, err = nodeJSON(dst, n.Content[i+1]); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	case yaml.SequenceNode:
		dst = append(dst, '[')
		for i, c := range n.Content {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = nodeJSON(dst, c); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return append(dst, "null"...), nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				return nil, err
			}
			return strconv.AppendBool(dst, b), nil
		case "!!int":
			var i int64
			if err := n.Decode(&i); err != nil {
				return nil, fmt.Errorf("line %d: %w", n.Line, err)
			}
			return strconv.AppendInt(dst, i, 10), nil
		case "!!float":
			var f float64
			if err := n.Decode(&f); err != nil {
				return nil, fmt.Errorf("line %d: %w", n.Line, err)
			}
			b, err := json.Marshal(f)
			if err != nil {
				return nil, fmt.Errorf("line %d: %v is not a JSON number", n.Line, n.Value)
			}
			return append(dst, b...), nil
		default:
			b, _ := json.Marshal(n.Value)
			return append(dst, b...), nil
		}
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node", n.Line)
}

// UnmarshalYAML fills a stream declaration on top of DefaultStream, so a key
// left out keeps its default and max_replay: null means unbounded.
func (s *StreamConfig) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: a stream is a mapping of name, schema, durable, …", n.Line)
	}
	type plain StreamConfig
	p := plain(DefaultStream(""))
	if err := n.Decode(&p); err != nil {
		return err
	}
	*s = StreamConfig(p)
	return nil
}

// known lists the keys each part of the file may hold.
var (
	// log is the logging section every command shares (read by cmd).
	topKeys      = []string{"listen", "root", "limits", "streams", "maintain", "published", "s3", "tiers", "allowed_origins", "log"}
	limitKeys    = []string{"max_backlog", "max_inbound", "max_in_flight", "max_message_bytes"}
	streamKeys   = []string{"name", "schema", "schema_file", "sort_by", "durable", "group_commit", "max_replay", "exactly_once"}
	maintainKeys = []string{"seal_every", "compact_every", "publish_every", "clean_every", "clean_published_every", "flush_every"}
)

// checkKeys refuses a key outside allowed, naming it with its path and line,
// and records the key of each value's line in lines (to name keys in type
// errors).
func checkKeys(n *yaml.Node, path string, allowed []string, lines map[int]string) error {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i].Value
		full := k
		if path != "" {
			full = path + "." + k
		}
		if seen[k] {
			return fmt.Errorf("line %d: key %s is given twice", n.Content[i].Line, full)
		}
		seen[k] = true
		if !slices.Contains(allowed, k) && credentialKey(k) {
			return fmt.Errorf("line %d: key %s: %s", n.Content[i].Line, full, credentialsNote)
		}
		if !slices.Contains(allowed, k) {
			return fmt.Errorf("line %d: unknown key %s (known here: %s)", n.Content[i].Line, full, strings.Join(allowed, ", "))
		}
		lines[n.Content[i+1].Line] = full // the deepest key of a line wins
	}
	return nil
}

// ParseConfig reads a YAML config on top of DefaultConfig. Unknown keys are
// refused, naming the key. Relative schema_file paths are resolved against
// dir. It does not validate: call Validate.
func ParseConfig(data []byte, dir string) (Config, error) {
	cfg := DefaultConfig()
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return cfg, fmt.Errorf("config is not valid YAML: %w", err)
	}
	if len(doc.Content) == 0 {
		return cfg, errors.New("config is empty; it needs at least a streams list")
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return cfg, fmt.Errorf("line %d: the config is a mapping of listen, root, limits and streams", top.Line)
	}
	lines := map[int]string{}
	if err := checkKeys(top, "", topKeys, lines); err != nil {
		return cfg, err
	}
	mine := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for i := 0; i+1 < len(top.Content); i += 2 {
		v := top.Content[i+1]
		switch top.Content[i].Value {
		case "log":
			continue // another command's section
		case "limits":
			if err := checkKeys(v, "limits", limitKeys, lines); err != nil {
				return cfg, err
			}
		case "maintain":
			if err := checkKeys(v, "maintain", maintainKeys, lines); err != nil {
				return cfg, err
			}
		case "s3":
			if err := checkKeys(v, "s3", s3Keys, lines); err != nil {
				return cfg, err
			}
		case "tiers":
			if err := checkKeys(v, "tiers", tierKeys, lines); err != nil {
				return cfg, err
			}
		case "streams":
			if v.Kind != yaml.SequenceNode && v.ShortTag() != "!!null" {
				return cfg, fmt.Errorf("line %d: streams is a list of stream declarations", v.Line)
			}
			for j, s := range v.Content {
				if err := checkKeys(s, fmt.Sprintf("streams[%d]", j), streamKeys, lines); err != nil {
					return cfg, err
				}
			}
		}
		mine.Content = append(mine.Content, top.Content[i], v)
	}
	if err := mine.Decode(&cfg); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			msgs := make([]string, len(te.Errors))
			for i, m := range te.Errors {
				msgs[i] = m
				var line int
				if _, serr := fmt.Sscanf(m, "line %d:", &line); serr == nil {
					if key, ok := lines[line]; ok {
						msgs[i] = key + ": " + m
					}
				}
			}
			return cfg, fmt.Errorf("config: %s", strings.Join(msgs, "; "))
		}
		return cfg, fmt.Errorf("config: %w", err)
	}
	for i := range cfg.Streams {
		s := &cfg.Streams[i]
		if s.SchemaFile != "" && !filepath.IsAbs(s.SchemaFile) && dir != "" {
			s.SchemaFile = filepath.Join(dir, s.SchemaFile)
		}
	}
	return cfg, nil
}

// LoadConfigFile reads and parses a config file; see ParseConfig.
func LoadConfigFile(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return DefaultConfig(), fmt.Errorf("read config: %w", err)
	}
	cfg, err := ParseConfig(data, filepath.Dir(path))
	if err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// Validate checks the whole configuration before anything is opened: limits
// of at least 1, the maintain:, published:, s3: and tiers: sections, stream
// names valid and distinct, every schema compiling, and sort_by naming
// columns. Each error names the key it is about.
func (c *Config) Validate() error {
	_, err := c.compile()
	return err
}

// compile validates c and returns each stream's compiled schema, in order.
func (c *Config) compile() ([]*schema.Schema, error) {
	if strings.TrimSpace(c.Listen) == "" {
		return nil, errors.New("listen is empty; give an address such as 127.0.0.1:8765 (or :0 for any free port)")
	}
	for _, l := range []struct {
		key string
		v   int
	}{
		{"max_backlog", c.Limits.MaxBacklog},
		{"max_inbound", c.Limits.MaxInbound},
		{"max_in_flight", c.Limits.MaxInFlight},
		{"max_message_bytes", c.Limits.MaxMessageBytes},
	} {
		if l.v < 1 {
			return nil, fmt.Errorf("limits.%s is %d; it must be at least 1", l.key, l.v)
		}
	}
	if err := c.Maintain.Validate(); err != nil {
		return nil, err
	}
	if err := c.validateStorage(); err != nil {
		return nil, err
	}
	if err := validateOrigins(c.AllowedOrigins); err != nil {
		return nil, err
	}
	if len(c.Streams) == 0 {
		return nil, errors.New("streams is empty; declare at least one stream (name, schema, …)")
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
				return nil, fmt.Errorf("%s.name %w", key, err)
			}
			names = append(names, s.Name)
		}
		if j, dup := seen[meta.Fold(s.Name)]; dup {
			if c.Streams[j].Name == s.Name {
				return nil, fmt.Errorf("%s.name %q is already the name of streams[%d]; stream names must be distinct", key, s.Name, j)
			}
			return nil, fmt.Errorf("%s.name %q differs from streams[%d]'s %q only in case; on a case-insensitive file system they would share a directory, so choose names that differ in more than case",
				key, s.Name, j, c.Streams[j].Name)
		}
		seen[meta.Fold(s.Name)] = i
		label := fmt.Sprintf("stream %q (%s)", s.Name, key)
		if s.Durable && s.Name == "" {
			return nil, fmt.Errorf("%s is durable but has the empty name, which names no directory; give it a name or durable: false", label)
		}
		if s.Durable && strings.TrimSpace(c.Root) == "" {
			return nil, fmt.Errorf("root is empty, but %s is durable and needs a directory for its log", label)
		}
		if s.MaxReplay != nil && *s.MaxReplay < 0 {
			return nil, fmt.Errorf("%s: max_replay is %d; give a count of rows ≥ 0, or null for unbounded", label, *s.MaxReplay)
		}
		doc := []byte(s.Schema)
		if s.SchemaFile != "" {
			if len(s.Schema) > 0 {
				return nil, fmt.Errorf("%s gives both schema and schema_file; give one", label)
			}
			b, err := os.ReadFile(s.SchemaFile)
			if err != nil {
				return nil, fmt.Errorf("%s: schema_file: %w", label, err)
			}
			doc = b
		}
		if len(bytes.TrimSpace(doc)) == 0 || string(bytes.TrimSpace(doc)) == "null" {
			schemas[i] = schema.Any()
		} else {
			sch, err := schema.Compile(doc)
			if err != nil {
				return nil, fmt.Errorf("%s: schema: %w", label, err)
			}
			schemas[i] = sch
		}
		for _, col := range s.SortBy {
			if schemas[i].IsAny() {
				return nil, fmt.Errorf("%s: sort_by names %q, but the stream has no schema and so no columns", label, col)
			}
			if _, ok := schemas[i].ColumnIndex(col); !ok {
				return nil, fmt.Errorf("%s: sort_by names %q, which is not a column of its schema", label, col)
			}
		}
	}
	if lay, err := c.layout(); err == nil {
		if err := lay.Check(names); err != nil {
			return nil, err
		}
	}
	return schemas, nil
}

// MaintainConfig is the maintain: section: which maintenance roles serve
// runs, as one `streamcast maintain --role R` child process per role over
// every durable stream's log, and how often each makes a pass.
//
// The roles that run are exactly those whose interval is positive. An
// interval of 0 (or null) leaves that role to you: run `streamcast maintain
// --role R` yourself, or nothing does it. `maintain: false` (or serve
// --no-maintain) runs no child at all; `maintain: true`, an empty section or
// none is DefaultMaintain, which runs every role.
type MaintainConfig struct {
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
	// FlushEvery makes seal and publish cut everything buffered once per
	// interval, at wall-clock multiples of it, and makes a graceful stop
	// flush too. 0 never flushes: not on a schedule, not at a stop.
	FlushEvery time.Duration `yaml:"flush_every"`
}

// DefaultMaintain runs every role at its default interval, flushing once a
// minute.
func DefaultMaintain() MaintainConfig {
	return MaintainConfig{
		Enabled:             true,
		SealEvery:           DefaultSealEvery,
		CompactEvery:        DefaultCompactEvery,
		PublishEvery:        DefaultPublishEvery,
		CleanEvery:          DefaultCleanEvery,
		CleanPublishedEvery: DefaultCleanPublishedEvery,
		FlushEvery:          DefaultFlushEvery,
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

func (m *MaintainConfig) intervals() []maintainInterval {
	return []maintainInterval{
		{"seal_every", logstore.RoleSeal, &m.SealEvery},
		{"compact_every", logstore.RoleCompact, &m.CompactEvery},
		{"publish_every", logstore.RolePublish, &m.PublishEvery},
		{"clean_every", logstore.RoleClean, &m.CleanEvery},
		{"clean_published_every", logstore.RoleCleanPublished, &m.CleanPublishedEvery},
	}
}

// Roles returns the roles serve runs, in the order seal, compact, publish,
// clean, clean-published: those with a positive interval, none when
// maintenance is off.
func (m MaintainConfig) Roles() []MaintainRole {
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
func (m MaintainConfig) Runs(role logstore.Role) bool {
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
func (m *MaintainConfig) UnmarshalYAML(n *yaml.Node) error {
	*m = DefaultMaintain()
	switch {
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool":
		return n.Decode(&m.Enabled)
	case n.Kind != yaml.MappingNode:
		return fmt.Errorf("line %d: maintain is false, true, or a mapping of %s", n.Line, strings.Join(maintainKeys, ", "))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, v := n.Content[i].Value, n.Content[i+1]
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
func (m *MaintainConfig) Validate() error {
	if !m.Enabled {
		return nil
	}
	for _, iv := range m.intervals() {
		switch {
		case *iv.every < 0:
			return fmt.Errorf("maintain.%s is %s; give a positive duration, or 0 to leave the %s role to you", iv.key, *iv.every, iv.role)
		case *iv.every > 0 && !slices.Contains(logstore.Roles(), iv.role):
			return fmt.Errorf("maintain.%s is %s, but this build of streamcast has no %s role (it has %v); set it to 0", iv.key, *iv.every, iv.role, logstore.RoleNames())
		}
	}
	if m.FlushEvery < 0 {
		return fmt.Errorf("maintain.flush_every is %s; give a positive duration, or 0 to never flush", m.FlushEvery)
	}
	return nil
}
