package meta

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/replica"
)

// Outcome says how Resolve came by the metadata it returned.
type Outcome int

const (
	// Found: the home's own metadata.
	Found Outcome = iota
	// CaughtUp: the home's metadata was behind the published copy of the
	// same stream (a commit cut short between its two writes) and was
	// brought forward to it.
	CaughtUp
	// Adopted: the home had logs but no metadata; the published copy's
	// current version was copied in.
	Adopted
	// Upgraded: the home had logs made before stream metadata existed,
	// and no metadata was anywhere; they were recorded once under a newly
	// minted stream id.
	Upgraded
	// Absent: nothing of the stream anywhere. The caller may create its
	// first log and commit New metadata naming it.
	Absent
)

func (o Outcome) String() string {
	switch o {
	case Found:
		return "found"
	case CaughtUp:
		return "caught up"
	case Adopted:
		return "adopted"
	case Upgraded:
		return "upgraded"
	case Absent:
		return "absent"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Resolution is what Resolve found of a stream.
type Resolution struct {
	// Metadata is the stream's current version; nil when Outcome is
	// Absent. Its Retirement, when set, binds the caller: a retired
	// stream takes no rows and gets no successor log.
	Metadata *Metadata
	Outcome  Outcome
	// Warning is a problem that did not stop the resolution: the
	// published copy could not be read or repaired while the home has
	// metadata of its own. nil otherwise.
	Warning error
}

// ErrExistingHistory is wrapped by Resolve's refusal to let a stream
// start afresh where history of it exists (I8).
var ErrExistingHistory = errors.New("the stream has history that a new start would overwrite")

// ErrWrongLog is wrapped by the refusal of a log on disk that is not the
// one the stream's metadata names as current.
var ErrWrongLog = errors.New("the log on disk is not the one the stream metadata names")

// HistoryError is Resolve's refusal of a home that lacks what the
// published prefix holds of the stream. It wraps ErrExistingHistory.
type HistoryError struct {
	Stream    string
	Home      string   // the stream's home directory
	Published string   // <prefix>/<stream>/, as a URI
	Found     []string // what the prefix holds, worded for a person
	Why       string   // what is missing at home
}

// Error names what was found and the way out: streamcast restore.
func (e *HistoryError) Error() string {
	return fmt.Sprintf("stream %q: %s, but %s holds %s; serving it from here would start a new history and reissue offsets its consumers already hold (docs/design.md I8). "+
		"Run `streamcast restore %s` (with the server stopped) to rebuild its home %s from the published copy, or point published at an empty prefix to start a new stream",
		e.Stream, e.Why, e.Published, joinWords(e.Found), e.Stream, e.Home)
}

// Unwrap returns ErrExistingHistory.
func (e *HistoryError) Unwrap() error { return ErrExistingHistory }

// Resolve finds the stream's current metadata and never mints an identity
// over data that exists (I8). Every path that creates a stream or a log
// calls it first (serve; migrate, retire, retain, restore and ingest
// after it). The cases:
//
//   - the home has metadata: it is the answer (Found). The published
//     copy is read once: a later version of the same stream there (a
//     commit cut short) is copied home (CaughtUp); a missing or older one
//     is rewritten from the home's; another stream id there is refused.
//   - the home has logs but no metadata, and the published prefix has
//     metadata: its current version is adopted (compare-and-swap against
//     no version at home), then the live log on disk must be the one it
//     names (ErrWrongLog otherwise; the copy stays adopted).
//   - the home has logs and nothing has metadata: the logs were made
//     before metadata existed and are recorded once, under a new stream id
//     (Upgraded); later starts find that metadata. A table under the
//     prefix of a log the home lacks is refused.
//   - the home has nothing: a prefix holding the stream's metadata, a
//     table or a WAL replica is refused with a *HistoryError; an empty
//     (or missing) prefix or bucket gives Absent.
//
// The check costs one metadata read and one one-level listing of
// <prefix>/<stream>/, and the listing happens only when the home has no
// metadata.
func Resolve(ctx context.Context, st *Store) (Resolution, error) {
	home, data, err := st.readLike(ctx, st.home, nil, nil)
	switch {
	case err == nil:
		return st.reconcile(ctx, home, data)
	case !errors.Is(err, ErrNoMetadata):
		return Resolution{}, fmt.Errorf("stream %q: %w", st.stream, err)
	}

	logs, err := LocalLogs(st.lay, st.stream)
	if err != nil {
		return Resolution{}, err
	}
	unreachable := func(err error) (Resolution, error) {
		return Resolution{}, fmt.Errorf("stream %q has no metadata in its home %s, and whether %s holds its history cannot be told: %w; "+
			"retry once the published prefix is reachable (a stream is never started afresh over history it may have)",
			st.stream, st.lay.StreamDir(st.stream), st.pubDirURI(), err)
	}
	pub, err := st.LoadPublished(ctx)
	if err != nil && !errors.Is(err, ErrNoMetadata) {
		return unreachable(err)
	}
	if err != nil {
		pub = nil
	}
	entries, err := st.pub.list(ctx)
	if err != nil {
		return unreachable(err)
	}

	if len(logs) == 0 {
		if pub == nil && len(entries) == 0 {
			return Resolution{Outcome: Absent}, nil
		}
		return Resolution{}, &HistoryError{
			Stream: st.stream, Home: st.lay.StreamDir(st.stream), Published: st.pubDirURI(),
			Why:   "its home " + st.lay.StreamDir(st.stream) + " has no logs and no metadata",
			Found: st.describeFound(pub, entries),
		}
	}

	if pub != nil {
		if err := st.Adopt(ctx, pub); err != nil {
			return Resolution{}, fmt.Errorf("stream %q: adopt the published metadata: %w", st.stream, err)
		}
		if err := checkOnDisk(st.lay, pub); err != nil {
			return Resolution{}, err
		}
		return Resolution{Metadata: pub, Outcome: Adopted}, nil
	}

	// No metadata anywhere: logs from before metadata. A table of a log
	// this home lacks is history the upgrade would leave out.
	have := map[string]bool{}
	for _, l := range logs {
		have[l] = true
	}
	var foreign []string
	for _, e := range entries {
		name, dir := strings.CutSuffix(e, "/")
		if !dir || have[name] || name == replica.WALDir || name == metadataDirName(st.stream) {
			continue
		}
		foreign = append(foreign, name)
	}
	if len(foreign) > 0 {
		return Resolution{}, &HistoryError{
			Stream: st.stream, Home: st.lay.StreamDir(st.stream), Published: st.pubDirURI(),
			Why:   "its home holds the logs " + joinWords(logs) + " and no metadata",
			Found: []string{"tables of logs it lacks (" + joinWords(foreign) + ")"},
		}
	}
	m, err := st.upgrade(ctx, logs)
	if err != nil {
		return Resolution{}, err
	}
	return Resolution{Metadata: m, Outcome: Upgraded}, nil
}

// reconcile compares the home's metadata (read from data) with the
// published copy, which is parsed only when its bytes differ.
func (s *Store) reconcile(ctx context.Context, home *Metadata, data []byte) (Resolution, error) {
	res := Resolution{Metadata: home, Outcome: Found}
	pub, _, err := s.readLike(ctx, s.pub, home, data)
	switch {
	case err == nil && pub.StreamID != home.StreamID:
		return Resolution{}, fmt.Errorf("stream %q: its home %s names stream_id %s, but %s names %s: two histories claim this stream; "+
			"point published at the prefix this home publishes to, or move one of the two away",
			s.stream, s.HomeURI(), home.StreamID, s.PublishedURI(), pub.StreamID)
	case err == nil && pub.Version > home.Version:
		// A commit that wrote its published copy and stopped before the
		// home's: the published version is committed; bring the home to it.
		if err := s.copyTo(ctx, s.home, pub); err != nil {
			return Resolution{}, fmt.Errorf("stream %q: bring the home's metadata (version %d) to the published version %d: %w", s.stream, home.Version, pub.Version, err)
		}
		return Resolution{Metadata: pub, Outcome: CaughtUp}, nil
	case err == nil && pub.Version == home.Version:
		return res, nil
	case err == nil || errors.Is(err, ErrNoMetadata):
		// Readers elsewhere depend on the published copy: put the home's
		// current version back there (a wiped or new prefix), unless the
		// current log publishes under another prefix than this store's.
		if cur := home.Current(); cur != nil && cur.Location != s.tableURI(cur.Name) {
			res.Warning = fmt.Errorf("stream %q: its current log %s publishes to %s, not under %s; its metadata is not republished there", s.stream, cur.Name, cur.Location, s.pubDirURI())
			return res, nil
		}
		if err := s.copyTo(ctx, s.pub, home); err != nil {
			res.Warning = fmt.Errorf("republish the metadata of stream %q to %s: %w", s.stream, s.pubDirURI(), err)
		}
		return res, nil
	default:
		res.Warning = fmt.Errorf("read the published metadata of stream %q: %w", s.stream, err)
		return res, nil
	}
}

// upgrade records logs (made before metadata existed) under a new stream
// id, each at the first offset it stores (logs that store none start at
// offset 1, or at the end of the one before); all but the last are sealed.
func (s *Store) upgrade(ctx context.Context, logs []string) (*Metadata, error) {
	m, err := New(s.stream)
	if err != nil {
		return nil, err
	}
	start := int64(1)
	for i, name := range logs {
		// A log too old to store its names is named by the directory
		// the home's listing found it in (LocalLogs takes only the names
		// LogName gives this stream): the one place a name comes from a
		// directory, taken once here and recorded in the metadata, which
		// names the log from then on.
		lg, err := logstore.Open(s.lay.LogDir(s.stream, name), logstore.ReadOnly, logstore.WithNames(s.stream, name))
		if err != nil {
			return nil, fmt.Errorf("stream %q: record its log %s: %w", s.stream, name, err)
		}
		// A log knows its own first offset (logstore.Config.Start); the
		// chain of ends is only a fallback for a log that does not say.
		if st := lg.Config().Start; st > 0 {
			start = st
		}
		d, err := DescribeLog(lg, start)
		// Its name in the stream is the one the layout found it under; a
		// log moved here from another stream keeps its own stored names,
		// which name its table (d.Location).
		d.Name = name
		var end int64
		if err == nil {
			_, end, err = lg.Extent(ctx)
		}
		sch := lg.Schema()
		_ = lg.Close()
		if err != nil {
			return nil, fmt.Errorf("stream %q: record its log %s: %w", s.stream, name, err)
		}
		if i < len(logs)-1 {
			d.State, d.EndOffset = Sealed, &end
		}
		if err := m.AddLog(d, sch); err != nil {
			return nil, fmt.Errorf("stream %q: record its log %s: %w", s.stream, name, err)
		}
		start = end
	}
	return s.Commit(ctx, m)
}

// CommitFirst commits the first metadata of a new stream, naming lg, just
// created, as its first log (starting at offset 1) under a newly minted
// stream id. The caller has asked Resolve and found nothing of the stream
// anywhere (I8).
func (s *Store) CommitFirst(ctx context.Context, lg *logstore.Log) (*Metadata, error) {
	m, err := New(s.stream)
	if err != nil {
		return nil, err
	}
	d, err := DescribeLog(lg, 1)
	if err != nil {
		return nil, err
	}
	if err := m.AddLog(d, lg.Schema()); err != nil {
		return nil, err
	}
	return s.Commit(ctx, m)
}

// DescribeLog describes the open log lg as a stream's live log starting
// at offset start: its name and table location (from the names it
// stores, never its directory's: Log.Names), id, schema and sort order.
func DescribeLog(lg *logstore.Log, start int64) (Log, error) {
	stream, name, err := lg.Names()
	if err != nil {
		return Log{}, fmt.Errorf("describe log %s: %w", lg.Dir(), err)
	}
	cfg := lg.Config()
	p, err := cfg.PublishedPrefix(lg.Dir())
	if err != nil {
		return Log{}, err
	}
	loc := p.Join(stream, name)
	if p.S3 == "" {
		loc = fileURI(loc)
	}
	d := Log{Name: name, LogID: lg.ID(), SortBy: cfg.SortBy, Location: loc, StartOffset: start, State: Live}
	if !lg.Schema().IsAny() {
		d.Schema = append([]byte(nil), lg.Schema().JSON()...)
	}
	return d, nil
}

// CheckLive refuses lg as the stream's current log unless it is the one m
// names. The caller opens lg where the layout places the current log
// (Layout.LogDir with its name in m), so what is checked is its identity,
// never its directory's name: the log id it stores against the one m
// records, when both are known.
func (m *Metadata) CheckLive(lg *logstore.Log) error {
	cur := m.Current()
	if cur == nil {
		return fmt.Errorf("stream %q: its metadata (version %d) names no log: %w", m.Stream, m.Version, ErrWrongLog)
	}
	if cur.LogID != "" && lg.ID() != "" && cur.LogID != lg.ID() {
		return fmt.Errorf("stream %q: its metadata (version %d) names log %s (log_id %s) as current, but %s is log_id %s: %w; "+
			"restore that log's directory from a backup, or move the stream's home away and run `streamcast restore %s` to rebuild it from the published copy",
			m.Stream, m.Version, cur.Name, orNone(cur.LogID), lg.Dir(), orNone(lg.ID()), ErrWrongLog, m.Stream)
	}
	return nil
}

// checkOnDisk checks that the current log of m is on disk and is the one
// m names.
func checkOnDisk(lay Layout, m *Metadata) error {
	cur := m.Current()
	if cur == nil {
		return fmt.Errorf("stream %q: its metadata (version %d) names no log: %w", m.Stream, m.Version, ErrWrongLog)
	}
	dir := lay.LogDir(m.Stream, cur.Name)
	lg, err := logstore.Open(dir, logstore.ReadOnly)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("stream %q: its metadata (version %d) names log %s as current, but %s holds no log: %w; "+
			"restore that log's directory from a backup, or move the stream's home away and run `streamcast restore %s` to rebuild it from the published copy", m.Stream, m.Version, cur.Name, dir, ErrWrongLog, m.Stream)
	}
	if err != nil {
		return fmt.Errorf("stream %q: %w", m.Stream, err)
	}
	defer lg.Close()
	return m.CheckLive(lg)
}

// LocalLogs returns the names of the stream's logs in its home, in order
// (<stream>, <stream>-v2, …): the directories named as LogName names them
// that hold a buffer.db.
func LocalLogs(lay Layout, stream string) ([]string, error) {
	entries, err := os.ReadDir(lay.StreamDir(stream))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stream %q: list its home: %w", stream, err)
	}
	type numbered struct {
		n    int
		name string
	}
	var logs []numbered
	for _, e := range entries {
		n := logNumber(stream, e.Name())
		if n == 0 || !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(lay.LogDir(stream, e.Name()), logstore.BufferFile)); err != nil {
			continue
		}
		logs = append(logs, numbered{n, e.Name()})
	}
	slices.SortFunc(logs, func(a, b numbered) int { return a.n - b.n })
	out := make([]string, len(logs))
	for i, l := range logs {
		out[i] = l.name
	}
	return out, nil
}

// logNumber returns n when name is LogName(stream, n), else 0.
func logNumber(stream, name string) int {
	if name == stream {
		return 1
	}
	rest, ok := strings.CutPrefix(name, stream+"-v")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 2 || LogName(stream, n) != name {
		return 0
	}
	return n
}

// describeFound words what the published prefix holds of the stream.
func (s *Store) describeFound(pub *Metadata, entries []string) []string {
	var found, tables []string
	if pub != nil {
		found = append(found, fmt.Sprintf("its metadata (version %d, stream_id %s, %d log(s)%s)", pub.Version, pub.StreamID, len(pub.Logs), retiredNote(pub)))
	}
	wal, other := false, 0
	for _, e := range entries {
		name, dir := strings.CutSuffix(e, "/")
		switch {
		case name == replica.WALDir && dir:
			wal = true
		case name == metadataDirName(s.stream) || name == plainMetadataName(s.stream):
			if pub == nil {
				found = append(found, "metadata files ("+e+")")
			}
		case dir:
			tables = append(tables, name)
		default:
			other++
		}
	}
	if len(tables) > 0 {
		found = append(found, "the table(s) "+joinWords(tables))
	}
	if wal {
		found = append(found, "a WAL replica ("+replica.WALDir+"/)")
	}
	if other > 0 {
		found = append(found, strconv.Itoa(other)+" other object(s)")
	}
	return found
}

func retiredNote(m *Metadata) string {
	if m.Retirement == nil {
		return ""
	}
	return fmt.Sprintf(", retired at offset %d", m.Retirement.EndOffset)
}

// tableURI is the URI of the published table of the stream's log named
// log, as DescribeLog spells it.
func (s *Store) tableURI(log string) string {
	loc := s.lay.TableLocation(s.stream, log)
	if s.lay.Published().S3 == "" {
		return fileURI(loc)
	}
	return loc
}

// pubDirURI is <prefix>/<stream>/ as a URI.
func (s *Store) pubDirURI() string { return s.pub.uri("") }

// fileURI spells an absolute directory as a file:// URL.
func fileURI(dir string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
}

func orNone(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// joinWords joins items as "a", "a and b", "a, b and c".
func joinWords(items []string) string {
	switch len(items) {
	case 0:
		return "nothing"
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}
